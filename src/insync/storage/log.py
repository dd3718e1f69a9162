"""One partition's log: an ordered list of segments, the leader epoch cache, and Kafka's offsets over them.

Offsets are contiguous across segments, the last (active) one taking appends; `log_start_offset` may lie inside
the first segment (DeleteRecords), and `recovery_point` is the offset below which data was fsynced. Batches stay
opaque bytes: a leader append validates the produced batch, copies it once to stamp base offset and leader epoch,
and writes it with one system call. Opening a log recovers it: segments below the recovery point are trusted;
from there every batch is CRC-checked, a torn or corrupt tail cut (and logged), and indexes rebuilt. An I/O error
while writing takes the log offline (KAFKA_STORAGE_ERROR until it is reopened); a read error fails only that
read; either goes to the log's `failure_channel`, which takes the whole log directory offline. Bad input raises
`InvalidRecordError`, a follower append not at the log end OFFSET_OUT_OF_RANGE; nothing is written in either case. Where Kafka leaves room: a truncation inside a batch drops the whole batch; an append in
an epoch older than the cache's latest is not recorded; time rolls and retention without timestamps count from
the segment's creation or load. A producer-state snapshot (producer_snapshots.py) is taken when a segment rolls
or the log closes, and the snapshots outside the log's offsets are deleted as its ends move.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Concatenate, ParamSpec, TypeVar

from insync import errors
from insync.clock import Clock, SystemClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.limits import SEGMENTS_PER_PARTITION_MAX
from insync.protocol.records import (
    BatchHeader,
    InvalidRecordError,
    decode_records,
    iter_batches,
    stamp,
    validate_batches,
)
from insync.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, CheckpointError
from insync.storage.cleaner_plan import SegmentInfo
from insync.storage.disk import Disk, InjectedIOError, RealDisk
from insync.storage.index import RELATIVE_OFFSET_MAX
from insync.storage.leader_epoch import LeaderEpochCache
from insync.storage.log_dir_failure import LogDirFailureChannel
from insync.storage.producer_snapshots import ProducerSnapshotFiles
from insync.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchScan,
    LogSegment,
    TimestampAndOffset,
)
from insync.storage.segment_swap import recover_swaps, swap_in

logger = logging.getLogger("insync.storage")

_P = ParamSpec("_P")
_R = TypeVar("_R")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


def _writes(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
    """An I/O error while changing the log takes it offline, as Kafka takes a log dir offline: the call and
    every later one raise KAFKA_STORAGE_ERROR until the log is reopened (and so recovered)."""

    @functools.wraps(method)
    def guarded(log: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if log.offline:
            raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"{log.directory} is offline after an I/O error")
        try:
            return method(log, *args, **kwargs)
        except OSError as exc:
            log.offline = True
            logger.error("Taking %s offline after an I/O error: %s", log.directory, exc)
            log.report_io_error(method.__name__, exc)
            raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"{log.directory}: {exc}") from exc

    return guarded


def _reads(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
    """An I/O error while reading fails the call with KAFKA_STORAGE_ERROR; the log stays usable unless its
    directory's failure channel takes the whole directory offline."""

    @functools.wraps(method)
    def guarded(log: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if log.offline:
            raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"{log.directory} is offline after an I/O error")
        try:
            return method(log, *args, **kwargs)
        except OSError as exc:
            log.report_io_error(method.__name__, exc)
            raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"{log.directory}: {exc}") from exc

    return guarded


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    batch_count: int
    size_bytes: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes
    first_offset: int  # base offset of the first batch returned, or the fetch offset when empty
    next_offset: int
    log_start_offset: int
    log_end_offset: int  # captured before the read (KAFKA-7104, REFERENCE.md 1)
    read_latency_ms: int = 0


class Log:
    def __init__(self, directory: str, config: LogConfig, disk: Disk, clock: Clock,
                 leader_epoch_cache: LeaderEpochCache, owns_disk: bool) -> None:
        self.directory = directory
        self.config = config
        self.disk = disk
        self.clock = clock
        self.leader_epoch_cache = leader_epoch_cache
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.offline = False
        self._owns_disk = owns_disk
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self.producer_snapshots = ProducerSnapshotFiles(disk, directory)
        self._log_start_listener: Callable[[int], None] | None = None
        # Moves on every change that removes segments a clean may have read (truncation, deletion, retention,
        # closing): a clean prepared under an older generation is void (Kafka aborts and pauses its cleaning).
        self.cleaning_generation = 0
        # The lowest offset truncated to since the cleaner last looked: its checkpoint may not stay above it
        # (Kafka's LogCleanerManager.maybeTruncateCheckpoint).
        self.truncated_to: int | None = None
        # Where an I/O error from the file system is reported: the log directory then goes offline as a whole.
        self.failure_channel: LogDirFailureChannel | None = None

    def report_io_error(self, action: str, error: OSError) -> None:
        """Hand an error of the file system to the failure channel (Kafka's `maybeHandleIOException`); one that
        `FaultHooks` injected on this partition fails this log alone."""
        if self.failure_channel is not None and not isinstance(error, InjectedIOError):
            parent = str(PurePosixPath(self.directory).parent)
            self.failure_channel.maybe_add_offline_log_dir(
                parent, f"Error while {action} of {PurePosixPath(self.directory).name} in dir {parent}", error)

    # --- Opening and recovery ------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | Path, config: LogConfig, disk: Disk | None = None, *,
             clock: Clock | None = None, recovery_point: int | None = None,
             log_start_offset: int | None = None) -> Log:
        """Open (creating when missing) and recover the log in `directory`. Without a recovery point every
        segment is checked."""
        path = str(directory).rstrip("/") or "/"
        real_disk = disk or RealDisk()
        real_disk.mkdir(path)
        epoch_path = f"{path}/{LEADER_EPOCH_CHECKPOINT}"
        try:
            # Without the file (never written, or lost) the cache is rebuilt too: the batches hold the epochs.
            cache, rebuild_epochs = LeaderEpochCache.load(real_disk, epoch_path), not real_disk.exists(epoch_path)
        except CheckpointError as exc:
            logger.warning("Rebuilding the leader epoch cache of %s from its batches: %s", path, exc)
            cache, rebuild_epochs = LeaderEpochCache(real_disk, epoch_path), True
        log = cls(path, config, real_disk, clock or SystemClock(), cache, owns_disk=disk is None)
        recover_swaps(real_disk, path)
        log._load_segments(recovery_point or 0, rebuild_epochs, log_start_offset or 0)
        log._finish_open(recovery_point or 0, log_start_offset or 0)
        return log

    def _segment_bases(self) -> list[int]:
        bases: set[int] = set()
        for name in self.disk.listdir(self.directory):
            match = _SEGMENT_NAME.match(name)
            if match and match.group(2) == "log":
                bases.add(int(match.group(1)))
            elif name.endswith(".tmp"):
                self.disk.remove(f"{self.directory}/{name}")  # a checkpoint write that never got renamed
        for name in self.disk.listdir(self.directory):
            match = _SEGMENT_NAME.match(name)
            if match and int(match.group(1)) not in bases:
                self.disk.remove(f"{self.directory}/{name}")  # an index whose segment was deleted
        assert len(bases) <= SEGMENTS_PER_PARTITION_MAX, f"{self.directory}: too many segments"
        return sorted(bases)

    def _load_segments(self, recovery_point: int, rebuild_epochs: bool, log_start_offset: int) -> None:
        bases = self._segment_bases()
        now_ms = self.clock.now_ms()
        for i, base in enumerate(bases):
            following = bases[i + 1] if i + 1 < len(bases) else None
            segment = None
            if following is not None and following <= recovery_point:
                segment = LogSegment.open_trusted(self.disk, self.directory, base, following, now_ms,
                                                  self.config.index_interval_bytes)
                if segment is not None and rebuild_epochs:
                    self._assign_epochs(_epoch_starts(segment))
            if segment is None:
                segment, epoch_starts = LogSegment.recover(self.disk, self.directory, base, now_ms,
                                                           self.config.index_interval_bytes, self.config.compact)
                self._assign_epochs(epoch_starts)
            self.segments.append(segment)
            if following is not None:
                segment.seal()
                # A segment that does not end where its successor starts loses what follows it; in a compacted
                # log one may end short (a clean removed its last batches), so there, as in Kafka, only a torn or
                # overlapping one does.
                if (segment.next_offset != following if not self.config.compact
                        else segment.torn or segment.next_offset > following):
                    self._drop_segment_files(bases[i + 1:])
                    break
        if not self.segments:
            self.segments.append(LogSegment.create(self.disk, self.directory, max(log_start_offset, 0), now_ms,
                                                   self.config.index_interval_bytes))

    def _drop_segment_files(self, bases: list[int]) -> None:
        logger.warning("Deleting segments %s of %s: they follow a truncated segment", bases, self.directory)
        for base in bases:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                path = f"{self.directory}/{base:020d}{suffix}"
                if self.disk.exists(path):
                    self.disk.remove(path)

    def _assign_epochs(self, epoch_starts: list[tuple[int, int]]) -> None:
        for epoch, start_offset in epoch_starts:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                self.leader_epoch_cache.assign(epoch, start_offset)

    def _finish_open(self, recovery_point: int, log_start_offset: int) -> None:
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            logger.warning("Log start offset %d of %s is past its end %d: starting the log there",
                           self.log_start_offset, self.directory, self.log_end_offset)
            self.truncate_fully_and_start_at(self.log_start_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.recovery_point = min(max(recovery_point, self.segments[0].base_offset), self.log_end_offset)
        self.producer_snapshots.delete_where(lambda offset: not self.log_start_offset <= offset <= self.log_end_offset)

    # --- Offsets -------------------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # --- Appends -------------------------------------------------------------------------------------------

    @_writes
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int, *,
                         from_client: bool = True) -> AppendInfo:
        """Validate the produced batch (a coordinator's: not as a client's), give it the next offsets and
        `leader_epoch`, and append it."""
        assert leader_epoch >= 0
        (header,) = validate_batches(records, max_message_bytes=self.config.max_message_bytes, from_client=from_client)
        if self.config.compact:
            self._check_keys(records)
        base_offset = self.log_end_offset
        buffer = bytearray(records)  # the one copy: stamping writes into it, the caller's bytes stay as sent
        stamp(buffer, 0, base_offset=base_offset, partition_leader_epoch=leader_epoch)
        stamped = dataclasses.replace(header, base_offset=base_offset, partition_leader_epoch=leader_epoch)
        info = self._append(buffer, [stamped])
        self._assign_epochs([(leader_epoch, base_offset)])
        return info

    def _check_keys(self, records: bytes | bytearray | memoryview) -> None:
        """A compacted log keeps the last record of each key: a batch with a record without one is refused (Kafka's
        LogValidator: INVALID_RECORD, a record error naming each such record, and Kafka's summary)."""
        why = f"Compacted topic cannot accept message without key in topic partition {PurePosixPath(self.directory).name}"
        keyless = tuple((i, why) for i, record in enumerate(decode_records(records)) if record.key is None)
        if keyless:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i, message in keyless[:3])
            raise InvalidRecordError(errors.BY_NAME["INVALID_RECORD"], "One or more records have been rejected due "
                                     f"to {len(keyless)} record errors in total, and only showing the first three "
                                     f"errors at most: [{shown}]", keyless)

    @_writes
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches copied from the leader, offsets and epochs as they are; they must start at or after the
        log end offset and follow each other in order (gaps are what the leader's cleaner removed). CRC-checked,
        all or nothing."""
        headers = [header for _, header in iter_batches(records, verify_crc=True)]
        if not headers:
            raise KafkaException(errors.CORRUPT_MESSAGE, f"{self.directory}: follower append without batches")
        expected = self.log_end_offset
        # A gap is where the leader's cleaner removed batches: Kafka allows one in any log, since a topic compacted
        # once keeps its gaps when its policy changes (a new replica must still copy it).
        if headers[0].base_offset < expected:
            raise KafkaException(errors.OFFSET_OUT_OF_RANGE, f"{self.directory}: follower append at offset "
                                 f"{headers[0].base_offset} would leave an overlap: log end offset is {expected}")
        for previous, header in zip(headers, headers[1:], strict=False):
            if header.base_offset < previous.next_offset:
                raise KafkaException(errors.UNKNOWN_SERVER_ERROR, f"{self.directory}: batch at offset "
                                     f"{header.base_offset} does not follow {previous.last_offset}")
        for header in headers:
            if header.size > self.config.max_message_bytes:
                raise KafkaException(errors.MESSAGE_TOO_LARGE, f"{self.directory}: batch at offset "
                                     f"{header.base_offset} is {header.size} bytes, over max.message.bytes")
        info = self._append(records, headers)  # written as it came: no copy of the fetched bytes
        self._assign_epochs([(h.partition_leader_epoch, h.base_offset) for h in headers
                             if h.partition_leader_epoch >= 0])
        return info

    def _append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> AppendInfo:
        self.maybe_roll(len(data), headers[-1].last_offset)
        self.active_segment.append(data, headers)
        record_count = sum(header.record_count for header in headers)
        self._unflushed_messages += record_count
        self._maybe_flush()
        return AppendInfo(
            first_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            record_count=record_count,
            max_timestamp=max(header.max_timestamp for header in headers),
            batch_count=len(headers),
            size_bytes=len(data),
            log_start_offset=self.log_start_offset,
        )

    def maybe_roll(self, incoming_bytes: int = 0, last_offset: int | None = None) -> bool:
        """Start a new segment when the active one would pass `segment.bytes`, is older than `segment.ms`,
        has a full index, or could not index `last_offset` relative to its base. Never rolls an empty one."""
        active = self.active_segment
        if active.size == 0:
            return False
        if (active.size + incoming_bytes > self.config.segment_bytes
                or self.clock.now_ms() - active.created_ms > self.config.segment_ms
                or active.index_full(self.config.index_size_max_bytes)
                or (last_offset is not None and last_offset - active.base_offset > RELATIVE_OFFSET_MAX)):
            self.roll()
            return True
        return False

    @_writes
    def roll(self) -> None:
        """Seal the active segment and start one at the log end offset. The sealed segment stays dirty until
        `flush_sealed` (or a flush) fsyncs it, before the recovery point passes it."""
        if self.active_segment.size == 0:
            return
        assert len(self.segments) < SEGMENTS_PER_PARTITION_MAX, f"{self.directory}: too many segments"
        self.active_segment.seal()
        self.segments.append(LogSegment.create(self.disk, self.directory, self.log_end_offset,
                                               self.clock.now_ms(), self.config.index_interval_bytes))
        # Before the append that caused the roll: the source's table covers exactly the batches below the end.
        self.producer_snapshots.take(self.log_end_offset)

    def _maybe_flush(self) -> None:
        flush_ms = self.config.flush_interval_ms
        if self._unflushed_messages >= self.config.flush_interval_messages or (
                flush_ms is not None and self.clock.monotonic_ms() - self._last_flush_ms >= flush_ms):
            self.flush()

    @_writes
    def flush_sealed(self) -> None:
        """fsync the segments sealed by a roll and move the recovery point to the active segment's base: Kafka
        schedules this flush when a segment rolls (`flush-log`, asynchronous there; the broker calls this with
        its periodic checkpoint). Without it the recovery point would move only on `flush()`, which by default
        never comes, and a crash would re-check the whole log on open. Nothing to do when nothing rolled."""
        active_base = self.active_segment.base_offset
        if self.recovery_point >= active_base:
            return
        for segment in self.segments[:-1]:
            if segment.dirty:
                segment.flush()
        self.recovery_point = active_base

    @_writes
    def flush(self) -> None:
        """fsync every segment written since the last flush, then move the recovery point to the end."""
        end = self.log_end_offset
        for segment in self.segments:
            if segment.dirty:
                segment.flush()
        self.recovery_point = end
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.monotonic_ms()

    # --- Reads ---------------------------------------------------------------------------------------------

    @_reads
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, *,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches from the one holding `offset`, within one segment (see `LogSegment.read`)."""
        assert max_bytes >= 0
        log_start_offset, log_end_offset = self.log_start_offset, self.log_end_offset
        if offset < log_start_offset or offset > log_end_offset:
            raise KafkaException(errors.OFFSET_OUT_OF_RANGE, f"{self.directory}: offset {offset} is outside "
                                 f"[{log_start_offset}, {log_end_offset}]")
        empty = ReadResult(b"", offset, offset, log_start_offset, log_end_offset)
        if offset == log_end_offset or (max_offset is not None and offset >= max_offset):
            return empty
        found = self._find_batch(offset)
        if found is None:
            return empty
        segment, position, header = found
        result = segment.read(position, header, max_bytes, max_offset, min_one_batch)
        if not result.records:
            return empty
        return ReadResult(result.records, result.first_offset, result.next_offset, log_start_offset,
                          log_end_offset, self.disk.read_latency_ms(segment.log_path))

    @_reads
    def batch_header(self, offset: int) -> BatchHeader | None:
        """The header of the batch holding `offset` (its header read alone), or None outside the log."""
        found = self._find_batch(offset) if self.log_start_offset <= offset < self.log_end_offset else None
        return None if found is None else found[2]

    def _find_batch(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """The segment, position and header of the first batch ending at or after `offset` (in the log)."""
        index = bisect.bisect_right(self.segments, offset, key=_base_offset) - 1
        for segment in self.segments[index:]:
            found = segment.find_batch(offset)
            if found is not None:
                return segment, found[0], found[1]
        return None

    @_reads
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time: the first record at or after the log start timestamped >= `timestamp` (or None)."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp or segment.next_offset <= self.log_start_offset:
                continue
            start = max(segment.time_index.lookup_before(timestamp), self.log_start_offset)
            found = segment.first_record(start, lambda ts: ts >= timestamp)
            if found is not None:
                return found
        return None

    @_reads
    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record carrying the largest timestamp of the log (Kafka's
        `UnifiedLog.fetchOffsetByTimestamp`: the first segment with the largest, its first batch with it, that
        batch's first record with it); None when the log has no timestamped record past its start."""
        live = [s for s in self.segments if s.next_offset > self.log_start_offset and s.max_timestamp >= 0]
        if not live:
            return None
        segment = max(live, key=lambda s: s.max_timestamp)  # the first of equals, as Kafka's maxBy
        largest = segment.max_timestamp
        return segment.first_record(max(segment.offset_of_max_timestamp, self.log_start_offset),
                                    lambda ts: ts == largest)

    # --- Compaction ---------------------------------------------------------------------------------------------

    def segment_infos(self, first_batch_timestamps: bool) -> tuple[SegmentInfo, ...]:
        """What the cleaner's planning needs of each segment (the first batch's timestamp costs a read, so only
        when `max.compaction.lag.ms` is set)."""
        return tuple(SegmentInfo(s.base_offset, s.size, s.max_timestamp,
                                 self._first_batch_timestamp(s) if first_batch_timestamps else -1,
                                 len(s.offset_index), len(s.time_index)) for s in self.segments)

    def _first_batch_timestamp(self, segment: LogSegment) -> int:
        found = segment.find_batch(segment.base_offset) if segment.size else None
        return -1 if found is None else found[1].max_timestamp

    @_writes
    def replace_segments(self, cleaned: LogSegment, old: tuple[LogSegment, ...]) -> None:
        """Swap the cleaned segment in for `old`, consecutive segments of this log below the active one
        (`segment_swap.swap_in`: each step survives a crash)."""
        first = next(i for i, segment in enumerate(self.segments) if segment is old[0])
        assert tuple(self.segments[first:first + len(old)]) == old and first + len(old) < len(self.segments)
        cleaned.use_disk(self.disk)
        swap_in(cleaned, old)
        self.segments[first:first + len(old)] = [cleaned]
        assert all(a.base_offset < b.base_offset for a, b in zip(self.segments, self.segments[1:], strict=False))

    # --- Truncation and deletion ---------------------------------------------------------------------------

    @_writes
    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after `offset`. At or past the end only the leader epoch cache is cut back to
        the end: a former leader may have recorded its epoch without appending (Kafka's truncateTo does the same)."""
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        self.cleaning_generation += 1
        self._note_truncation(offset)
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.active_segment.base_offset > offset:
            self.segments.pop().delete()
        self.active_segment.truncate_to(offset)
        if self.log_end_offset < self.log_start_offset:
            # The batch holding the log start offset went whole: nothing readable is left.
            self.truncate_fully_and_start_at(offset)
            return
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.producer_snapshots.delete_where(lambda snapshot: snapshot > self.log_end_offset)

    def _note_truncation(self, offset: int) -> None:
        self.truncated_to = offset if self.truncated_to is None else min(self.truncated_to, offset)

    @_writes
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset`."""
        assert offset >= 0
        self.cleaning_generation += 1
        self._note_truncation(offset)
        for segment in self.segments:
            segment.delete()
        self.segments = [LogSegment.create(self.disk, self.directory, offset, self.clock.now_ms(),
                                           self.config.index_interval_bytes)]
        self.log_start_offset = self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_snapshots.delete_where(lambda _snapshot: True)
        self._tell_log_start()

    @_writes
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to `offset` (never back, never past the end) and delete the whole
        segments below it. Returns the new log start offset."""
        if offset > self.log_end_offset:
            raise KafkaException(errors.OFFSET_OUT_OF_RANGE, f"{self.directory}: cannot move the log start "
                                 f"offset to {offset}, past the log end offset {self.log_end_offset}")
        if offset > self.log_start_offset:
            self.cleaning_generation += 1
            self.log_start_offset = offset
            while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
                self.segments.pop(0).delete()
            self.leader_epoch_cache.truncate_from_start(offset)
            self._log_start_moved()
        return self.log_start_offset

    @_writes
    def apply_retention(self, now_ms: int, high_watermark: int) -> int:
        """Delete the oldest whole segments past `retention.ms` or beyond `retention.bytes`, never the active
        one and never one holding offsets at or above `high_watermark` (Kafka's `UnifiedLog.deletableSegments`:
        a segment goes only when its successor starts at or below the high watermark), so the log start never
        passes it: what no follower may have yet stays. Returns how many were deleted."""
        assert high_watermark <= self.log_end_offset, (high_watermark, self.log_end_offset)
        if not self.config.delete:  # cleanup.policy=compact alone: the cleaner, not retention, keeps it small
            return 0
        deleted = 0
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        excess_bytes = self.size_bytes - retention_bytes if retention_bytes >= 0 else -1
        while len(self.segments) > 1:
            oldest = self.segments[0]
            if self.segments[1].base_offset > high_watermark:
                break
            last_ms = oldest.max_timestamp if oldest.max_timestamp >= 0 else oldest.created_ms
            expired = retention_ms >= 0 and now_ms - last_ms > retention_ms
            if not expired and excess_bytes < oldest.size:
                break
            excess_bytes -= oldest.size
            self.segments.pop(0).delete()
            deleted += 1
        if deleted:
            self.cleaning_generation += 1
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            self.recovery_point = max(self.recovery_point, self.segments[0].base_offset)
            self._log_start_moved()
        assert not deleted or self.segments[0].base_offset <= high_watermark, (self.segments[0], high_watermark)
        return deleted

    @_writes
    def close(self) -> None:
        """Seal and flush, so the next open trusts everything below the end, and snapshot the producers so it
        need not read the log to rebuild them."""
        self.cleaning_generation += 1
        self.active_segment.seal()
        self.flush()
        self.producer_snapshots.take(self.log_end_offset)
        if self._owns_disk and isinstance(self.disk, RealDisk):
            self.disk.close()

    # --- Producer-state snapshots ----------------------------------------------------------------------------

    def set_producer_snapshot_source(self, source: Callable[[int], bytes] | None) -> None:
        """`source(offset)`: the snapshot bytes for the batches below `offset`, asked when one is taken."""
        self.producer_snapshots.source = source

    def producer_snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        return self.producer_snapshots.offsets()

    @_reads
    def read_producer_snapshot(self, offset: int) -> bytes:
        return self.producer_snapshots.read(offset)

    @_writes
    def write_producer_snapshot(self, offset: int, data: bytes) -> None:
        """Replace the snapshot at `offset` atomically, then keep only the newest few."""
        assert self.log_start_offset <= offset <= self.log_end_offset, (offset, self.log_end_offset)
        self.producer_snapshots.write(offset, data)

    @_writes
    def delete_producer_snapshot(self, offset: int) -> None:
        self.producer_snapshots.delete(offset)

    def set_log_start_listener(self, listener: Callable[[int], None] | None) -> None:
        """`listener(log_start_offset)` after the log start moved up (DeleteRecords, retention, a restart at a
        new offset): the producer table forgets producers whose batches are all gone (Kafka's truncateHead)."""
        self._log_start_listener = listener

    def _log_start_moved(self) -> None:
        self.producer_snapshots.delete_where(lambda snapshot: snapshot < self.log_start_offset)
        self._tell_log_start()

    def _tell_log_start(self) -> None:
        if self._log_start_listener is not None:
            self._log_start_listener(self.log_start_offset)


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


def _epoch_starts(segment: LogSegment) -> list[tuple[int, int]]:
    """(epoch, base offset) of each batch of a trusted segment that starts a newer epoch (headers only)."""
    starts: list[tuple[int, int]] = []
    for _, header in BatchScan(segment.disk, segment.log_path, 0, segment.size, verify_crc=False):
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not starts or epoch > starts[-1][0]):
            starts.append((epoch, header.base_offset))
    return starts
