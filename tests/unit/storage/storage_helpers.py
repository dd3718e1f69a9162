"""Shared builders for the storage tests."""

from __future__ import annotations

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.protocol.records import RecordSpec, build_batch, iter_batches
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log

DIR = "/logs/t-0"


def batch(count: int = 3, *, timestamp: int = 1_700_000_000_000, value_bytes: int = 10,
          timestamps: list[int] | None = None) -> bytes:
    """A produced batch (base offset 0) of `count` records."""
    stamps = timestamps or [timestamp] * count
    specs = [RecordSpec(key=b"k%d" % i, value=bytes([65 + i % 26]) * value_bytes, timestamp=ts)
             for i, ts in enumerate(stamps)]
    return build_batch(specs, base_timestamp=stamps[0])


def open_log(disk: MemoryDisk | None = None, clock: ManualClock | None = None, **config: int) -> Log:
    return Log.open(DIR, LogConfig(**config), disk or MemoryDisk(), clock=clock or ManualClock())  # type: ignore[arg-type]


def bases(records: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(records)]


def all_batches(log: Log) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch from the log start, read back through `Log.read`."""
    found: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        result = log.read(offset, 1 << 20)
        assert result.records, f"empty read at {offset} below the end {log.log_end_offset}"
        for position, header in iter_batches(result.records):
            found.append((header.base_offset, bytes(result.records[position : position + header.size])))
        offset = result.next_offset
    return found


def check_structure(log: Log) -> None:
    """Segments contiguous, every index entry pointing at the batch it names, time entries within range."""
    from insync.protocol.records import BATCH_HEADER_SIZE
    from insync.storage.segment import unpack_header

    segments = log.segments
    for current, following in zip(segments, segments[1:], strict=False):
        assert current.next_offset == following.base_offset, (current.base_offset, following.base_offset)
    assert log.log_start_offset >= segments[0].base_offset and log.recovery_point <= log.log_end_offset
    for segment in segments:
        assert segment.size == log.disk.size(segment.log_path)
        for offset, position in zip(segment.offset_index.offsets, segment.offset_index.positions, strict=True):
            head = log.disk.pread(segment.log_path, position, BATCH_HEADER_SIZE)
            header = unpack_header(head)
            assert header.base_offset == offset, (segment.log_path, offset, position, header.base_offset)
        for timestamp, offset in zip(segment.time_index.timestamps, segment.time_index.offsets, strict=True):
            assert segment.base_offset <= offset < max(segment.next_offset, segment.base_offset + 1)
            assert timestamp <= segment.max_timestamp
