"""ListOffsets by time through real clients: the answer carries the timestamp of the record found (not the one asked
for), MAX_TIMESTAMP (KIP-734) the offset and time of the record with the largest timestamp."""

from __future__ import annotations

import pytest

from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000
TIMESTAMPS = (100, 300, 200, 300, 150)  # offsets 0-4: the largest first at offset 1


def fill(spec: ClusterSpec, topic: str) -> None:
    from confluent_kafka import Producer

    ensure_topic(spec.bootstrap, topic, 1, 3, {})
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "linger.ms": 0})
    for ts in TIMESTAMPS:
        producer.produce(topic, value=str(ts).encode(), timestamp=T0 + ts)
        assert producer.flush(30) == 0  # one batch each: the order of offsets is the order above


def test_confluent_kafka_offsets_for_times_and_list_offsets(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    fill(insync_cluster, "lo-ck")
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "lo-ck"})
    try:
        found = consumer.offsets_for_times([TopicPartition("lo-ck", 0, T0 + 150)], timeout=10)
        assert found[0].offset == 1
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    tp = TopicPartition("lo-ck", 0)
    by_time = admin.list_offsets({tp: OffsetSpec.for_timestamp(T0 + 150)})[tp].result(timeout=10)
    assert (by_time.offset, by_time.timestamp) == (1, T0 + 300)  # the record found's own time
    largest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=10)
    assert (largest.offset, largest.timestamp) == (1, T0 + 300)
    too_late = admin.list_offsets({tp: OffsetSpec.for_timestamp(T0 + 301)})[tp].result(timeout=10)
    assert too_late.offset == -1


def test_kafka_python_offsets_for_times(insync_cluster: ClusterSpec) -> None:
    from kafka import KafkaConsumer, TopicPartition

    fill(insync_cluster, "lo-kp")
    consumer = KafkaConsumer(bootstrap_servers=insync_cluster.bootstrap.split(","))
    try:
        tp = TopicPartition("lo-kp", 0)
        found = consumer.offsets_for_times({tp: T0 + 250})[tp]
        assert found is not None and (found.offset, found.timestamp) == (1, T0 + 300)
        assert consumer.offsets_for_times({tp: T0 + 301})[tp] is None
    finally:
        consumer.close()
