"""CreateTopics with validate_only: every check a real creation makes (Kafka's ReplicationControlManager runs them
all and commits nothing), so an invalid config or an existing name is refused as it would be, and a valid request
writes no record."""

from __future__ import annotations

import pytest
from ctrl_harness import Harness, three_broker_topic

from insync import errors
from insync.errors import KafkaException


def test_validate_only_refuses_an_unknown_config_key_naming_it() -> None:
    h = Harness()
    h.start(1, 2, 3)
    with pytest.raises(KafkaException) as refused:
        h.controller.create_topic("u", 1, 3, {"dummy.doesntexist": "x"}, h.now, validate_only=True)
    assert refused.value.error is errors.INVALID_CONFIG and "dummy.doesntexist" in str(refused.value.detail)


def test_validate_only_refuses_an_existing_topic() -> None:
    h = three_broker_topic()
    with pytest.raises(KafkaException) as refused:
        h.controller.create_topic("t", 1, 3, {}, h.now, validate_only=True)
    assert refused.value.error is errors.TOPIC_ALREADY_EXISTS


def test_validate_only_writes_nothing_and_answers_the_placement() -> None:
    h = Harness()
    h.start(1, 2, 3)
    result = h.controller.create_topic("u", 2, 3, {"compression.type": "lz4", "delete.retention.ms": "900"}, h.now,
                                       validate_only=True)
    assert result.records == () and h.controller.image.topic("u") is None
    assert result.response.topic_id == "" and len(result.response.assignments) == 2
