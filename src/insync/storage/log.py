"""One partition's log: an ordered list of segments, the leader epoch cache, and Kafka's offsets over them.

Offsets are contiguous across segments, the last (active) one taking appends; `log_start_offset` may lie inside
the first segment (DeleteRecords), and `recovery_point` is the offset below which data was fsynced. Batches stay
opaque bytes: a leader append validates the produced batch, copies it once to stamp base offset and leader epoch,
and writes it with one system call. Opening a log recovers it (`log_loader`); lookups across segments are in
`log_reads`, when to roll and what retention deletes in `segment_policy`. An I/O error while writing takes the
log offline (KAFKA_STORAGE_ERROR until it is reopened); a read error fails only that read; either goes to the
log's `failure_channel`, which takes the whole log directory offline. Bad input raises `InvalidRecordError`, a
follower append not at the log end OFFSET_OUT_OF_RANGE; nothing is written in either case. Where Kafka leaves
room: a truncation inside a batch drops the whole batch; an append in an epoch older than the cache's latest is
not recorded. A producer-state snapshot (producer_snapshots.py) is taken when a segment rolls or the log closes,
and the snapshots outside the log's offsets are deleted as its ends move.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Concatenate, ParamSpec, TypeVar

from insync import errors
from insync.clock import Clock, SystemClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.limits import SEGMENTS_PER_PARTITION_MAX
from insync.protocol.records import BatchHeader, iter_batches, stamp, validate_batches, validate_keys
from insync.storage.disk import Disk, InjectedIOError, RealDisk
from insync.storage.leader_epoch import EpochCheckpoints, LeaderEpochCache
from insync.storage.log_dir_failure import LogDirFailureChannel
from insync.storage.log_loader import load_epoch_cache, load_segments
from insync.storage.log_reads import find_batch, max_timestamp_and_offset, offset_for_timestamp
from insync.storage.producer_snapshots import ProducerSnapshotFiles
from insync.storage.segment import LogSegment, TimestampAndOffset
from insync.storage.segment_policy import retention_deletable, should_roll
from insync.storage.segment_swap import recover_swaps, swap_in

logger = logging.getLogger("insync.storage")

_P = ParamSpec("_P")
_R = TypeVar("_R")


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

    def _epoch_checkpoint_failed(self, error: OSError) -> None:
        """Its leader epoch file, written in a batch of them (`EpochCheckpoints`), failed: as a failed write."""
        self.offline = True
        logger.error("Taking %s offline after an I/O error: %s", self.directory, error)
        self.report_io_error("writing the leader epoch checkpoint", error)

    # --- Opening and recovery ------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | Path, config: LogConfig, disk: Disk | None = None, *,
             clock: Clock | None = None, recovery_point: int | None = None,
             log_start_offset: int | None = None, epoch_writer: EpochCheckpoints | None = None) -> Log:
        """Open (creating when missing) and recover the log in `directory`. Without a recovery point every
        segment is checked. `epoch_writer`: the log manager's, for `disk`, so its epoch files can be batched."""
        path = str(directory).rstrip("/") or "/"
        real_disk = disk or RealDisk()
        real_disk.mkdir(path)
        cache, rebuild_epochs = load_epoch_cache(real_disk, path, epoch_writer)
        log = cls(path, config, real_disk, clock or SystemClock(), cache, owns_disk=disk is None)
        cache.on_write_error = log._epoch_checkpoint_failed
        recover_swaps(real_disk, path)
        log.segments = load_segments(real_disk, path, config, log.clock.now_ms(), cache, rebuild_epochs,
                                     recovery_point or 0, log_start_offset or 0)
        log._finish_open(recovery_point or 0, log_start_offset or 0)
        return log

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

    # --- Appends -------------------------------------------------------------------------------------------

    @_writes
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int, *,
                         from_client: bool = True) -> AppendInfo:
        """Validate the produced batch (a coordinator's: not as a client's), give it the next offsets and
        `leader_epoch`, and append it."""
        assert leader_epoch >= 0
        (header,) = validate_batches(records, max_message_bytes=self.config.max_message_bytes, from_client=from_client)
        if self.config.compact:
            validate_keys(records, PurePosixPath(self.directory).name)
        base_offset = self.log_end_offset
        buffer = bytearray(records)  # the one copy: stamping writes into it, the caller's bytes stay as sent
        stamp(buffer, 0, base_offset=base_offset, partition_leader_epoch=leader_epoch)
        stamped = dataclasses.replace(header, base_offset=base_offset, partition_leader_epoch=leader_epoch)
        info = self._append(buffer, [stamped])
        self.leader_epoch_cache.assign_newer([(leader_epoch, base_offset)])
        return info

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
        self.leader_epoch_cache.assign_newer([(h.partition_leader_epoch, h.base_offset) for h in headers
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
        """Seal the active segment and start another when `segment_policy.should_roll` says so."""
        if should_roll(self.active_segment, self.config, self.clock.now_ms(), incoming_bytes, last_offset):
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
        found = find_batch(self.segments, offset)
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
        found = find_batch(self.segments, offset) if self.log_start_offset <= offset < self.log_end_offset else None
        return None if found is None else found[2]

    @_reads
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time (`log_reads.offset_for_timestamp`)."""
        return offset_for_timestamp(self.segments, self.log_start_offset, timestamp)

    @_reads
    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (`log_reads.max_timestamp_and_offset`)."""
        return max_timestamp_and_offset(self.segments, self.log_start_offset)

    # --- Compaction ---------------------------------------------------------------------------------------------

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
        self._log_start_moved(lambda _snapshot: True)

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
            self._log_start_moved(lambda snapshot: snapshot < self.log_start_offset)
        return self.log_start_offset

    @_writes
    def apply_retention(self, now_ms: int, high_watermark: int) -> int:
        """Delete the oldest whole segments past `retention.ms` or beyond `retention.bytes`, never one holding
        offsets at or above `high_watermark` (Kafka's `UnifiedLog.deletableSegments`: a segment goes only when its
        successor, or the log end for the active one, starts at or below the high watermark), so the log start never
        passes it: what no follower may have yet stays. The active segment goes too once everything in it is
        replicated and past retention, a new empty one rolled first, as Kafka rolls it. Returns how many went."""
        assert high_watermark <= self.log_end_offset, (high_watermark, self.log_end_offset)
        if not self.config.delete:  # cleanup.policy=compact alone: the cleaner, not retention, keeps it small
            return 0
        deletable = retention_deletable(self.segments, self.config, now_ms, high_watermark)
        if deletable == 0:
            return 0
        if deletable == len(self.segments):
            self.roll()  # a log always has a segment: the new active one starts at the log end
        for _ in range(deletable):
            self.segments.pop(0).delete()
        self.cleaning_generation += 1
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.recovery_point = max(self.recovery_point, self.segments[0].base_offset)
        self._log_start_moved(lambda snapshot: snapshot < self.log_start_offset)
        assert self.segments[0].base_offset <= high_watermark, (self.segments[0], high_watermark)
        return deletable

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

    def _log_start_moved(self, doomed_snapshots: Callable[[int], bool]) -> None:
        """Delete the producer snapshots the move leaves outside the log, then tell the listener."""
        self.producer_snapshots.delete_where(doomed_snapshots)
        if self._log_start_listener is not None:
            self._log_start_listener(self.log_start_offset)

