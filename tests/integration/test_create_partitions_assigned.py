"""CreatePartitions and CreateTopics with explicit replica assignments through real admin clients
(kafka-topics.sh --replica-assignment does the same): the partitions sit on the brokers given, first one leading;
a broker that is not registered is refused with Kafka's INVALID_REPLICA_ASSIGNMENT and its words."""

from __future__ import annotations

import pytest

from conftest import wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)


def replicas(spec: ClusterSpec, topic: str) -> dict[int, tuple[int, ...]]:
    return {r.partition: tuple(r.replicas) for r in describe_rows(spec.bootstrap, [topic])}


def test_confluent_kafka_assigned_partitions(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

    ensure_topic(insync_cluster.bootstrap, "assigned-ck", 1, 2, {})
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    grow = NewPartitions("assigned-ck", 3, replica_assignment=[[3, 1], [2, 3]])
    admin.create_partitions([grow])["assigned-ck"].result(timeout=15)
    wait_until(lambda: len(replicas(insync_cluster, "assigned-ck")) == 3, 20, "three partitions in metadata")
    assert {p: r for p, r in replicas(insync_cluster, "assigned-ck").items() if p > 0} == {1: (3, 1), 2: (2, 3)}
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("assigned-ck", 4, replica_assignment=[[1, 7]])])[
            "assigned-ck"].result(timeout=15)
    error = refused.value.args[0]
    assert error.name() == "INVALID_REPLICA_ASSIGNMENT"
    assert "includes broker 7, but no such broker is registered" in error.str()
    assert len(replicas(insync_cluster, "assigned-ck")) == 3  # nothing added


def test_kafka_python_assigned_partitions(insync_cluster: ClusterSpec) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaPythonNewPartitions
    from kafka.errors import InvalidReplicationAssignmentError

    ensure_topic(insync_cluster.bootstrap, "assigned-kp", 1, 3, {})
    client = KafkaAdminClient(bootstrap_servers=insync_cluster.bootstrap.split(","))
    try:
        client.create_partitions({"assigned-kp": KafkaPythonNewPartitions(2, [[2, 3, 1]])})
        wait_until(lambda: len(replicas(insync_cluster, "assigned-kp")) == 2, 20, "two partitions in metadata")
        assert replicas(insync_cluster, "assigned-kp")[1] == (2, 3, 1)
        with pytest.raises(InvalidReplicationAssignmentError):
            client.create_partitions({"assigned-kp": KafkaPythonNewPartitions(3, [[1, 1, 2]])})
    finally:
        client.close()


def test_topics_created_on_assigned_replicas(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic

    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    # librdkafka wants the partition count beside an assignment, and sends -1 for it (Kafka's rule)
    placed = NewTopic("placed-ck", num_partitions=2, replica_assignment=[[2, 3], [3, 1]])
    admin.create_topics([placed])["placed-ck"].result(timeout=15)
    wait_until(lambda: len(replicas(insync_cluster, "placed-ck")) == 2, 20, "two partitions in metadata")
    assert replicas(insync_cluster, "placed-ck") == {0: (2, 3), 1: (3, 1)}
    with pytest.raises(KafkaException) as refused:
        bad = NewTopic("placed-bad", num_partitions=1, replica_assignment=[[2, 9]])
        admin.create_topics([bad])["placed-bad"].result(timeout=15)
    assert refused.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"

    client = KafkaAdminClient(bootstrap_servers=insync_cluster.bootstrap.split(","))
    try:
        client.create_topics([KafkaPythonNewTopic("placed-kp", replica_assignments={0: [3, 2, 1]})])
    finally:
        client.close()
    wait_until(lambda: replicas(insync_cluster, "placed-kp") == {0: (3, 2, 1)}, 20, "the assigned replicas")
