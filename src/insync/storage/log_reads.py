"""Lookups across a log's segments, in offset order: the batch holding an offset, the first record at or after a
timestamp, the record with the largest timestamp, and what the cleaner's planning needs of each segment.

Each takes the segment list (and the log start offset, below which a first segment's records are gone) and reads
through the segments' indexes and files; the log wraps them, so that an I/O error fails the read with
KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from insync.protocol.records import BatchHeader
from insync.storage.cleaner_plan import SegmentInfo
from insync.storage.segment import LogSegment, TimestampAndOffset


def find_batch(segments: Sequence[LogSegment], offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
    """The segment, position and header of the first batch ending at or after `offset` (in the log)."""
    assert segments, "a log has at least its active segment"
    index = bisect.bisect_right(segments, offset, key=_base_offset) - 1
    for segment in segments[index:]:
        found = segment.find_batch(offset)
        if found is not None:
            return segment, found[0], found[1]
    return None


def offset_for_timestamp(segments: Sequence[LogSegment], log_start_offset: int,
                         timestamp: int) -> TimestampAndOffset | None:
    """ListOffsets by time: the first record at or after the log start timestamped >= `timestamp` (or None)."""
    for segment in segments:
        if segment.max_timestamp < timestamp or segment.next_offset <= log_start_offset:
            continue
        start = max(segment.time_index.lookup_before(timestamp), log_start_offset)
        found = segment.first_record(start, lambda ts: ts >= timestamp)
        if found is not None:
            return found
    return None


def max_timestamp_and_offset(segments: Sequence[LogSegment], log_start_offset: int) -> TimestampAndOffset | None:
    """ListOffsets MAX_TIMESTAMP (KIP-734): the first record carrying the largest timestamp of the log (Kafka's
    `UnifiedLog.fetchOffsetByTimestamp`: the first segment with the largest, its first batch with it, that
    batch's first record with it); None when the log has no timestamped record past its start."""
    live = [s for s in segments if s.next_offset > log_start_offset and s.max_timestamp >= 0]
    if not live:
        return None
    segment = max(live, key=lambda s: s.max_timestamp)  # the first of equals, as Kafka's maxBy
    largest = segment.max_timestamp
    return segment.first_record(max(segment.offset_of_max_timestamp, log_start_offset), lambda ts: ts == largest)


def segment_infos(segments: Sequence[LogSegment], first_batch_timestamps: bool) -> tuple[SegmentInfo, ...]:
    """What the cleaner's planning needs of each segment (the first batch's timestamp costs a read, so only
    when `max.compaction.lag.ms` is set)."""
    return tuple(SegmentInfo(s.base_offset, s.size, s.max_timestamp,
                             _first_batch_timestamp(s) if first_batch_timestamps else -1,
                             len(s.offset_index), len(s.time_index)) for s in segments)


def _first_batch_timestamp(segment: LogSegment) -> int:
    found = segment.find_batch(segment.base_offset) if segment.size else None
    return -1 if found is None else found[1].max_timestamp


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset
