"""Admin requests librdkafka's own test suite (0081_admin, `make compat`) makes, answered as Kafka 4.0 answers
them, with confluent-kafka's AdminClient: CreateTopics with validate_only checks everything (an unknown config key
is INVALID_CONFIG) and creates nothing; the topic configs compression.type and delete.retention.ms are accepted
and described."""

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


def test_a_compacted_topic_is_refused_with_kafkas_invalid_config(insync_cluster: ClusterSpec) -> None:
    """insync has no log compaction: cleanup.policy=compact is refused at creation and by both alterations, with
    INVALID_CONFIG in Kafka's words and the reason; nothing is created or changed."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    wording = ("Invalid value compact for configuration cleanup.policy: insync does not implement log compaction; "
               "the only cleanup policy is delete")
    created = admin.create_topics([NewTopic("compat-compacted", 1, 1, config={"cleanup.policy": "compact"})],
                                  operation_timeout=10)
    with pytest.raises(Exception) as refused:
        created["compat-compacted"].result(timeout=10)
    assert (refused.value.args[0].code(), refused.value.args[0].str()) == (KafkaError.INVALID_CONFIG, wording)
    assert "compat-compacted" not in admin.list_topics(timeout=10).topics

    admin.create_topics([NewTopic("compat-deleting", 1, 1)], operation_timeout=10)["compat-deleting"].result(10)
    resource = ConfigResource("topic", "compat-deleting")
    wait_until(lambda: admin.describe_configs([resource])[resource].result(timeout=10) is not None, 10,
               "the new topic described")
    incremental = ConfigResource("topic", "compat-deleting", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    legacy = ConfigResource("topic", "compat-deleting", set_config={"cleanup.policy": "compact,delete"})
    for futures in (admin.incremental_alter_configs([incremental]), admin.alter_configs([legacy])):
        with pytest.raises(Exception) as altered:
            list(futures.values())[0].result(timeout=10)
        assert (altered.value.args[0].code(), altered.value.args[0].str()) == (KafkaError.INVALID_CONFIG, wording)
    assert admin.describe_configs([resource])[resource].result(timeout=10)["cleanup.policy"].value == "delete"
