"""Admin requests librdkafka's own test suite (0081_admin, `make compat`) makes, answered as Kafka 4.0 answers
them, with confluent-kafka's AdminClient: CreateTopics with validate_only checks everything (an unknown config key
is INVALID_CONFIG) and creates nothing; the topic configs compression.type, delete.retention.ms and the cleaner's
are accepted and described."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from conftest import wait_until
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(60)


def test_validate_only_create_topics_refuses_a_bad_config_and_creates_nothing(insync_cluster: ClusterSpec) -> None:
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    bad = NewTopic("compat-invalid", 1, 1, config={"dummy.doesntexist": "broker is verifying this"})
    good = NewTopic("compat-valid", 1, 1)
    futures = admin.create_topics([bad, good], validate_only=True, operation_timeout=10)
    with pytest.raises(Exception) as refused:
        futures["compat-invalid"].result(timeout=10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "dummy.doesntexist" in refused.value.args[0].str()
    futures["compat-valid"].result(timeout=10)
    assert "compat-valid" not in admin.list_topics(timeout=10).topics


def test_compression_type_and_delete_retention_are_topic_configs(insync_cluster: ClusterSpec) -> None:
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    topic = NewTopic("compat-configs", 1, 1, config={"compression.type": "lz4", "delete.retention.ms": "900"})
    admin.create_topics([topic], operation_timeout=10)["compat-configs"].result(timeout=10)
    resource = ConfigResource("topic", "compat-configs")
    described: list[dict] = []
    # CreateTopics answers once the controller has committed the topic; the broker the AdminClient asks next may
    # not have it in its metadata yet (UNKNOWN_TOPIC_OR_PART, as from Kafka in KRaft mode): librdkafka's own tests
    # wait for the topic the same way.
    wait_until(lambda: described.append(admin.describe_configs([resource])[resource].result(timeout=10)) is None,
               10, "the new topic's configs described")
    entries = described[-1]
    assert entries["compression.type"].value == "lz4" and entries["delete.retention.ms"].value == "900"


def test_a_compacted_topic_is_created_and_conflicting_lags_are_refused(insync_cluster: ClusterSpec) -> None:
    """cleanup.policy=compact is a topic config as in Kafka; min.compaction.lag.ms above max.compaction.lag.ms is
    INVALID_CONFIG in Kafka's words, and nothing is changed."""
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    created = admin.create_topics([NewTopic("compat-compacted", 1, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "1000"})],
        operation_timeout=10)
    created["compat-compacted"].result(timeout=10)
    resource = ConfigResource("topic", "compat-compacted")
    described: list[dict] = []
    wait_until(lambda: described.append(admin.describe_configs([resource])[resource].result(timeout=10)) is None,
               10, "the new topic's configs described")
    assert described[-1]["cleanup.policy"].value == "compact"
    assert described[-1]["min.cleanable.dirty.ratio"].value == "0.01"
    legacy = ConfigResource("topic", "compat-compacted", set_config={
        "cleanup.policy": "compact,delete", "min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"})
    with pytest.raises(Exception) as altered:
        list(admin.alter_configs([legacy]).values())[0].result(timeout=10)
    assert (altered.value.args[0].code(), altered.value.args[0].str()) == (
        KafkaError.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (5000) > "
                                   "max.compaction.lag.ms (1000)")
    assert admin.describe_configs([resource])[resource].result(timeout=10)["cleanup.policy"].value == "compact"
