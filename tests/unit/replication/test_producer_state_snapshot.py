"""Producer-state snapshots: the byte format, and a partition reopened from a snapshot plus the log's tail."""

from __future__ import annotations

import dataclasses
import logging
import random
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repl_helpers import T0, ids

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.protocol.control_records import marker_batch
from insync.protocol.records import build_batch, parse_header
from insync.replication import producer_state
from insync.replication.partition import Partition
from insync.replication.producer_state import (
    Duplicate,
    ProducerStateTable,
    SnapshotError,
    parse_snapshot,
    rebuild_from_log,
    snapshot_bytes,
)
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.types import BrokerId, LeaderEpoch, PartitionEpoch, TopicPartition

TP = TopicPartition("events", 0)
DIR = "/logs/events-0"
SMALL_SEGMENTS = LogConfig(segment_bytes=1500)

Canonical = list[tuple[int, int, list[tuple[int, int, int, int]]]]


def canonical(table: ProducerStateTable) -> Canonical:
    return [(pid, e.producer_epoch, [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
                                     for b in e.batches]) for pid, e in table.entries()]


def open_log(disk: MemoryDisk, config: LogConfig = SMALL_SEGMENTS) -> Log:
    return Log.open(DIR, config, disk=disk, clock=ManualClock(T0))


def open_leader(log: Log) -> Partition:
    partition = Partition(TP, BrokerId(1), log)
    assert partition.make_leader(LeaderEpoch(1), PartitionEpoch(1), ids([1]), ids([1]), T0)
    return partition


def idempotent(pid: int, epoch: int, seq: int, count: int = 1) -> bytes:
    return build_batch([(None, b"v" * 40) for _ in range(count)], base_timestamp=T0, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


class Producers:
    """Client-side sequence state, so a workload sends valid batches and retries of sent ones."""

    def __init__(self) -> None:
        self.next_seq: dict[int, int] = {}
        self.epoch: dict[int, int] = {}
        self.sent: list[bytes] = []

    def send(self, partition: Partition, pid: int, count: int, bump_epoch: bool) -> None:
        if bump_epoch or pid not in self.epoch:
            self.epoch[pid] = self.epoch.get(pid, -1) + 1
            self.next_seq[pid] = 0
        records = idempotent(pid, self.epoch[pid], self.next_seq[pid], count)
        partition.append_records_as_leader(records, 1, T0)
        self.next_seq[pid] += count
        self.sent.append(records)


def run_workload(partition: Partition, steps: list[tuple[int, int, bool]]) -> Producers:
    producers = Producers()
    for pid, count, bump in steps:
        producers.send(partition, pid, count, bump)
    return producers


def answers(table: ProducerStateTable, sent: list[bytes]) -> list[object]:
    """What the table says to a retry of every batch sent (Duplicate with offsets, or the error code)."""
    out: list[object] = []
    for records in sent:
        try:
            out.append(table.check_batch(records))
        except KafkaException as exc:
            out.append(exc.error.name)
    return out


def test_round_trip_keeps_producers_batches_and_recency_order() -> None:
    table = ProducerStateTable()
    rng = random.Random(7)
    offset = 0
    for _ in range(300):
        pid = rng.randrange(20)
        entry = table.entry(pid)
        seq = 0 if entry is None else entry.last_sequence + 1
        count = rng.randrange(1, 4)
        table.record(pid, rng.randrange(3) if entry is None else entry.producer_epoch, seq, offset, offset + count - 1)
        offset += count
    restored = parse_snapshot(snapshot_bytes(table, offset))
    assert canonical(restored) == canonical(table) and len(restored) == 20
    # A snapshot below the end holds the table as a truncation there would leave it.
    cut = parse_snapshot(snapshot_bytes(table, offset // 2))
    table.truncate_to(offset // 2)
    assert canonical(cut) == canonical(table)
    assert canonical(parse_snapshot(snapshot_bytes(ProducerStateTable(), 0))) == []


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "trailing"])
def test_damaged_snapshot_bytes_are_rejected(damage: str) -> None:
    table = ProducerStateTable()
    table.record(5, 0, 0, 0, 9)
    data = bytearray(snapshot_bytes(table, 10))
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        del data[-4:]
    elif damage == "version":
        data[1] = 9
    else:
        data += b"\0"
    with pytest.raises(SnapshotError):
        parse_snapshot(bytes(data))


# (producer id, records, bump the epoch first): epoch bumps are rare, as in life
steps_strategy = st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3), st.sampled_from([False] * 9 + [True])),
                          min_size=1, max_size=80)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, extra=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3), st.just(False)),
                                            max_size=10), clean_close=st.booleans())
def test_reopened_from_snapshot_answers_retries_as_a_full_rebuild(
        steps: list[tuple[int, int, bool]], extra: list[tuple[int, int, bool]], clean_close: bool) -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    partition = open_leader(log)
    producers = run_workload(partition, steps)
    for pid, count, _ in extra:  # a tail after the last roll, which only the replay sees
        producers.send(partition, pid, count, False)
    live = canonical(partition.producer_state)
    if clean_close:
        log.close()
    else:
        log.flush()
    reopened = open_log(disk)
    snapshots = reopened.producer_snapshot_offsets()
    if clean_close:
        assert snapshots[-1] == reopened.log_end_offset
    elif len(log.segments) > 1:
        assert snapshots and snapshots[-1] == log.active_segment.base_offset
    assert len(snapshots) <= 2
    from_snapshot = Partition(TP, BrokerId(1), reopened).producer_state
    full = rebuild_from_log(reopened)
    assert canonical(from_snapshot) == canonical(full) == live
    assert answers(from_snapshot, producers.sent) == answers(full, producers.sent)


def test_reopen_uses_the_snapshot_without_reading_the_whole_log(monkeypatch: pytest.MonkeyPatch) -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    producers = run_workload(open_leader(log), [(pid % 3, 1, False) for pid in range(60)])
    log.close()
    reopened = open_log(disk)
    expected = canonical(rebuild_from_log(reopened))

    def no_full_rebuild(_log: object, chunk_bytes: int = 0) -> ProducerStateTable:
        raise AssertionError("rebuilt from the whole log despite a snapshot")

    monkeypatch.setattr(producer_state, "rebuild_from_log", no_full_rebuild)
    table = Partition(TP, BrokerId(1), reopened).producer_state
    assert canonical(table) == expected
    assert table.check_batch(producers.sent[-1]) == Duplicate(59, 59)


def test_damaged_snapshot_falls_back_to_a_full_rebuild_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    run_workload(open_leader(log), [(pid % 4, 2, False) for pid in range(40)])
    log.close()
    offsets = log.producer_snapshot_offsets()
    assert len(offsets) == 2
    for offset in offsets:  # both kept snapshots damaged: one flipped byte, one torn
        path = f"{DIR}/{offset:020d}.snapshot"
        data = bytearray(disk.read_file(path))
        data[-1] ^= 1
        disk.write_file(path, bytes(data if offset == offsets[-1] else data[:5]))
    reopened = open_log(disk)
    with caplog.at_level(logging.WARNING):
        table = Partition(TP, BrokerId(1), reopened).producer_state
    assert canonical(table) == canonical(rebuild_from_log(reopened)) and len(table) == 4
    warned = [r.getMessage() for r in caplog.records if "producer snapshot" in r.getMessage()]
    assert len(warned) == 2 and f"{offsets[-1]:020d}.snapshot" in warned[0] and "CRC mismatch" in warned[0]
    assert reopened.producer_snapshot_offsets() == []


def test_producers_below_the_log_start_are_dropped_from_a_snapshot() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    partition = open_leader(log)
    run_workload(partition, [(1, 1, False)] * 3 + [(2, 1, False)] * 30)
    partition.delete_records_on_leader(10)  # producer 1's batches are offsets 0-2
    log.close()
    reopened = Log.open(DIR, SMALL_SEGMENTS, disk=disk, clock=ManualClock(T0), log_start_offset=10)
    assert reopened.producer_snapshot_offsets()[-1] == reopened.log_end_offset == 33
    table = Partition(TP, BrokerId(1), reopened).producer_state
    assert table.entry(1) is None and table.entry(2) is not None
    # The live table forgot producer 1 at DeleteRecords already, so the snapshot taken at close lacks it too.
    assert canonical(table) == canonical(parse_snapshot(reopened.read_producer_snapshot(33)))


def test_a_live_table_forgets_producers_below_a_moved_log_start_as_a_reload_does() -> None:
    log = open_log(MemoryDisk())
    partition = open_leader(log)
    run_workload(partition, [(1, 1, False)] * 3 + [(2, 1, False)] * 30)
    partition.delete_records_on_leader(10)  # producer 1's batches are offsets 0-2
    assert partition.producer_state.entry(1) is None and partition.producer_state.entry(2) is not None


@pytest.mark.parametrize("flushed", [False, True])
def test_crash_after_a_roll_reopens_correctly(flushed: bool) -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    partition = open_leader(log)
    producers = run_workload(partition, [(pid % 5, 1, False) for pid in range(50)])
    assert len(log.segments) > 2
    if flushed:
        log.flush_sealed()  # the sealed segments are durable; the active one is not
    disk.crash()
    reopened = open_log(disk)
    snapshots = reopened.producer_snapshot_offsets()
    assert all(offset <= reopened.log_end_offset for offset in snapshots)
    assert bool(snapshots) == flushed  # unflushed: the log lost what every snapshot covered
    survivor = open_leader(reopened)
    table = survivor.producer_state
    assert canonical(table) == canonical(rebuild_from_log(reopened))
    assert answers(table, producers.sent) == answers(rebuild_from_log(reopened), producers.sent)
    # Appending after the crash and reopening again still agrees with a full rebuild.
    for pid in range(5):
        entry = table.entry(pid)
        seq = 0 if entry is None else entry.last_sequence + 1
        epoch = 0 if entry is None else entry.producer_epoch
        survivor.append_records_as_leader(idempotent(pid, epoch, seq), 1, T0)
    reopened.close()
    again = open_log(disk)
    assert canonical(Partition(TP, BrokerId(1), again).producer_state) == canonical(rebuild_from_log(again))


def test_snapshots_keep_each_producers_coordinator_epoch_and_version_2_reads_without_one() -> None:
    table = ProducerStateTable()
    batch = build_batch([(b"k", b"v")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    table.observe(dataclasses.replace(parse_header(batch), base_offset=0), batch, 0)
    marker = marker_batch(1, 0, 6, True, 1_000)
    table.observe(dataclasses.replace(parse_header(marker), base_offset=1), marker, 0)
    restored = parse_snapshot(snapshot_bytes(table, 2)).entry(1)
    assert restored is not None and restored.coordinator_epoch == 6
    # version 2: one producer (id, epoch, batch count), its batch, no open and no aborted transaction
    body = struct.pack(">iqhbiiqqii", 1, 1, 0, 1, 0, 0, 0, 0, 0, 0)
    older = parse_snapshot(struct.pack(">hI", 2, crc32c(body)) + body).entry(1)
    assert older is not None and older.coordinator_epoch == -1
