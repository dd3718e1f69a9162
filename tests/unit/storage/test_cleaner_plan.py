"""The cleaner's planning on segment summaries: dirty and uncleanable offsets, the ratio, the lags, grouping."""

from __future__ import annotations

from insync.storage.cleaner_plan import (
    SegmentInfo,
    cleanable_offsets,
    group_segments_by_size,
    is_cleanable,
    log_to_clean,
    max_compaction_delay_ms,
)
from insync.types import TopicPartition

TP = TopicPartition("t", 0)


def seg(base: int, size: int = 100, max_ts: int = 0, first_ts: int = 0, entries: int = 1) -> SegmentInfo:
    return SegmentInfo(base, size, max_ts, first_ts, entries, entries)


SEGMENTS = [seg(0, max_ts=1000), seg(10, max_ts=2000), seg(20, max_ts=3000), seg(30, size=50, max_ts=4000)]


def test_the_first_uncleanable_offset_is_the_least_bound() -> None:
    # The active segment (base 30) bounds it; so does the stable offset below it.
    assert cleanable_offsets(SEGMENTS, 0, 35, None, 35, 10_000, 0).first_uncleanable_offset == 30
    assert cleanable_offsets(SEGMENTS, 0, 35, None, 15, 10_000, 0).first_uncleanable_offset == 15
    # min.compaction.lag.ms: the first dirty segment holding a record younger than the lag.
    assert cleanable_offsets(SEGMENTS, 0, 35, None, 35, 4_500, 2_000).first_uncleanable_offset == 20


def test_a_checkpoint_outside_the_log_restarts_at_its_start() -> None:
    offsets = cleanable_offsets(SEGMENTS, 5, 35, 99, 35, 0, 0)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (5, True)
    offsets = cleanable_offsets(SEGMENTS, 5, 35, 12, 35, 0, 0)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (12, False)


def test_the_cleanable_ratio_counts_whole_segments() -> None:
    candidate = log_to_clean(TP, SEGMENTS, cleanable_offsets(SEGMENTS, 0, 35, 10, 35, 0, 0), False)
    assert (candidate.clean_bytes, candidate.cleanable_bytes, candidate.first_uncleanable_offset) == (100, 200, 30)
    assert is_cleanable(candidate, 0.5) and not is_cleanable(candidate, 0.7)


def test_max_compaction_lag_counts_from_the_oldest_dirty_first_batch() -> None:
    segments = [seg(0, first_ts=1000), seg(10, first_ts=500), seg(20, first_ts=0), seg(30)]
    assert max_compaction_delay_ms(segments, 0, now_ms=3000, max_compaction_lag_ms=1000) == 1500
    assert max_compaction_delay_ms(segments, 0, now_ms=1400, max_compaction_lag_ms=1000) == 0


def test_groups_fit_one_segment_in_data_and_indexes() -> None:
    segments = [seg(0, 60), seg(10, 30), seg(20, 50), seg(30, 10, entries=5), seg(40, 0)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segments, 100, 1000, 50)] == [
        [0, 10], [20, 30, 40]]
    # Segment 30's five index entries alone pass a 40-byte index: it stays on its own.
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segments, 100, 40, 50)] == [
        [0, 10], [20], [30], [40]]
