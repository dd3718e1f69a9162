"""The same compaction scenario on Kafka 4.1 and on insync (3 brokers, RF 3 each): confluent-kafka writes 300
keys five times and tombstones for a tenth of them to a compacted topic, a sentinel rolls the segment after
`segment.ms`, and once the cleaner has run, a consumer from the beginning reads the same records at the same
offsets from both: one a key, its last value, a tombstone's null included. A keyless record is refused by both
with INVALID_RECORD."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from reference import Read, read_to_sentinel, start_kafka

from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(400)

TOPIC = "compacted"
KEYS = 300
ROUNDS = 5
TOMBSTONED = range(0, KEYS, 10)
SENTINEL = b"~sentinel"
SEGMENT_MS = 3000
BROKER_SETTINGS = ["log.cleaner.backoff.ms=200"]
# Kafka 4 refuses a segment.bytes under 1 MiB: the segments roll by time here, on both.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": str(SEGMENT_MS),
                 "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"}



def _produce(bootstrap: str) -> int | None:
    """The scenario's writes; returns the error code a keyless record got."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for round_ in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(TOPIC, key=b"k%03d" % k, value=b"v%d-%d" % (round_, k), partition=0)
        producer.poll(0)
    for k in TOMBSTONED:
        producer.produce(TOPIC, key=b"k%03d" % k, value=None, partition=0)
    assert producer.flush(30) == 0
    refused: list[KafkaError | None] = []
    producer.produce(TOPIC, value=b"no key", partition=0, on_delivery=lambda err, _msg: refused.append(err))
    assert producer.flush(30) == 0
    time.sleep(SEGMENT_MS / 1000 + 0.5)  # time passing is the point: the next append rolls the segment
    producer.produce(TOPIC, key=SENTINEL, value=b"end", partition=0)
    assert producer.flush(30) == 0
    return None if not refused or refused[0] is None else refused[0].code()


def _read(bootstrap: str) -> Read:
    return read_to_sentinel(bootstrap, TOPIC, SENTINEL)


def _scenario(spec: cluster.ClusterSpec) -> tuple[int | None, Read]:
    ensure_topic(spec.bootstrap, TOPIC, 1, 3, TOPIC_CONFIGS)
    refused = _produce(spec.bootstrap)
    reads: list[Read] = []

    def cleaned() -> bool:
        reads.append(_read(spec.bootstrap))
        keys = [key for _, key, _ in reads[-1]]
        return len(keys) == len(set(keys)) == KEYS + 1

    wait_until(cleaned, 120, lambda: f"the log cleaned below the sentinel ({len(reads[-1])} records read)")
    return refused, reads[-1]


def test_a_consumer_reads_the_same_compacted_log_from_kafka_and_insync(tmp_path: Path) -> None:
    found = {}
    for engine in ("kafka", "insync"):
        directory = tmp_path / engine
        spec = (start_kafka(directory, "4.1", extra=BROKER_SETTINGS) if engine == "kafka"
                else cluster.up(str(directory), 3, 0, BROKER_SETTINGS))
        try:
            found[engine] = _scenario(spec)
        finally:
            cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
    assert found["kafka"][0] == found["insync"][0] == KafkaError.INVALID_RECORD
    kafka, insync = found["kafka"][1], found["insync"][1]
    assert insync == kafka
    last = {key: value for _, key, value in kafka}
    assert all(last[b"k%03d" % k] is None for k in TOMBSTONED)
    assert last[b"k001"] == b"v%d-1" % (ROUNDS - 1)
