"""Log compaction on real processes: 3 brokers, RF 3, a compacted topic with small segments.

confluent-kafka produces 300 keys five times over, then tombstones for a tenth of them (acks=all); a record without
a key is refused with Kafka's INVALID_RECORD. A sentinel written after `segment.ms` rolls every replica's active
segment, so the cleaner of each broker (its own, bounded by its own high watermark, with an offset map too small
for all the keys: several passes) can clean everything before it. Then a consumer reading from the beginning gets
exactly the last value of each key (a tombstone's null included) from the leader through confluent-kafka and from
every replica by raw Fetch (KIP-392), and `insync log dump` of each replica's directory shows the same records at
the same offsets, below the cleaner's checkpoint.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conftest import fetch_partition, start, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.protocol.records import iter_batches, iter_records

pytestmark = pytest.mark.timeout(240)

TOPIC = "compacted"
KEYS = 300
ROUNDS = 5
TOMBSTONED = range(0, KEYS, 10)
SENTINEL = b"~sentinel"
SEGMENT_MS = 3000
# 176 bytes an offset map entry: about 70 keys a pass, so 300 keys take several passes.
CLEANER = ["log.cleaner.backoff.ms=200", "log.cleaner.dedupe.buffer.size=14336"]
_RECORD_LINE = re.compile(r"^\| offset: (\d+) .* key: (.*) payload: (.*)$")


def _expected() -> dict[bytes, bytes | None]:
    expected: dict[bytes, bytes | None] = {b"k%03d" % k: b"v%d-%d" % (ROUNDS - 1, k) for k in range(KEYS)}
    expected.update({b"k%03d" % k: None for k in TOMBSTONED})
    return expected


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for round_ in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(TOPIC, key=b"k%03d" % k, value=b"v%d-%d" % (round_, k))
        producer.poll(0)
    for k in TOMBSTONED:
        producer.produce(TOPIC, key=b"k%03d" % k, value=None)
    assert producer.flush(30) == 0
    refused: list[KafkaError] = []
    producer.produce(TOPIC, value=b"no key", on_delivery=lambda err, _msg: refused.append(err))
    assert producer.flush(30) == 0
    assert refused and refused[0] is not None and refused[0].code() == KafkaError.INVALID_RECORD, refused
    time.sleep(SEGMENT_MS / 1000 + 0.5)  # the next append rolls each replica's active segment by time
    producer.produce(TOPIC, key=SENTINEL, value=b"end")
    assert producer.flush(30) == 0


def _read_replica(address: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start to the replica's high watermark, by raw Fetch."""
    found: list[tuple[int, bytes | None, bytes | None]] = []
    offset = 0
    for _ in range(10_000):
        answer = fetch_partition(address, TOPIC, 12, offset)
        assert int(answer.error_code) == 0, answer.error_code
        if offset >= answer.high_watermark:
            return found
        records = list(iter_records(bytes(answer.records or b"")))
        found.extend((r.offset, r.key, r.value) for r in records)
        assert records or answer.records, f"no progress at {offset}"
        offset = records[-1].offset + 1 if records else _skip_empty(bytes(answer.records))
    raise AssertionError("read did not end")


def _skip_empty(records: bytes) -> int:
    """Past a fetch answer holding only batches the cleaner emptied."""
    return max(header.next_offset for _, header in iter_batches(records))


def _dumped(log_dir: Path) -> tuple[str, list[tuple[int, str, str]]]:
    """`insync log dump --print-data-log` of the partition directory: its output and its records."""
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "log", "dump", "--print-data-log",
                          str(log_dir / f"{TOPIC}-0")], capture_output=True, text=True, check=True).stdout
    records = [(int(m.group(1)), m.group(2), m.group(3)) for line in out.splitlines()
               if (m := _RECORD_LINE.match(line))]
    return out, records


def _cleaned(log_dir: Path) -> bool:
    """Each key once in the replica's segments: every record before the sentinel's segment is cleaned."""
    _, records = _dumped(log_dir)
    keys = [key for _, key, _ in records]
    return len(keys) == len(set(keys)) == KEYS + 1


@pytest.mark.slow
def test_every_replica_keeps_the_last_value_of_each_key_at_the_same_offsets(tmp_path: Path) -> None:
    spec = start(tmp_path, brokers=3, extra=CLEANER)
    try:
        ensure_topic(spec.bootstrap, TOPIC, 1, 3, {
            "cleanup.policy": "compact", "segment.bytes": "8192", "segment.ms": str(SEGMENT_MS),
            "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"})
        _produce(spec.bootstrap)
        for broker in spec.brokers:
            wait_until(lambda b=broker: _cleaned(b.log_dir), 90, f"broker {broker.node_id}'s copy cleaned")

        expected = {**_expected(), SENTINEL: b"end"}
        [row] = describe_rows(spec.bootstrap, [TOPIC])
        reads = {b.node_id: _read_replica(spec.node(b.node_id).address) for b in spec.brokers}
        for node_id, records in reads.items():
            assert {key: value for _, key, value in records} == expected, f"broker {node_id}"
            assert len(records) == len(expected), f"broker {node_id} returned a key twice"
        assert len({tuple(records) for records in reads.values()}) == 1, "replicas hold different offsets"

        dumps = {b.node_id: _dumped(b.log_dir) for b in spec.brokers}
        assert len({tuple(records) for _, records in dumps.values()}) == 1
        for out, _ in dumps.values():
            assert "Cleaned below offset" in out and "deleteHorizonMs: OptionalLong[" in out

        consumer = Consumer({"bootstrap.servers": spec.node(row.leader).address, "group.id": "compaction-reader",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        consumed: dict[bytes, bytes | None] = {}
        count = [0]

        def read_all() -> bool:
            for message in consumer.consume(num_messages=500, timeout=1):
                assert message.error() is None, message.error()
                consumed[message.key()] = message.value()
                count[0] += 1
            return len(consumed) >= len(expected)

        wait_until(read_all, 30, "the consumer to read every key")
        consumer.close()
        assert consumed == expected and count[0] == len(expected)
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
