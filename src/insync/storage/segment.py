"""One log segment: `<base offset>.log` plus its `.index` and `.timeindex`, and the walks over its batches.

A segment holds whole record batches back to back, offsets contiguous from its base offset. Appends go to the end
of the `.log` file, and every `index.interval.bytes` of data adds an offset-index entry (and a time-index entry
when the largest timestamp grew). Reads find the batch holding an offset by a binary search of the offset index
and a short walk over batch headers, then return whole batches with one `pread`.

`BatchScan` is the single walk over a `.log` file: header-only (lookups) or with CRC checks (recovery, and
`insync log dump`). It stops at the first batch that is torn, garbled or out of sequence and says why in
`error`; `valid_end` is then where good data ends. `LogSegment.recover` rebuilds both indexes from such a scan
and cuts the file at `valid_end`.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaException
from insync.limits import RECOVERY_BATCHES_MAX
from insync.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    crc_is_valid,
    decode_records,
)
from insync.storage.disk import Disk
from insync.storage.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex

logger = logging.getLogger("insync.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SCAN_CHUNK_BYTES = 8 * 1024 * 1024

# The v2 header layout of `records.BatchHeader`, unpacked here without the whole batch in memory: lookups read
# only headers, and `records.parse_header` insists on the complete batch.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD


def unpack_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The 61 header bytes at `pos` as a `BatchHeader`, unchecked (callers check magic and length)."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset in 20 digits."""
    assert base_offset >= 0
    return f"{directory}/{base_offset:020d}{suffix}"


class BatchScan:
    """Iterate (position, header) over the batches of a `.log` file between `start` and `end`."""

    def __init__(self, disk: Disk, path: str, start: int, end: int, *, verify_crc: bool,
                 expected_offset: int | None = None, chunk_bytes: int = SCAN_CHUNK_BYTES,
                 gaps: bool = False) -> None:
        assert 0 <= start <= end and chunk_bytes >= BATCH_HEADER_SIZE
        self.disk, self.path, self.start, self.end = disk, path, start, end
        self.verify_crc = verify_crc
        self.expected_offset = expected_offset
        self.gaps = gaps  # a batch may start past `expected_offset` (a compacted log's cleaned segments)
        self.chunk_bytes = chunk_bytes
        self.valid_end = start
        self.error: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        pos, chunk, chunk_pos = self.start, b"", self.start
        for _ in range(RECOVERY_BATCHES_MAX):
            if pos >= self.end:
                return
            if pos - chunk_pos + BATCH_HEADER_SIZE > len(chunk):
                chunk, chunk_pos = self.disk.pread(self.path, pos, self.chunk_bytes), pos
            if len(chunk) - (pos - chunk_pos) < BATCH_HEADER_SIZE or self.end - pos < BATCH_HEADER_SIZE:
                self.error = f"{self.end - pos} trailing bytes, too few for a batch header (torn write?)"
                return
            header = unpack_header(chunk, pos - chunk_pos)
            self.error = self._check(pos, header)
            if self.error is None and self.verify_crc:
                if pos - chunk_pos + header.size > len(chunk):
                    chunk, chunk_pos = self.disk.pread(self.path, pos, max(self.chunk_bytes, header.size)), pos
                if not crc_is_valid(chunk, pos - chunk_pos, header):
                    self.error = f"CRC mismatch in batch at offset {header.base_offset}"
            if self.error is not None:
                return
            yield pos, header
            pos += header.size
            self.valid_end = pos
            if self.expected_offset is not None:
                self.expected_offset = header.next_offset
        self.error = f"more than {RECOVERY_BATCHES_MAX} batches"

    def _check(self, pos: int, header: BatchHeader) -> str | None:
        if header.magic != MAGIC:
            return f"unsupported magic {header.magic}"
        if header.batch_length < _MIN_BATCH_LENGTH or header.last_offset_delta < 0:
            return f"invalid batch length {header.batch_length} or last offset delta {header.last_offset_delta}"
        if pos + header.size > self.end:
            return f"batch at offset {header.base_offset} needs {header.size} bytes, {self.end - pos} left " \
                   "(torn write?)"
        expected = self.expected_offset
        if expected is not None and (header.base_offset < expected or (header.base_offset > expected and not self.gaps)):
            return f"batch base offset {header.base_offset} where {expected} was expected"
        return None


@dataclass(frozen=True, slots=True)
class SegmentRead:
    records: bytes
    first_offset: int
    next_offset: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A record found by time (Kafka's `FileRecords.TimestampAndOffset`): its timestamp and offset, and the
    leader epoch of its batch (-1 for none)."""

    timestamp: int
    offset: int
    leader_epoch: int


class LogSegment:
    """A segment's files and what is known about them in memory."""

    def __init__(self, disk: Disk, directory: str, base_offset: int, created_ms: int,
                 index_interval_bytes: int, file_suffix: str = "") -> None:
        self.disk = disk
        self.base_offset = base_offset
        self.directory = directory
        self.file_suffix = file_suffix  # "" live; ".cleaned" or ".swap" while the log cleaner replaces segments
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX) + file_suffix
        self.offset_index = OffsetIndex(disk, segment_path(directory, base_offset, INDEX_SUFFIX) + file_suffix,
                                        base_offset)
        self.time_index = TimeIndex(disk, segment_path(directory, base_offset, TIME_INDEX_SUFFIX) + file_suffix,
                                    base_offset)
        self.created_ms = created_ms
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self._bytes_since_index_entry = 0
        self.dirty = False  # written since the last fsync
        self.torn = False  # recovery cut a torn or corrupt tail off it
        self._read_hint = (base_offset, 0)  # (offset, position) where the last read ended

    @classmethod
    def create(cls, disk: Disk, directory: str, base_offset: int, created_ms: int,
               index_interval_bytes: int, file_suffix: str = "") -> LogSegment:
        segment = cls(disk, directory, base_offset, created_ms, index_interval_bytes, file_suffix)
        disk.write_file(segment.log_path, b"")
        segment.offset_index = OffsetIndex.create(disk, segment.offset_index.path, base_offset)
        segment.time_index = TimeIndex.create(disk, segment.time_index.path, base_offset)
        return segment

    def rename_suffix(self, file_suffix: str) -> None:
        """Rename the three files to carry `file_suffix` (the log cleaner's swap); the `.log` goes last, so a
        `.log` of the new suffix means its indexes are there too."""
        for index in (self.offset_index, self.time_index):
            target = index.path.removesuffix(self.file_suffix) + file_suffix
            self.disk.rename(index.path, target)
            index.path = target
        target = self.log_path.removesuffix(self.file_suffix) + file_suffix
        self.disk.rename(self.log_path, target)
        self.log_path, self.file_suffix = target, file_suffix

    def use_disk(self, disk: Disk) -> None:
        """Go on through `disk` (a segment the cleaner wrote through its own handles joins the log)."""
        self.disk = self.offset_index.disk = self.time_index.disk = disk

    @classmethod
    def open_trusted(cls, disk: Disk, directory: str, base_offset: int, next_offset: int, created_ms: int,
                     index_interval_bytes: int) -> LogSegment | None:
        """A segment wholly below the recovery point, from its index files; None when they need a rebuild."""
        segment = cls(disk, directory, base_offset, created_ms, index_interval_bytes)
        segment.size = disk.size(segment.log_path)
        offset_index = OffsetIndex.load(disk, segment.offset_index.path, base_offset, segment.size)
        time_index = TimeIndex.load(disk, segment.time_index.path, base_offset)
        if offset_index is None or time_index is None or next_offset < base_offset:
            return None
        if (offset_index.offsets and offset_index.offsets[-1] >= next_offset) or (
                time_index.offsets and time_index.offsets[-1] >= next_offset):
            return None
        segment.offset_index, segment.time_index = offset_index, time_index
        segment.next_offset = next_offset
        if len(time_index):  # a rolled segment's last time entry holds its largest timestamp
            segment.max_timestamp = time_index.timestamps[-1]
            segment.offset_of_max_timestamp = time_index.offsets[-1]
        return segment

    @classmethod
    def recover(cls, disk: Disk, directory: str, base_offset: int, created_ms: int,
                index_interval_bytes: int, gaps: bool = False) -> tuple[LogSegment, list[tuple[int, int]]]:
        """Validate every batch, cut a torn or corrupt tail, rebuild both indexes; with `gaps`, offsets may jump
        where a cleaner removed batches.

        Returns the segment and the (leader epoch, base offset) of each batch that starts a newer epoch.
        """
        segment = cls.create_indexes_only(disk, directory, base_offset, created_ms, index_interval_bytes)
        file_size = disk.size(segment.log_path)
        scan = BatchScan(disk, segment.log_path, 0, file_size, verify_crc=True, expected_offset=base_offset,
                         gaps=gaps)
        epoch_starts: list[tuple[int, int]] = []
        for position, header in scan:
            segment._note_batch(position, header)
            segment.size = position + header.size
            segment.next_offset = header.next_offset
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not epoch_starts or epoch > epoch_starts[-1][0]):
                epoch_starts.append((epoch, header.base_offset))
        assert scan.valid_end == segment.size
        segment.dirty = True
        segment.torn = segment.size < file_size
        if segment.size < file_size:
            disk.truncate(segment.log_path, segment.size)
            logger.warning("Truncated %d bytes of corrupt tail in %s (%s)", file_size - segment.size,
                           segment.log_path, scan.error)
        return segment, epoch_starts

    @classmethod
    def create_indexes_only(cls, disk: Disk, directory: str, base_offset: int, created_ms: int,
                            index_interval_bytes: int) -> LogSegment:
        """A segment object over an existing `.log` whose indexes start empty (they are about to be rebuilt)."""
        segment = cls(disk, directory, base_offset, created_ms, index_interval_bytes)
        segment.offset_index = OffsetIndex.create(disk, segment.offset_index.path, base_offset)
        segment.time_index = TimeIndex.create(disk, segment.time_index.path, base_offset)
        return segment

    def _note_batch(self, position: int, header: BatchHeader) -> None:
        """Index bookkeeping for a batch just written at `position` (Kafka's rule, per batch)."""
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Append `data`, which holds exactly the batches `headers`, back to back (after a gap in offsets where
        the log cleaner removed batches)."""
        assert headers and headers[0].base_offset >= self.next_offset, (headers[0].base_offset, self.next_offset)
        position = self.disk.append(self.log_path, data)
        assert position == self.size, f"{self.log_path}: wrote at {position}, expected {self.size}"
        for header in headers:
            self._note_batch(position, header)
            position += header.size
        assert position == self.size + len(data)
        self.size = position
        self.dirty = True
        self.next_offset = headers[-1].next_offset

    def index_full(self, index_size_max_bytes: int) -> bool:
        return (len(self.offset_index) + 1) * OFFSET_ENTRY.size > index_size_max_bytes or (
            len(self.time_index) + 1) * TIME_ENTRY.size > index_size_max_bytes

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None past the end."""
        if offset >= self.next_offset:
            return None
        # A sequential reader asks for the offset where its last read ended: start there, not at the index.
        position = self.offset_index.lookup(offset)[1]
        hint_offset, hint_position = self._read_hint
        if hint_offset <= offset and position < hint_position < self.size:
            position = hint_position
        head = self.disk.pread(self.log_path, position, BATCH_HEADER_SIZE)
        if len(head) == BATCH_HEADER_SIZE:
            header = unpack_header(head)
            if header.magic == MAGIC and header.base_offset <= offset <= header.last_offset:
                return position, header
        scan = BatchScan(self.disk, self.log_path, position, self.size, verify_crc=False,
                         chunk_bytes=self._walk_chunk_bytes())
        for found in scan:
            if found[1].last_offset >= offset:
                return found
        if scan.error is None:  # `offset` is in a gap the log cleaner left at the segment's end
            return None
        raise KafkaException(errors.KAFKA_STORAGE_ERROR,
                             f"{self.log_path}: offset {offset} not found from position {position}: {scan.error}")

    def read(self, position: int, first: BatchHeader, max_bytes: int, max_offset: int | None,
             min_one_batch: bool) -> SegmentRead:
        """Whole batches from `position`, where the batch `first` starts: as many as fit in `max_bytes` (one at
        least when `min_one_batch`: KIP-74), none starting at or after `max_offset`. One `pread` for the data;
        the header walk is in memory."""
        if max_offset is not None and first.base_offset >= max_offset:
            return SegmentRead(b"", first.base_offset, first.base_offset)
        if first.size > max_bytes:
            if not min_one_batch:
                return SegmentRead(b"", first.base_offset, first.base_offset)
            data = self.disk.pread(self.log_path, position, first.size)
            assert len(data) == first.size, f"{self.log_path}: short batch at position {position}"
            self._read_hint = (first.next_offset, position + first.size)
            return SegmentRead(data, first.base_offset, first.next_offset)
        limit = position + min(max_bytes, self.size - position)
        end, next_offset = position + first.size, first.next_offset
        # Batch starts the offset index already knows: jump to the last one inside the budget (and below
        # max_offset), then walk the few headers after it. Knowing the end first lets one pread return exactly
        # the answer, with no second copy to cut a window at a batch boundary.
        index = self.offset_index
        known = bisect.bisect_right(index.positions, limit)
        if max_offset is not None:
            known = min(known, bisect.bisect_right(index.offsets, max_offset))
        if known > 0 and index.positions[known - 1] > end:
            end, next_offset = index.positions[known - 1], index.offsets[known - 1]
        for batch_position, header in BatchScan(self.disk, self.log_path, end, limit, verify_crc=False,
                                                chunk_bytes=self._walk_chunk_bytes()):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end, next_offset = batch_position + header.size, header.next_offset
        data = self.disk.pread(self.log_path, position, end - position)
        assert len(data) == end - position, f"{self.log_path}: short read at position {position}"
        self._read_hint = (next_offset, end)
        return SegmentRead(data, first.base_offset, next_offset)

    def _walk_chunk_bytes(self) -> int:
        """Bytes to read at a time when walking headers: one index interval, where the next entry would be."""
        return min(max(self.index_interval_bytes, 0) + BATCH_HEADER_SIZE, SCAN_CHUNK_BYTES)

    def first_record(self, start: int, wanted: Callable[[int], bool]) -> TimestampAndOffset | None:
        """The first record at or after offset `start` whose timestamp is `wanted` (ListOffsets by time). A batch
        whose largest timestamp is not wanted holds no wanted record: both searches (at least t; equal to the
        log's largest) want only timestamps that make the batch's largest wanted too."""
        _, position = self.offset_index.lookup(start)
        for batch_position, header in BatchScan(self.disk, self.log_path, position, self.size, verify_crc=False):
            if header.last_offset < start or not wanted(header.max_timestamp):  # no record of it is wanted
                continue
            batch = self.disk.pread(self.log_path, batch_position, header.size)
            for record in decode_records(batch):
                if record.offset >= start and wanted(record.timestamp):
                    return TimestampAndOffset(record.timestamp, record.offset, header.partition_leader_epoch)
        return None

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that ends at or after `offset` (a batch holding `offset` goes whole)."""
        found = self.find_batch(offset)
        if found is None:
            return
        position, header = found
        self.disk.truncate(self.log_path, position)
        self.size, self.next_offset, self.dirty = position, header.base_offset, True
        self._read_hint = (self.base_offset, 0)
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self._bytes_since_index_entry = 0
        # The largest timestamp left: the last time entry covers what precedes it, walk what follows.
        self.max_timestamp = self.time_index.last_timestamp
        self.offset_of_max_timestamp = self.time_index.offsets[-1] if len(self.time_index) else self.base_offset
        _, start = self.offset_index.lookup(self.offset_of_max_timestamp)
        for _, remaining in BatchScan(self.disk, self.log_path, start, self.size, verify_crc=False):
            if remaining.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = remaining.max_timestamp, remaining.base_offset

    def seal(self) -> None:
        """Record the largest timestamp in the time index (on roll and close), so a reopen knows it."""
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.dirty = True

    def flush(self) -> None:
        self.disk.fsync(self.log_path)
        self.disk.fsync(self.offset_index.path)
        self.disk.fsync(self.time_index.path)
        self.dirty = False

    def delete(self) -> None:
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            if self.disk.exists(path):
                self.disk.remove(path)
