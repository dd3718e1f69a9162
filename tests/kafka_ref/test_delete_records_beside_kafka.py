"""DeleteRecords on some partitions, then a new consumer assigned every partition: it reads all the records left,
from each partition's new log start, on insync as on Kafka 4.1 (kafka-python at its defaults)."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from insync.chaos import cluster
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(300)
TOPICS = ("dr1", "dr2")
PER_PARTITION = 100
DELETE_BEFORE = {TopicPartition("dr1", 0): 50, TopicPartition("dr1", 1): 70, TopicPartition("dr2", 0): 100}


def _read_after_delete(bootstrap: str) -> dict[str, object]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(t, 3, 3) for t in TOPICS])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    for topic in TOPICS:
        for partition in range(3):
            for i in range(PER_PARTITION):
                producer.send(topic, value=b"%d" % i, partition=partition)
    producer.flush(60)
    producer.close()
    low = {(tp.topic, tp.partition): r["low_watermark"]
           for tp, r in admin.delete_records(DELETE_BEFORE, timeout_ms=30_000).items()}
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition(t, p) for t in TOPICS for p in range(3)])
    offsets: dict[tuple[str, int], list[int]] = {}
    left = 6 * PER_PARTITION - sum(DELETE_BEFORE.values())

    def all_read() -> bool:
        for tp, records in consumer.poll(timeout_ms=500).items():
            offsets.setdefault((tp.topic, tp.partition), []).extend(r.offset for r in records)
        return sum(map(len, offsets.values())) >= left

    wait_until(all_read, 20.0, lambda: f"the {left} records left (read {sum(map(len, offsets.values()))})")
    consumer.close()
    return {"low": low, "first": {k: v[0] for k, v in offsets.items()},
            "count": {k: len(v) for k, v in offsets.items()}}


def test_a_new_consumer_reads_every_record_left_after_delete_records(
        kafka41: cluster.ClusterSpec, insync3: cluster.ClusterSpec) -> None:
    found = {engine: _read_after_delete(spec.bootstrap) for engine, spec in (("kafka", kafka41), ("insync", insync3))}
    assert found["insync"] == found["kafka"], found
    assert found["kafka"]["count"] == {(t, p): PER_PARTITION - DELETE_BEFORE.get(TopicPartition(t, p), 0)
                                       for t in TOPICS for p in range(3)
                                       if DELETE_BEFORE.get(TopicPartition(t, p), 0) < PER_PARTITION}
