"""What the log cleaner cleans next, decided from segment summaries alone (Kafka's LogCleanerManager and
LogToClean): pure functions, no file is read here.

A compacted log is clean below its cleaner checkpoint (`first_dirty_offset`) and dirty above it, up to its first
uncleanable offset: the least of the last stable offset (the high watermark until transactions exist), the active
segment's base, and the base of the first dirty segment holding a record younger than `min.compaction.lag.ms`.
The bytes of the dirty segments below that over the bytes of all segments below it is the cleanable ratio; the
filthiest log whose ratio passes `min.cleanable.dirty.ratio`, or that has held dirty records for longer than
`max.compaction.lag.ms`, is cleaned. A clean rewrites the segments from the log start to where its offset map
ends, grouped so that each group's data and indexes fit one segment (`group_segments_by_size`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync.storage.index import OFFSET_ENTRY, TIME_ENTRY
from insync.types import TopicPartition

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the planning needs of one segment, read on the log's own thread."""

    base_offset: int
    size: int
    max_timestamp: int  # -1 for none
    first_batch_timestamp: int  # the max timestamp of its first batch (Kafka's getFirstBatchTimestamp), -1 for none
    index_entries: int
    time_index_entries: int

    @property
    def index_bytes(self) -> int:
        return self.index_entries * OFFSET_ENTRY.size

    @property
    def time_index_bytes(self) -> int:
        return self.time_index_entries * TIME_ENTRY.size


@dataclass(frozen=True, slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_offset: int  # exclusive
    force_update_checkpoint: bool  # the checkpoint was outside the log: write the corrected one


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A candidate log and its bytes on each side of the first dirty offset (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int  # the base of the segment holding the uncleanable offset
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def segments_between(segments: Sequence[SegmentInfo], start: int, end: int) -> list[SegmentInfo]:
    """The segments holding offsets in [start, end) (Kafka's `logSegments(from, to)`): the one holding `start`
    and every later one whose base is below `end`. The last segment given is taken to reach past `end`."""
    assert list(segments) == sorted(segments, key=lambda s: s.base_offset)
    found = []
    for i, segment in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset < end and (following is None or following > start):
            found.append(segment)
    return found


def cleanable_offsets(segments: Sequence[SegmentInfo], log_start_offset: int, log_end_offset: int,
                      checkpoint: int | None, stable_offset: int, now_ms: int,
                      min_compaction_lag_ms: int) -> OffsetsToClean:
    """Kafka's `LogCleanerManager.cleanableOffsets`: the first dirty offset (the checkpoint, reset to the log start
    when it lies outside the log) and the first uncleanable one. `segments` ends with the active segment."""
    assert segments and log_start_offset <= stable_offset <= log_end_offset, (log_start_offset, stable_offset)
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    force = False
    if not log_start_offset <= first_dirty <= log_end_offset:
        first_dirty, force = log_start_offset, True
    bounds = [stable_offset, segments[-1].base_offset]
    if min_compaction_lag_ms > 0:
        young = [s for s in segments_between(segments, first_dirty, segments[-1].base_offset)
                 if s.max_timestamp > now_ms - min_compaction_lag_ms]
        bounds.extend(s.base_offset for s in young[:1])
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds)), force)


def max_compaction_delay_ms(segments: Sequence[SegmentInfo], first_dirty_offset: int, now_ms: int,
                            max_compaction_lag_ms: int) -> int:
    """How far past `max.compaction.lag.ms` the oldest dirty record is (0 when it is not): Kafka's
    `maxCompactionDelay`, from the first batch timestamp of each dirty segment that is not active."""
    dirty = segments_between(segments, first_dirty_offset, segments[-1].base_offset)
    stamps = [s.first_batch_timestamp for s in dirty if s.first_batch_timestamp > 0]
    clean_until_ms = now_ms - max(max_compaction_lag_ms, 0)
    earliest = min(stamps, default=None)
    return clean_until_ms - earliest if earliest is not None and earliest < clean_until_ms else 0


def log_to_clean(tp: TopicPartition, segments: Sequence[SegmentInfo], offsets: OffsetsToClean,
                 need_compaction_now: bool) -> LogToClean:
    """Kafka's LogToClean with `calculateCleanableBytes`: the cleanable section ends at the base of the segment
    holding the first uncleanable offset."""
    uncleanable = offsets.first_uncleanable_offset
    holding = segments_between(segments, uncleanable, segments[-1].base_offset)
    first_uncleanable = holding[0].base_offset if holding else segments[-1].base_offset
    first_dirty = offsets.first_dirty_offset
    clean = sum(s.size for s in segments_between(segments, -1, first_dirty))
    cleanable = sum(s.size for s in segments_between(segments, min(first_dirty, first_uncleanable),
                                                     first_uncleanable))
    return LogToClean(tp, first_dirty, first_uncleanable, clean, cleanable, need_compaction_now)


def is_cleanable(candidate: LogToClean, min_cleanable_ratio: float) -> bool:
    """Kafka's filter in `grabFilthiestCompactedLog`."""
    return (candidate.need_compaction_now and candidate.cleanable_bytes > 0) or (
        candidate.cleanable_ratio > min_cleanable_ratio)


def group_segments_by_size(segments: Sequence[SegmentInfo], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentInfo]]:
    """Kafka's `Cleaner.groupSegmentsBySize`: consecutive segments whose data, offset index and time index each
    fit one segment, and whose offsets fit the index's 32-bit relative offsets."""
    groups: list[list[SegmentInfo]] = []
    rest = list(segments)
    for _ in range(len(segments)):
        if not rest:
            break
        group = [rest.pop(0)]
        size, index, time_index = group[0].size, group[0].index_bytes, group[0].time_index_bytes
        while rest and (size + rest[0].size <= max_size and index + rest[0].index_bytes <= max_index_size
                        and time_index + rest[0].time_index_bytes <= max_index_size
                        and (rest[0].size == 0 or _last_offset_of_first(rest, first_uncleanable_offset)
                             - group[0].base_offset <= _INT32_MAX)):
            size, index, time_index = (size + rest[0].size, index + rest[0].index_bytes,
                                       time_index + rest[0].time_index_bytes)
            group.append(rest.pop(0))
        groups.append(group)
    assert sum(len(g) for g in groups) == len(segments)
    return groups


def _last_offset_of_first(rest: Sequence[SegmentInfo], first_uncleanable_offset: int) -> int:
    return rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
