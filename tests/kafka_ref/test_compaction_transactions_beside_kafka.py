"""The same transactions on a compacted topic on Kafka 4.1 and on insync (3 brokers, RF 3 each): confluent-kafka's
transactional producer commits 20 keys, aborts new values for them (and a key of its own), commits new values for
half of them, with an idempotent producer's records in between; a sentinel written after `segment.ms` rolls the
segment. Once each replica's cleaner has run, a read_committed and a read_uncommitted consumer read the same records
at the same offsets from both (no aborted record, one a key), and every replica's segment files (read with
`insync log dump`, Kafka's files too) hold the same records and the same three markers. After more rolls past
`delete.retention.ms`, both have dropped the ABORT marker and kept the COMMIT markers."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from reference import Read, read_to_sentinel, start_kafka

from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.cli.log_cmd import dump_path
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(400)

TOPIC = "compacted-txn"
KEYS = [b"k%02d" % i for i in range(20)]
SENTINEL = b"~sentinel"
SEGMENT_MS = 3000
BROKER_SETTINGS = ["log.cleaner.backoff.ms=200", "transaction.state.log.num.partitions=3"]
# Kafka 4 refuses a segment.bytes under 1 MiB: the segments roll by time here, on both.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": str(SEGMENT_MS),
                 "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000", "min.insync.replicas": "2"}
_RECORD = re.compile(r"^\| offset: (\d+) .* key: (.*) payload: (.*)$")
_MARKER = re.compile(r"^\| offset: (\d+) .* endTxnMarker: (COMMIT|ABORT) ")

Files = tuple[list[tuple[int, str, str]], dict[int, str]]


def _write_transactions(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "compacted-writer", "linger.ms": 5})
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    producer.init_transactions(60)
    for name, keys, commit in ((b"c1-", KEYS, True), (b"a2-", [*KEYS, b"only-aborted"], False),
                               (b"c3-", KEYS[:10], True)):
        producer.begin_transaction()
        for key in keys:
            producer.produce(TOPIC, key=key, value=name + key, partition=0)
        producer.flush(30)
        if name == b"c1-":
            for i in range(5):
                plain.produce(TOPIC, key=b"p%d" % i, value=b"plain-%d" % i, partition=0)
            assert plain.flush(30) == 0
        producer.commit_transaction(60) if commit else producer.abort_transaction(60)


def _roll(bootstrap: str) -> None:
    """Time passing is the point: the next append rolls the segment."""
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(TOPIC, key=SENTINEL, value=b"end", partition=0)
    assert producer.flush(30) == 0


def _read(bootstrap: str, isolation: str) -> Read:
    """From offset 0 to the sentinel, the sentinels aside."""
    return [record for record in read_to_sentinel(bootstrap, TOPIC, SENTINEL, isolation) if record[1] != SENTINEL]


def _files(log_dir: Path) -> Files:
    """The records (sentinels aside) and markers of a replica's segment files, as `insync log dump` prints them;
    read again when a cleaner swapped segments meanwhile (a file listed went)."""
    for _ in range(10):
        out = io.StringIO()
        try:
            for segment in sorted((log_dir / f"{TOPIC}-0").glob("*.log")):
                dump_path(str(segment), True, out)
            break
        except OSError:
            continue
    lines = out.getvalue().splitlines()
    records = [(int(m.group(1)), m.group(2), m.group(3)) for line in lines if (m := _RECORD.match(line))]
    markers = {int(m.group(1)): m.group(2) for line in lines if (m := _MARKER.match(line))}
    return [r for r in records if r[1] != SENTINEL.decode()], markers


def _replicas(spec: cluster.ClusterSpec) -> list[Files]:
    return [_files(broker.log_dir) for broker in spec.brokers]


def _scenario(spec: cluster.ClusterSpec) -> tuple[Read, Read, Files, Files]:
    """What the consumers read and the replicas hold after the first clean, and what the replicas hold once the ABORT
    marker went."""
    ensure_topic(spec.bootstrap, TOPIC, 1, 3, TOPIC_CONFIGS)
    _write_transactions(spec.bootstrap)
    _roll(spec.bootstrap)

    def cleaned() -> bool:
        return all(not [r for r in records if r[2].startswith("a2-")] for records, _ in _replicas(spec))

    wait_until(cleaned, 120, "every replica cleaned of the aborted records")
    first = _replicas(spec)
    assert all(files == first[0] for files in first), first
    committed, uncommitted = _read(spec.bootstrap, "read_committed"), _read(spec.bootstrap, "read_uncommitted")
    abort = next(offset for offset, kind in first[0][1].items() if kind == "ABORT")

    def abort_marker_gone() -> bool:
        _roll(spec.bootstrap)
        return all(abort not in markers for _, markers in _replicas(spec))

    wait_until(abort_marker_gone, 120, "the ABORT marker gone from every replica")
    later = _replicas(spec)
    assert all(files == later[0] for files in later), later
    return committed, uncommitted, first[0], later[0]


def test_kafka_and_insync_clean_a_transactional_log_alike(tmp_path: Path) -> None:
    found = {}
    for engine in ("kafka", "insync"):
        directory = tmp_path / engine
        spec = (start_kafka(directory, "4.1", extra=BROKER_SETTINGS) if engine == "kafka"
                else cluster.up(str(directory), 3, 0, BROKER_SETTINGS))
        try:
            found[engine] = _scenario(spec)
        finally:
            cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
    kafka, insync = found["kafka"], found["insync"]
    assert insync[0] == kafka[0] and insync[1] == kafka[1]  # what the consumers read, offsets included
    assert kafka[0] == kafka[1] and not [r for r in kafka[0] if r[2].startswith(b"a2-")]
    assert insync[2] == kafka[2] and list(kafka[2][1].values()) == ["COMMIT", "ABORT", "COMMIT"]
    assert insync[3] == kafka[3] and list(kafka[3][1].values()) == ["COMMIT", "COMMIT"]
