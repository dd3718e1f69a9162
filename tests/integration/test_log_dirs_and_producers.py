"""DescribeLogDirs, AlterReplicaLogDirs and DescribeProducers through kafka-python's KafkaAdminClient (confluent-kafka
has no call for them) and raw requests, against a real 3-broker cluster: sizes from the real log dirs and their
volume, Kafka's answers for a broker with one log dir, the producer state of an idempotent producer on each
replica, and every error path a client can reach."""

from __future__ import annotations

import os

import pytest

from conftest import wait_until
from insync import admin_requests
from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.protocol.kio import build, nested, request_class

pytestmark = pytest.mark.timeout(180)

T0 = 1_700_000_000_000
RECORDS = 5


def admin_client(spec: ClusterSpec):  # type: ignore[no-untyped-def]
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=spec.bootstrap.split(","), request_timeout_ms=15_000)


def produce(spec: ClusterSpec, topic: str, partitions: int, replicas: int) -> None:
    """RECORDS records to each partition from one idempotent kafka-python producer, one batch each, the last of
    each partition stamped T0 + RECORDS - 1."""
    from kafka import KafkaProducer

    ensure_topic(spec.bootstrap, topic, partitions, replicas, {})
    producer = KafkaProducer(bootstrap_servers=spec.bootstrap.split(","), acks="all", enable_idempotence=True,
                             linger_ms=0)
    try:
        for partition in range(partitions):
            for i in range(RECORDS):
                producer.send(topic, value=b"v%d" % i, partition=partition, timestamp_ms=T0 + i).get(timeout=30)
    finally:
        producer.close()


def hosts(spec: ClusterSpec, topic: str, partition: int) -> list[int]:
    return [b.node_id for b in spec.brokers if (b.log_dir / f"{topic}-{partition}").is_dir()]


def segment_bytes(spec: ClusterSpec, broker: int, topic: str, partition: int) -> int:
    directory = spec.node(broker).log_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.iterdir() if f.suffix == ".log")


def test_describe_log_dirs_reports_each_broker_dir_with_real_sizes(insync_cluster: ClusterSpec) -> None:
    spec = insync_cluster
    produce(spec, "ld-sizes", 2, 3)
    client = admin_client(spec)
    try:
        answers = {a["broker"]: a["log_dirs"] for a in client.describe_log_dirs()}
        assert sorted(answers) == sorted(b.node_id for b in spec.brokers)
        for broker, dirs in answers.items():
            (only,) = dirs  # one log dir per broker
            assert only["error_code"] == 0 and only["log_dir"] == str(spec.node(broker).log_dir.absolute())
            volume = os.statvfs(spec.node(broker).log_dir)
            assert only["total_bytes"] == volume.f_blocks * volume.f_frsize
            assert 0 < only["usable_bytes"] <= only["total_bytes"]
            partitions = {(t["name"], p["partition_index"]): p for t in only["topics"] for p in t["partitions"]}
            for index in (0, 1):
                described = partitions[("ld-sizes", index)]
                assert described["partition_size"] == segment_bytes(spec, broker, "ld-sizes", index) > 0
                assert (described["offset_lag"], described["is_future_key"]) == (0, False)
        one = client.describe_log_dirs({"ld-sizes": [1], "no-such-topic": [0]}, brokers=[spec.brokers[0].node_id])
        topics = one[0]["log_dirs"][0]["topics"]
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in topics] == [("ld-sizes", [1])]
    finally:
        client.close()


def test_describe_log_dirs_v1_has_no_volume_sizes(insync_cluster: ClusterSpec) -> None:
    cls = request_class(35, 1)
    answer = admin_requests.request(insync_cluster.brokers[0].address, build(cls, topics=None), 15)
    (only,) = answer.results
    assert int(only.error_code) == 0 and not hasattr(only, "total_bytes")


def test_alter_replica_log_dirs_with_one_log_dir(insync_cluster: ClusterSpec) -> None:
    from kafka import TopicPartitionReplica
    from kafka.errors import InvalidTopicError, LogDirNotFoundError, NoError, ReplicaNotAvailableError

    spec = insync_cluster
    produce(spec, "ld-alter", 1, 1)
    (host,) = hosts(spec, "ld-alter", 0)
    other = next(b.node_id for b in spec.brokers if b.node_id != host)
    own_dir = str(spec.node(host).log_dir.absolute())
    asked = {
        TopicPartitionReplica("ld-alter", 0, host): own_dir,  # already there: nothing to move
        TopicPartitionReplica("ld-alter", 0, other): str(spec.node(other).log_dir.absolute()),  # not a replica
        TopicPartitionReplica("x" * 249, 0, host): own_dir,  # no room for Kafka's "-future" directory name
    }
    client = admin_client(spec)
    try:
        answers = client.alter_replica_log_dirs(asked)
        assert answers == {TopicPartitionReplica("ld-alter", 0, host): NoError,
                           TopicPartitionReplica("ld-alter", 0, other): ReplicaNotAvailableError,
                           TopicPartitionReplica("x" * 249, 0, host): InvalidTopicError}
        elsewhere = client.alter_replica_log_dirs({TopicPartitionReplica("ld-alter", 0, host): "/no/such/dir"})
        assert elsewhere == {TopicPartitionReplica("ld-alter", 0, host): LogDirNotFoundError}
    finally:
        client.close()


def test_describe_producers_on_leader_and_follower(insync_cluster: ClusterSpec) -> None:
    from kafka import TopicPartition
    from kafka.errors import NotLeaderForPartitionError, UnknownTopicOrPartitionError

    spec = insync_cluster
    produce(spec, "dp-three", 1, 3)
    produce(spec, "dp-one", 1, 1)
    tp = TopicPartition("dp-three", 0)
    client = admin_client(spec)
    try:
        by_leader = client.describe_producers([tp])[tp].active_producers
        (producer,) = by_leader
        assert (producer.producer_epoch, producer.last_sequence) == (0, RECORDS - 1)
        assert producer.last_timestamp == T0 + RECORDS - 1
        assert (producer.coordinator_epoch, producer.current_transaction_start_offset) == (-1, -1)
        # Every replica answers from its own state, as Kafka's: a follower's once it has fetched the batches (with
        # min.insync.replicas 1 an acks=all write does not wait for a follower the leader dropped from its ISR).
        for broker in hosts(spec, "dp-three", 0):
            wait_until(lambda b=broker: client.describe_producers([tp], broker_id=b)[tp].active_producers == by_leader,
                       20, f"broker {broker}'s producer state as the leader's")
        (host,) = hosts(spec, "dp-one", 0)
        other = next(b.node_id for b in spec.brokers if b.node_id != host)
        with pytest.raises(NotLeaderForPartitionError):
            client.describe_producers([TopicPartition("dp-one", 0)], broker_id=other)
        with pytest.raises(UnknownTopicOrPartitionError):
            client.describe_producers([TopicPartition("dp-one", 7)], broker_id=host)
    finally:
        client.close()


def test_describe_producers_refuses_an_illegal_topic_name(insync_cluster: ClusterSpec) -> None:
    cls = request_class(61, 0)
    topics = (build(nested(cls, "TopicRequest"), name="bad name", partition_indexes=(0,)),
              build(nested(cls, "TopicRequest"), name="dp-missing", partition_indexes=(0,)))
    answer = admin_requests.request(insync_cluster.brokers[0].address, build(cls, topics=topics), 15)
    bad, missing = (t.partitions[0] for t in answer.topics)
    assert int(bad.error_code) == 17 and "bad name" in (bad.error_message or "")  # INVALID_TOPIC_EXCEPTION
    assert int(missing.error_code) == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_api_versions_advertise_kafka_4_ranges(insync_cluster: ClusterSpec) -> None:
    cls = request_class(18, 3)
    answer = admin_requests.request(insync_cluster.brokers[0].address,
                                    build(cls, client_software_name="t", client_software_version="1"), 15)
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
    assert (ranges[34], ranges[35], ranges[61]) == ((1, 2), (1, 4), (0, 0))

