"""Log compaction of a transactional topic on real processes: 3 brokers, RF 3, a compacted topic whose segments
roll by size.

confluent-kafka's transactional producer commits 20 keys, aborts new values for them (and a key of its own), then
commits new values for half of them, with an idempotent producer's records in between. Before any clean a
read_uncommitted consumer sees the aborted records and a read_committed one does not. Filler records then roll the
segment, and each replica's cleaner cleans its own copy: `insync log dump` of every replica shows no aborted record
at all, each key's last committed value at the same offset, and the three transaction markers still there (their
transactions had records in that clean). More segments rolled past `delete.retention.ms` take the ABORT marker (its
transaction has no record left) off every replica while the COMMIT markers, whose records stay, remain; both
consumers read exactly the committed values after each clean.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import start, wait_until
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.cli.log_cmd import dump_path

pytestmark = pytest.mark.timeout(240)

TOPIC = "compacted-txn"
KEYS = [b"k%02d" % i for i in range(20)]
PLAIN = {b"p%d" % i: b"plain-%d" % i for i in range(5)}
SEGMENT_BYTES = 8192
FILLER_VALUE = b"f" * 1000  # ten of them roll a segment
DELETE_RETENTION_MS = 2000
CONFIG = ["log.cleaner.backoff.ms=200", "transaction.state.log.num.partitions=3",
          "group.initial.rebalance.delay.ms=200"]
_RECORD = re.compile(r"^\| offset: (\d+) .* key: (.*) payload: (.*)$")
_MARKER = re.compile(r"^\| offset: (\d+) .* endTxnMarker: (COMMIT|ABORT) ")

Records = list[tuple[int, bytes | None, bytes | None]]


def _committed() -> dict[bytes, bytes]:
    """Each key's last committed value: the third transaction's for the first ten keys, the first's for the rest."""
    last = {key: b"c1-" + key for key in KEYS}
    last.update({key: b"c3-" + key for key in KEYS[:10]})
    return {**last, **PLAIN}


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
        if name == b"c1-":  # records outside transactions between two of them
            for key, value in PLAIN.items():
                plain.produce(TOPIC, key=key, value=value, partition=0)
            assert plain.flush(30) == 0
        producer.commit_transaction(60) if commit else producer.abort_transaction(60)


def _roll(bootstrap: str) -> None:
    """Ten filler records of four keys, one batch each: the active segment rolls by size."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(10):
        producer.produce(TOPIC, key=b"filler-%d" % (i % 4), value=FILLER_VALUE, partition=0)
        assert producer.flush(30) == 0


def _read(bootstrap: str, isolation: str, want: int) -> Records:
    """What an assigned consumer reads from offset 0 until `want` records arrived, and a little more so that extra
    records would show."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        found: Records = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                assert message.error() is None, message.error()
                found.append((message.offset(), message.key(), message.value()))
            if len(found) >= want:
                deadline = min(deadline, time.monotonic() + 1.0)
        return found
    finally:
        consumer.close()


def _values(records: Records) -> dict[bytes | None, bytes | None]:
    """The last value of each key, the filler's aside."""
    return {key: value for _, key, value in records if not (key or b"").startswith(b"filler")}


def _dump(log_dir: Path) -> tuple[list[tuple[int, str, str]], dict[int, str]]:
    """`insync log dump --print-data-log` of the replica's partition directory: its records, and its markers by
    offset. Read again when the cleaner swapped segments meanwhile (a file listed went)."""
    for _ in range(10):
        out = io.StringIO()
        try:
            dump_path(str(log_dir / f"{TOPIC}-0"), True, out)
            break
        except OSError:
            continue
    lines = out.getvalue().splitlines()
    records = [(int(m.group(1)), m.group(2), m.group(3)) for line in lines if (m := _RECORD.match(line))]
    markers = {int(m.group(1)): m.group(2) for line in lines if (m := _MARKER.match(line))}
    return records, markers


def _aborted_gone(log_dir: Path) -> bool:
    """No aborted record in the replica's files, and each transactional key once: the clean happened there."""
    records, _ = _dump(log_dir)
    keys = [key for _, key, _ in records if key.startswith("k")]
    return not [value for _, _, value in records if value.startswith("a2-")] and len(keys) == len(set(keys))


@pytest.mark.slow
def test_every_replica_drops_aborted_records_and_later_the_abort_marker(tmp_path: Path) -> None:
    spec = start(tmp_path, brokers=3, extra=CONFIG)
    try:
        bootstrap = spec.bootstrap
        ensure_topic(bootstrap, TOPIC, 1, 3, {
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(DELETE_RETENTION_MS), "min.insync.replicas": "2"})
        _write_transactions(bootstrap)
        committed, written = _committed(), len(KEYS) + 10 + len(PLAIN)
        assert not [r for r in _read(bootstrap, "read_committed", written) if r[2].startswith(b"a2-")]
        uncommitted = _read(bootstrap, "read_uncommitted", written + len(KEYS) + 1)
        assert len([r for r in uncommitted if r[2].startswith(b"a2-")]) == len(KEYS) + 1  # nothing cleaned yet
        _, markers = _dump(spec.brokers[0].log_dir)
        assert list(markers.values()) == ["COMMIT", "ABORT", "COMMIT"], markers
        abort_marker = next(offset for offset, kind in markers.items() if kind == "ABORT")

        _roll(bootstrap)
        for broker in spec.brokers:
            wait_until(lambda b=broker: _aborted_gone(b.log_dir), 60, f"broker {broker.node_id}'s copy cleaned")
        dumps = [_dump(broker.log_dir) for broker in spec.brokers]
        assert all(dump == dumps[0] for dump in dumps), "replicas hold different records or markers"
        records, markers_after = dumps[0]
        assert markers_after == markers  # each transaction had records in the clean: its marker stays
        assert {key.encode(): value.encode() for _, key, value in records if not key.startswith("filler")} == \
            committed
        kept = len(committed) + 4  # one record a key, the filler's four keys too
        for isolation in ("read_committed", "read_uncommitted"):
            assert _values(_read(bootstrap, isolation, kept)) == committed, isolation

        def abort_marker_gone() -> bool:
            time.sleep(DELETE_RETENTION_MS / 2000)
            _roll(bootstrap)  # another clean: the first sets the marker's delete horizon, one after it drops it
            return all(abort_marker not in _dump(broker.log_dir)[1] for broker in spec.brokers)

        wait_until(abort_marker_gone, 90, "the ABORT marker removed from every replica")
        for broker in spec.brokers:
            records, markers_now = _dump(broker.log_dir)
            assert markers_now == {o: k for o, k in markers.items() if k == "COMMIT"}, broker.node_id
            assert {key.encode(): value.encode() for _, key, value in records if not key.startswith("filler")} \
                == committed
        for isolation in ("read_committed", "read_uncommitted"):
            assert _values(_read(bootstrap, isolation, kept)) == committed, isolation
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
