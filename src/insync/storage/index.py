"""Sparse offset and time indexes of one segment, in memory and in Kafka's file formats.

`.index`: 8-byte entries, relative offset (int32) and file position (int32), one every `index.interval.bytes`
of log data, keyed here by the *base* offset of the indexed batch. `.timeindex`: 12-byte entries, timestamp
(int64) and relative offset (int32), appended only when the largest timestamp seen so far grows. Both are
big-endian and sorted, so a lookup is a binary search; the lists in memory mirror the files (Kafka mmaps them;
lists are the simple equivalent). A file whose entries are torn or out of order does not load: the segment
rebuilds it from the log instead.
"""

from __future__ import annotations

import bisect
import struct

from insync.storage.disk import Disk

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
RELATIVE_OFFSET_MAX = 2**31 - 1


class OffsetIndex:
    """Offset -> position of the batch starting at that offset. Offsets in memory are absolute."""

    def __init__(self, disk: Disk, path: str, base_offset: int) -> None:
        self.disk = disk
        self.path = path
        self.base_offset = base_offset
        self.offsets: list[int] = []
        self.positions: list[int] = []

    @classmethod
    def create(cls, disk: Disk, path: str, base_offset: int) -> OffsetIndex:
        """A new, empty index; an old file of that name is emptied."""
        disk.write_file(path, b"")
        return cls(disk, path, base_offset)

    @classmethod
    def load(cls, disk: Disk, path: str, base_offset: int, log_size: int) -> OffsetIndex | None:
        """The index in `path`, or None when it is missing or does not describe a log of `log_size` bytes."""
        if not disk.exists(path):
            return None
        raw = disk.read_file(path)
        if len(raw) % OFFSET_ENTRY.size:
            return None
        index = cls(disk, path, base_offset)
        for relative, position in OFFSET_ENTRY.iter_unpack(raw):
            if relative < 0 or position < 0 or position >= log_size:
                return None
            if index.offsets and (base_offset + relative <= index.offsets[-1] or position <= index.positions[-1]):
                return None
            index.offsets.append(base_offset + relative)
            index.positions.append(position)
        return index

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        assert not self.offsets or (offset > self.offsets[-1] and position > self.positions[-1]), (offset, position)
        assert 0 <= offset - self.base_offset <= RELATIVE_OFFSET_MAX
        self.disk.append(self.path, OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before `offset`, or (base offset, 0) when none."""
        index = bisect.bisect_right(self.offsets, offset) - 1
        if index < 0:
            return self.base_offset, 0
        return self.offsets[index], self.positions[index]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for `offset` and later."""
        keep = bisect.bisect_left(self.offsets, offset)
        if keep < len(self.offsets):
            del self.offsets[keep:], self.positions[keep:]
            self.disk.truncate(self.path, keep * OFFSET_ENTRY.size)

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        """Replace every entry (after a rebuild from the log)."""
        self.offsets = [offset for offset, _ in entries]
        self.positions = [position for _, position in entries]
        self.disk.write_file(
            self.path, b"".join(OFFSET_ENTRY.pack(o - self.base_offset, p) for o, p in entries))


class TimeIndex:
    """Largest timestamp so far -> the offset holding it. Offsets in memory are absolute."""

    def __init__(self, disk: Disk, path: str, base_offset: int) -> None:
        self.disk = disk
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []

    @classmethod
    def create(cls, disk: Disk, path: str, base_offset: int) -> TimeIndex:
        disk.write_file(path, b"")
        return cls(disk, path, base_offset)

    @classmethod
    def load(cls, disk: Disk, path: str, base_offset: int) -> TimeIndex | None:
        if not disk.exists(path):
            return None
        raw = disk.read_file(path)
        if len(raw) % TIME_ENTRY.size:
            return None
        index = cls(disk, path, base_offset)
        for timestamp, relative in TIME_ENTRY.iter_unpack(raw):
            if relative < 0 or (index.timestamps and (timestamp <= index.timestamps[-1]
                                                      or base_offset + relative < index.offsets[-1])):
                return None
            index.timestamps.append(timestamp)
            index.offsets.append(base_offset + relative)
        return index

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry when `timestamp` is larger than the last one (the index only ever grows in time)."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        assert not self.offsets or offset >= self.offsets[-1], (offset, self.offsets[-1])
        self.disk.append(self.path, TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def lookup_before(self, timestamp: int) -> int:
        """An offset such that no record before it has a timestamp >= `timestamp` (base offset when none)."""
        index = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[index] if index >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        keep = bisect.bisect_left(self.offsets, offset)
        if keep < len(self.offsets):
            del self.timestamps[keep:], self.offsets[keep:]
            self.disk.truncate(self.path, keep * TIME_ENTRY.size)

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        self.timestamps = [timestamp for timestamp, _ in entries]
        self.offsets = [offset for _, offset in entries]
        self.disk.write_file(
            self.path, b"".join(TIME_ENTRY.pack(t, o - self.base_offset) for t, o in entries))
