"""One clean of one log (Kafka's `Cleaner.doClean`): map the dirty section, then rewrite the log below the map's
end into cleaned segments, ready to be swapped in.

The offset map takes the keys of the dirty section [first dirty offset, first uncleanable offset) in order until it
is full; the clean then covers the log from its start to the map's last offset, and the next one (a new pass, as
Kafka cleans a log with more keys than its map holds) goes on from there. The segments below that end are grouped
(`cleaner_plan.group_segments_by_size`) and each group rewritten, batch by batch (`batch_filter`), into one segment
with the base offset of its first, written with the suffix `.cleaned` and fsynced. Both passes follow the log's
transactions (`cleaned_txns`): aborted records are neither mapped nor kept; the aborted transactions left without
records go back with the clean, for the index to drop. The swap (`segment_swap.swap_in`) is the log's owner's to
do: this module only reads the old segments and writes new files, through a `Disk` of its own (a cleaner worker
never shares file handles with the event loop). `check_done` is called between batches and raises to abort (a
truncation or deletion asked for the log); `throttle(bytes)` paces I/O (`log.cleaner.io.max.bytes.per.second`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from insync.limits import RECOVERY_BATCHES_MAX
from insync.protocol.control_records import AbortedTxn
from insync.protocol.records import BatchHeader, decode_records, parse_header
from insync.storage.batch_filter import FilterContext, FilterStats, filter_batch
from insync.storage.cleaned_txns import CleanedTransactions
from insync.storage.cleaner_plan import SegmentInfo, group_segments_by_size, segments_between
from insync.storage.disk import Disk
from insync.storage.offset_map import OffsetMap
from insync.storage.segment import BatchScan, LogSegment
from insync.storage.segment_swap import CLEANED_SUFFIX
from insync.types import TopicPartition

logger = logging.getLogger("insync.storage")

_WRITE_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanJob:
    """What one clean needs, captured on the log's own thread: the segments below the first uncleanable offset."""

    topic_partition: TopicPartition
    directory: str
    segments: tuple[LogSegment, ...]
    infos: tuple[SegmentInfo, ...]  # of `segments`
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    segment_bytes: int
    index_size_max_bytes: int
    index_interval_bytes: int
    delete_retention_ms: int
    last_offsets_of_producers: Mapping[int, int]
    aborted_txns: tuple[AbortedTxn, ...]  # the index's aborted transactions starting below the uncleanable offset
    generation: int  # the log's cleaning generation: a truncation or deletion since makes the clean void


@dataclass(slots=True)
class CleanerStats:
    """Kafka's CleanerStats: what was read to map and to clean, and what was written."""

    filtered: FilterStats = field(default_factory=FilterStats)
    map_messages_read: int = 0
    map_bytes_read: int = 0
    buffer_utilization: float = 0.0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PreparedClean:
    job: CleanJob
    end_offset: int  # the new cleaner checkpoint: the map's last offset + 1
    replacements: tuple[tuple[tuple[LogSegment, ...], LogSegment], ...]  # (old segments, their cleaned one)
    # Aborted transactions whose markers the clean rewrote with no record of theirs left: the index drops them
    # before the swap, as Kafka's cleaned segments get a transaction index without them.
    emptied_aborted_txns: tuple[AbortedTxn, ...]
    stats: CleanerStats


class CleaningAborted(Exception):
    """Raised by `check_done` between batches when the log's owner wants its files back (deletion)."""


def run_clean(job: CleanJob, disk: Disk, offset_map: OffsetMap, throttle: Callable[[int], None],
              check_done: Callable[[], None]) -> PreparedClean | BaseException:
    """One clean, or the error that ended it (its `.cleaned` files removed): what an executor hands back."""
    try:
        return Cleaner(disk, offset_map, throttle, check_done).clean(job)
    except Exception as exc:
        _remove_cleaned(disk, job.directory)
        return exc


def _remove_cleaned(disk: Disk, directory: str) -> None:
    """What an abandoned clean wrote (the next open removes it too)."""
    try:
        for name in disk.listdir(directory):
            if name.endswith(CLEANED_SUFFIX):
                disk.remove(f"{directory}/{name}")
    except OSError as exc:
        logger.warning("Could not remove the cleaned files of an abandoned clean in %s: %s", directory, exc)


class Cleaner:
    def __init__(self, disk: Disk, offset_map: OffsetMap, throttle: Callable[[int], None],
                 check_done: Callable[[], None]) -> None:
        self.disk = disk
        self.offset_map = offset_map
        self.throttle = throttle
        self.check_done = check_done

    def clean(self, job: CleanJob) -> PreparedClean:
        assert job.first_dirty_offset < job.first_uncleanable_offset, job
        started = time.monotonic()
        stats = CleanerStats()
        self._build_offset_map(job, stats)
        end_offset = self.offset_map.latest_offset + 1
        assert end_offset > job.first_dirty_offset, (end_offset, job.first_dirty_offset)
        infos = segments_between(job.infos, -1, end_offset)
        transactions = CleanedTransactions(_aborted_from(job, infos[0].base_offset))
        context = FilterContext(self.offset_map, job.now_ms, job.delete_retention_ms, job.first_uncleanable_offset,
                                job.last_offsets_of_producers, transactions)
        by_base = {segment.base_offset: segment for segment in job.segments}
        groups = group_segments_by_size(infos, job.segment_bytes, job.index_size_max_bytes,
                                        job.first_uncleanable_offset)
        replacements = []
        for group in groups:
            old = tuple(by_base[info.base_offset] for info in group)
            replacements.append((old, self._clean_group(job, old, context, stats.filtered)))
        stats.buffer_utilization = self.offset_map.utilization()
        stats.elapsed_s = time.monotonic() - started
        emptied = _emptied(job, infos, transactions.retained)
        return PreparedClean(job, end_offset, tuple(replacements), emptied, stats)

    # --- The offset map ---------------------------------------------------------------------------------------

    def _build_offset_map(self, job: CleanJob, stats: CleanerStats) -> None:
        """Kafka's `buildOffsetMap`: every keyed record from the first dirty offset, until the map is full."""
        self.offset_map.clear()
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        dirty = segments_between(job.infos, start, end)
        by_base = {segment.base_offset: segment for segment in job.segments}
        transactions = CleanedTransactions(_aborted_from(job, dirty[0].base_offset))
        for i, info in enumerate(dirty):
            following = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(by_base[info.base_offset], start, transactions, stats):
                return
            self.offset_map.update_latest_offset(following - 1)  # over a gap the cleaner left at its end

    def _map_segment(self, segment: LogSegment, start: int, transactions: CleanedTransactions,
                     stats: CleanerStats) -> bool:
        """Map the keys of `segment` from `start`, but none of a marker or an aborted transaction's records;
        True when the map filled up. Every batch of the segment goes past `transactions`, in order."""
        for data, header in self._batches(segment):
            self.check_done()
            stats.map_bytes_read += header.size
            if header.is_control:
                transactions.on_control_batch(header, data)
            elif not transactions.on_data_batch(header) and header.last_offset >= start:
                for record in decode_records(data):
                    stats.map_messages_read += 1
                    if record.key is None or record.offset < start:
                        continue
                    if self.offset_map.full:
                        return True
                    self.offset_map.put(record.key, record.offset)
            if header.last_offset >= start:
                self.offset_map.update_latest_offset(header.last_offset)
        return False

    def _batches(self, segment: LogSegment) -> Iterator[tuple[bytes, BatchHeader]]:
        """Each batch of a sealed segment with its bytes, read through the cleaner's own disk and throttled."""
        scan = BatchScan(self.disk, segment.log_path, 0, segment.size, verify_crc=False)
        for count, (position, header) in enumerate(scan):
            assert count < RECOVERY_BATCHES_MAX
            data = self.disk.pread(segment.log_path, position, header.size)
            self.throttle(len(data))
            yield data, header
        if scan.error is not None:
            raise OSError(f"{segment.log_path}: {scan.error}")

    # --- Rewriting -------------------------------------------------------------------------------------------

    def _clean_group(self, job: CleanJob, old: Sequence[LogSegment], context: FilterContext,
                     stats: FilterStats) -> LogSegment:
        """Kafka's `cleanSegments`: the group's batches filtered into one `.cleaned` segment, sealed and fsynced."""
        cleaned = LogSegment.create(self.disk, job.directory, old[0].base_offset, old[-1].created_ms,
                                    job.index_interval_bytes, CLEANED_SUFFIX)
        pending, headers = bytearray(), []
        for segment in old:
            for data, header in self._batches(segment):
                self.check_done()
                out = filter_batch(data, header, context, stats)
                if out is None:
                    continue
                pending += out
                headers.append(header if out is data else parse_header(out))
                if len(pending) >= _WRITE_CHUNK_BYTES:
                    self._write(cleaned, pending, headers)
                    pending, headers = bytearray(), []
        if headers:
            self._write(cleaned, pending, headers)
        cleaned.seal()
        cleaned.flush()
        return cleaned

    def _write(self, cleaned: LogSegment, data: bytearray, headers: list[BatchHeader]) -> None:
        cleaned.append(data, headers)
        self.throttle(len(data))


def _aborted_from(job: CleanJob, base_offset: int) -> list[AbortedTxn]:
    """The aborted transactions a read from `base_offset` (a segment's base) may meet (Kafka's
    `collectAbortedTransactions`): those whose marker is not below it."""
    return [txn for txn in job.aborted_txns if txn.last_offset >= base_offset]


def _emptied(job: CleanJob, cleaned: Sequence[SegmentInfo], retained: Sequence[AbortedTxn]) -> tuple[AbortedTxn, ...]:
    """The aborted transactions whose markers lie in the `cleaned` segments and that the clean did not retain."""
    last = job.infos.index(cleaned[-1])
    end = job.infos[last + 1].base_offset if last + 1 < len(job.infos) else job.first_uncleanable_offset
    kept = set(retained)
    return tuple(txn for txn in job.aborted_txns
                 if cleaned[0].base_offset <= txn.last_offset < end and txn not in kept)
