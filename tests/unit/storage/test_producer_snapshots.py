"""The log's producer-snapshot files: when they are taken, kept and deleted, and that writes are atomic."""

from __future__ import annotations

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.protocol.records import build_batch
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log

DIR = "/logs/t-0"
T0 = 1_700_000_000_000


def open_log(disk: MemoryDisk, **kwargs: int) -> Log:
    return Log.open(DIR, LogConfig(segment_bytes=1000), disk=disk, clock=ManualClock(T0), **kwargs)


def append(log: Log, count: int) -> None:
    for _ in range(count):
        log.append_as_leader(build_batch([(None, b"v" * 100)], base_timestamp=T0), leader_epoch=0)


class Source:
    """Records when the log asks for a snapshot, and what it knew then."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.calls: list[tuple[int, int]] = []  # (offset asked, log end offset at that moment)

    def __call__(self, offset: int) -> bytes:
        self.calls.append((offset, self.log.log_end_offset))
        return f"table below {offset}".encode()


def test_roll_and_close_take_snapshots_at_the_log_end_before_the_next_append() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    source = Source(log)
    log.set_producer_snapshot_source(source)
    append(log, 20)
    rolls = [segment.base_offset for segment in log.segments[1:]]
    assert len(rolls) >= 3
    # Each snapshot was asked for when the segment rolled, before the batch that caused the roll landed.
    assert source.calls == [(base, base) for base in rolls]
    assert log.producer_snapshot_offsets() == rolls[-2:]  # only the two newest are kept
    assert log.read_producer_snapshot(rolls[-1]) == f"table below {rolls[-1]}".encode()
    log.close()
    assert log.producer_snapshot_offsets() == [rolls[-1], 20]
    assert not any(name.endswith(".tmp") for name in disk.listdir(DIR))
    assert f"{20:020d}.snapshot" in disk.listdir(DIR)


def test_no_source_no_snapshots() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    append(log, 20)
    log.close()
    assert log.producer_snapshot_offsets() == []


def test_truncation_deletes_snapshots_above_the_new_end() -> None:
    log = open_log(MemoryDisk())
    for offset in (3, 8, 12):
        append(log, offset - log.log_end_offset)
        log.write_producer_snapshot(offset, b"x")
    log.write_producer_snapshot(12, b"y")  # replaced in place
    assert log.producer_snapshot_offsets() == [8, 12]
    log.truncate_to(10)
    assert log.producer_snapshot_offsets() == [8]
    log.truncate_to(8)  # a snapshot at the new end still describes exactly the batches below it
    assert log.producer_snapshot_offsets() == [8]
    log.truncate_to(5)
    assert log.producer_snapshot_offsets() == []
    append(log, 3)
    log.write_producer_snapshot(8, b"z")
    log.truncate_fully_and_start_at(100)
    assert log.producer_snapshot_offsets() == []


def test_moving_the_log_start_deletes_snapshots_below_it() -> None:
    log = open_log(MemoryDisk())
    append(log, 20)
    log.write_producer_snapshot(5, b"a")
    log.write_producer_snapshot(15, b"b")
    log.delete_records_before(6)
    assert log.producer_snapshot_offsets() == [15]
    log.write_producer_snapshot(10, b"c")
    log.config = LogConfig(segment_bytes=1000, retention_bytes=1)
    assert log.apply_retention(T0, log.log_end_offset) > 0
    assert 10 < log.log_start_offset == log.active_segment.base_offset <= 15
    assert log.producer_snapshot_offsets() == [15]


def test_open_deletes_snapshots_past_the_recovered_end_and_stray_temp_files() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    append(log, 10)
    log.flush()
    append(log, 5)  # not durable
    log.write_producer_snapshot(7, b"kept")
    log.write_producer_snapshot(15, b"lost tail")
    disk.write_file(f"{DIR}/{20:020d}.snapshot.tmp", b"half written")
    disk.crash()
    reopened = open_log(disk)
    assert reopened.log_end_offset == 10
    assert reopened.producer_snapshot_offsets() == [7]
    assert reopened.read_producer_snapshot(7) == b"kept"
    assert not any(name.endswith(".tmp") for name in disk.listdir(DIR))
    below_start = open_log(disk, log_start_offset=8)
    assert below_start.producer_snapshot_offsets() == []
