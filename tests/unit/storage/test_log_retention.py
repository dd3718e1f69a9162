"""Retention by time and bytes (whole segments, the active one once replicated) and ListOffsets by timestamp."""

from __future__ import annotations

from storage_helpers import batch, open_log

from insync.clock import ManualClock

T0 = 1_700_000_000_000


def test_retention_by_time_deletes_old_segments_only() -> None:
    log = open_log(segment_bytes=2 * len(batch(2)), retention_ms=10_000)
    for i in range(6):  # segments [0,4) at T0+0/1, [4,8) at T0+2/3, [8,12) at T0+20000/20001
        log.append_as_leader(batch(2, timestamp=T0 + (i if i < 4 else 20_000 + i)), leader_epoch=i)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert log.apply_retention(T0 + 10_001, log.log_end_offset) == 0  # the newest record of segment 0 is exactly 10000 ms old
    assert log.apply_retention(T0 + 10_004, log.log_end_offset) == 2
    assert [s.base_offset for s in log.segments] == [8] and log.log_start_offset == 8
    assert log.leader_epoch_cache.epoch_entries == [(4, 8), (5, 10)]
    assert log.apply_retention(T0 + 10**9, log.log_end_offset - 1) == 0  # not all of it replicated: it stays


def test_an_expired_active_segment_goes_once_replicated_and_a_new_one_takes_its_place() -> None:
    """Kafka's deletableSegments: the active segment is deletable when its records are past retention and the
    high watermark is at the log end; a new empty segment is rolled first, and an empty one never goes."""
    log = open_log(retention_ms=10_000)
    for i in range(3):
        log.append_as_leader(batch(2, timestamp=T0 + i), leader_epoch=3)
    assert [s.base_offset for s in log.segments] == [0]
    assert log.apply_retention(T0 + 20_000, log.log_end_offset) == 1
    assert [(s.base_offset, s.size) for s in log.segments] == [(6, 0)]
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)
    assert log.leader_epoch_cache.epoch_entries == [(3, 6)]
    assert log.apply_retention(T0 + 10**9, log.log_end_offset) == 0  # an empty active segment stays
    log.append_as_leader(batch(1, timestamp=T0 + 10**9), leader_epoch=3)
    assert (log.segments[0].base_offset, log.log_end_offset) == (6, 7)


def test_retention_by_bytes_keeps_the_newest_segments() -> None:
    size = len(batch(2))
    log = open_log(segment_bytes=2 * size, retention_bytes=3 * size, retention_ms=-1)
    for _ in range(7):
        log.append_as_leader(batch(2), leader_epoch=0)
    assert [s.size for s in log.segments] == [2 * size, 2 * size, 2 * size, size]
    assert log.apply_retention(T0, log.log_end_offset) == 2  # 7 batches, limit 3: deleting 4 leaves 3
    assert [s.base_offset for s in log.segments] == [8, 12] and log.log_start_offset == 8
    assert log.apply_retention(T0, log.log_end_offset) == 0


def test_offset_for_timestamp_finds_the_first_record_at_or_after() -> None:
    log = open_log(segment_bytes=3 * len(batch(3)), index_interval_bytes=50)
    stamps = [[100, 105, 103], [110, 120, 130], [130, 140, 150], [90, 200, 210]]
    for i in range(8):
        log.append_as_leader(batch(3, timestamps=[t + 1000 * (i // 4) for t in stamps[i % 4]]), leader_epoch=0)
    assert log.offset_for_timestamp(0).offset == 0
    assert log.offset_for_timestamp(104).offset == 1
    assert log.offset_for_timestamp(106).offset == 3
    assert log.offset_for_timestamp(130).offset == 5
    assert log.offset_for_timestamp(131).offset == 7
    assert log.offset_for_timestamp(201).offset == 11
    assert log.offset_for_timestamp(1090).offset == 12
    assert log.offset_for_timestamp(1120).offset == 16
    assert log.offset_for_timestamp(1210).offset == 23
    assert log.offset_for_timestamp(1211) is None
    log.delete_records_before(17)
    assert log.offset_for_timestamp(0).offset == 17


def test_offset_for_timestamp_after_truncation_and_reopen() -> None:
    clock = ManualClock()
    log = open_log(clock=clock, segment_bytes=2 * len(batch(1)))
    for i in range(6):
        log.append_as_leader(batch(1, timestamp=T0 + 10 * i), leader_epoch=0)
    log.truncate_to(3)
    assert log.offset_for_timestamp(T0 + 20).offset == 2 and log.offset_for_timestamp(T0 + 21) is None
    assert log.active_segment.max_timestamp == T0 + 20


def test_retention_never_deletes_at_or_above_the_high_watermark() -> None:
    from insync.config import LogConfig
    from insync.protocol.records import build_batch
    from insync.storage.disk import MemoryDisk
    from insync.storage.log import Log

    log = Log.open("/p/t-0", LogConfig(segment_bytes=200, retention_bytes=0), MemoryDisk())
    for _ in range(6):
        log.append_as_leader(build_batch([(b"k", b"v" * 100)], base_timestamp=1), 0)
    assert len(log.segments) == 6
    assert log.apply_retention(10, high_watermark=2) == 2  # segments [0,1) and [1,2) only
    assert log.log_start_offset == 2
    # All committed: everything, the active one too (retention.bytes=0), as Kafka's size rule deletes it.
    assert log.apply_retention(10, high_watermark=6) == 4
    assert log.log_start_offset == 6 and [s.size for s in log.segments] == [0]


def test_truncate_past_the_end_still_cuts_unused_epochs() -> None:
    from insync.config import LogConfig
    from insync.protocol.records import build_batch
    from insync.storage.disk import MemoryDisk
    from insync.storage.log import Log

    log = Log.open("/p/t-0", LogConfig(), MemoryDisk())
    log.append_as_leader(build_batch([(b"k", b"v")]), 3)
    log.leader_epoch_cache.assign(5, 1)  # became leader at epoch 5, appended nothing
    log.truncate_to(1)
    assert log.latest_epoch() == 3
