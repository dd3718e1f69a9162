"""The segment rules on their own: when the active segment rolls (size, age, relative offsets, never when empty)
and how many of the oldest segments retention would delete, counted without touching the log."""

from __future__ import annotations

from storage_helpers import batch, open_log

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.storage.index import RELATIVE_OFFSET_MAX
from insync.storage.segment_policy import retention_deletable, should_roll

T0 = 1_700_000_000_000


def test_an_empty_segment_never_rolls_and_a_full_or_old_one_does() -> None:
    clock = ManualClock()
    size = len(batch(2))
    log = open_log(clock=clock, segment_bytes=2 * size, segment_ms=1_000)
    config = LogConfig(segment_bytes=2 * size, segment_ms=1_000)
    now = clock.now_ms()
    assert not should_roll(log.active_segment, config, now + 10**6, 10 * size, None)
    log.append_as_leader(batch(2), leader_epoch=0)
    assert not should_roll(log.active_segment, config, now, size, None)
    assert should_roll(log.active_segment, config, now, size + 1, None)  # past segment.bytes
    assert should_roll(log.active_segment, config, now + 1_001, 0, None)  # older than segment.ms
    assert should_roll(log.active_segment, config, now, 0, RELATIVE_OFFSET_MAX + 1)  # not indexable from its base


def test_retention_counts_the_expired_segments_below_the_high_watermark_and_changes_nothing() -> None:
    log = open_log(segment_bytes=2 * len(batch(2)), retention_ms=10_000)
    for i in range(6):  # segments [0,4) at T0+0/1, [4,8) at T0+2/3, [8,12) at T0+20004/20005
        log.append_as_leader(batch(2, timestamp=T0 + (i if i < 4 else 20_000 + i)), leader_epoch=0)
    config = log.config
    assert retention_deletable(log.segments, config, T0 + 10_004, log.log_end_offset) == 2
    assert retention_deletable(log.segments, config, T0 + 10_004, 7) == 1  # [4,8) holds offsets at the HW
    assert retention_deletable(log.segments, config, T0 + 10**9, log.log_end_offset) == 3  # the active one too
    assert [s.base_offset for s in log.segments] == [0, 4, 8] and log.log_start_offset == 0


def test_retention_by_bytes_counts_what_leaves_the_newest_within_the_limit() -> None:
    size = len(batch(2))
    log = open_log(segment_bytes=2 * size, retention_bytes=3 * size, retention_ms=-1)
    for _ in range(7):
        log.append_as_leader(batch(2), leader_epoch=0)
    assert retention_deletable(log.segments, log.config, T0, log.log_end_offset) == 2
    assert retention_deletable(log.segments, log.config, T0, 0) == 0  # nothing replicated: nothing goes
