"""Log: appends as leader and follower, reads (KIP-74, bounds), truncation, DeleteRecords, rolls, flush."""

from __future__ import annotations

import pytest
from storage_helpers import DIR, bases, batch, open_log

from insync import errors
from insync.clock import ManualClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.protocol.records import build_batch, iter_batches
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log


def test_leader_append_assigns_offsets_and_stamps_epoch() -> None:
    log = open_log()
    produced = batch(3)
    first = log.append_as_leader(produced, leader_epoch=4)
    second = log.append_as_leader(batch(2), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.record_count, first.batch_count) == (0, 2, 3, 1)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert first.size_bytes == len(produced) and first.max_timestamp == 1_700_000_000_000
    assert log.log_end_offset == 5
    assert produced == batch(3)  # the caller's bytes are not stamped
    result = log.read(0, 10_000)
    headers = [h for _, h in iter_batches(result.records)]  # CRC still valid after stamping
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4)]
    assert log.leader_epoch_cache.epoch_entries == [(4, 0)]
    log.append_as_leader(batch(1), leader_epoch=6)
    assert log.latest_epoch() == 6 and log.leader_epoch_cache.epoch_entries == [(4, 0), (6, 5)]
    assert log.end_offset_for_epoch(4) == (4, 5) and log.end_offset_for_epoch(6) == (6, 6)


def test_leader_append_is_all_or_nothing() -> None:
    log = open_log(max_message_bytes=200)
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(KafkaException) as info:
        log.append_as_leader(bytes(corrupt), leader_epoch=0)
    assert info.value.error == errors.CORRUPT_MESSAGE
    with pytest.raises(KafkaException) as info:
        log.append_as_leader(batch(5, value_bytes=100), leader_epoch=0)
    assert info.value.error == errors.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_read_returns_whole_batches_within_bounds() -> None:
    log = open_log()
    for _ in range(4):
        log.append_as_leader(batch(3), leader_epoch=0)
    size = len(batch(3))
    two = log.read(0, 2 * size + 10)
    assert bases(two.records) == [0, 3] and two.next_offset == 6
    assert (two.log_start_offset, two.log_end_offset) == (0, 12)
    middle = log.read(4, 10_000)  # inside a batch: that whole batch first
    assert middle.first_offset == 3 and bases(middle.records) == [3, 6, 9]
    up_to_hw = log.read(0, 10_000, max_offset=6)  # exclusive bound on base offsets
    assert bases(up_to_hw.records) == [0, 3]
    assert log.read(6, 10_000, max_offset=6).records == b""
    oversize = log.read(3, 10)  # KIP-74: one batch even when larger than max_bytes
    assert bases(oversize.records) == [3] and oversize.next_offset == 6
    strict = log.read(3, 10, min_one_batch=False)
    assert strict.records == b"" and (strict.first_offset, strict.next_offset) == (3, 3)
    at_end = log.read(12, 100)
    assert at_end.records == b"" and at_end.next_offset == 12
    for offset in (-1, 13):
        with pytest.raises(KafkaException) as info:
            log.read(offset, 100)
        assert info.value.error == errors.OFFSET_OUT_OF_RANGE


def test_sequential_reads_with_sparse_index() -> None:
    log = open_log(index_interval_bytes=300)
    for i in range(30):
        log.append_as_leader(batch(1 + i % 3), leader_epoch=0)
    offset, seen = 0, []
    for _ in range(100):
        if offset == log.log_end_offset:
            break
        result = log.read(offset, 250)
        seen += bases(result.records)
        offset = result.next_offset
    assert offset == log.log_end_offset and seen == sorted(set(seen)) and len(seen) == 30
    # Random access agrees with sequential access.
    for target in range(log.log_end_offset):
        result = log.read(target, 1)
        header = next(h for _, h in iter_batches(result.records))
        assert header.base_offset <= target <= header.last_offset


def test_follower_append_keeps_leader_offsets_and_rejects_overlaps() -> None:
    log = open_log()
    leader_data = build_batch([(b"a", b"1"), (b"b", b"2")], base_offset=0, partition_leader_epoch=3) + \
        build_batch([(b"c", b"3")], base_offset=2, partition_leader_epoch=5)
    info = log.append_as_follower(leader_data)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 2, 2)
    assert log.leader_epoch_cache.epoch_entries == [(3, 0), (5, 2)]
    assert log.read(0, 10_000).records == leader_data
    with pytest.raises(KafkaException, match="overlap") as info_exc:
        log.append_as_follower(build_batch([(b"x", b"y")], base_offset=1, partition_leader_epoch=5))
    assert info_exc.value.error == errors.OFFSET_OUT_OF_RANGE
    torn = build_batch([(b"d", b"4")], base_offset=3)[:-2]
    with pytest.raises(KafkaException) as info_exc:
        log.append_as_follower(torn)
    assert info_exc.value.error == errors.CORRUPT_MESSAGE
    assert log.log_end_offset == 3
    # A gap is what the leader's cleaner removed: kept, as Kafka keeps it.
    log.append_as_follower(build_batch([(b"x", b"y")], base_offset=5, partition_leader_epoch=5))
    assert (log.log_end_offset, [h.base_offset for _, h in iter_batches(log.read(3, 10_000).records)]) == (6, [5])


def test_segments_roll_by_size_and_time() -> None:
    clock = ManualClock()
    disk = MemoryDisk()
    size = len(batch(2))
    log = open_log(disk, clock, segment_bytes=3 * size, segment_ms=60_000)
    for _ in range(7):
        log.append_as_leader(batch(2), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert "00000000000000000006.log" in disk.listdir(DIR)
    clock.advance(60_001)
    log.append_as_leader(batch(2), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 14]
    assert bases(log.read(6, 10 * size).records) == [6, 8, 10]  # a read stays within one segment


def test_truncate_to_drops_tail_segments_and_epochs() -> None:
    log = open_log(segment_bytes=2 * len(batch(2)))
    for epoch in range(6):
        log.append_as_leader(batch(2), leader_epoch=epoch)
    log.truncate_to(5)  # inside batch [4, 5]: the whole batch goes
    assert log.log_end_offset == 4 and [s.base_offset for s in log.segments] == [0, 4]
    assert log.leader_epoch_cache.latest_epoch == 1
    log.truncate_to(100)  # past the end: nothing
    assert log.log_end_offset == 4
    log.append_as_leader(batch(1), leader_epoch=9)
    assert bases(log.read(0, 10_000).records) == [0, 2] and bases(log.read(4, 10_000).records) == [4]
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch()) == (50, 50, None)
    assert [s.base_offset for s in log.segments] == [50]
    log.append_as_follower(build_batch([(b"k", b"v")], base_offset=50, partition_leader_epoch=10))
    assert log.log_end_offset == 51


def test_delete_records_moves_log_start_and_deletes_segments() -> None:
    log = open_log(segment_bytes=2 * len(batch(2)))
    for epoch in range(6):
        log.append_as_leader(batch(2), leader_epoch=epoch)
    assert log.delete_records_before(5) == 5
    assert [s.base_offset for s in log.segments] == [4, 8]
    assert log.leader_epoch_cache.epoch_entries[0] == (2, 5)
    with pytest.raises(KafkaException):
        log.read(4, 100)
    assert bases(log.read(5, 100).records) == [4]  # the batch holding the start offset
    assert log.delete_records_before(3) == 5  # never back
    with pytest.raises(KafkaException) as info:
        log.delete_records_before(13)
    assert info.value.error == errors.OFFSET_OUT_OF_RANGE
    assert log.delete_records_before(12) == 12 and log.log_end_offset == 12


def test_flush_by_message_count_advances_recovery_point() -> None:
    disk = MemoryDisk()
    log = open_log(disk, flush_interval_messages=5)
    log.append_as_leader(batch(3), leader_epoch=0)
    assert log.recovery_point == 0 and disk.unflushed_bytes(log.active_segment.log_path) > 0
    log.append_as_leader(batch(3), leader_epoch=0)
    assert log.recovery_point == 6 and disk.unflushed_bytes(log.active_segment.log_path) == 0


def test_flush_sealed_fsyncs_rolled_segments_and_moves_the_recovery_point() -> None:
    """Kafka flushes a segment when it rolls: after `flush_sealed` the sealed segments are durable and the
    recovery point is the active segment's base, so a crash re-checks only the active segment."""
    disk = MemoryDisk()
    log = open_log(disk, segment_bytes=400)
    for _ in range(12):
        log.maybe_roll(len(batch(3)))
        log.append_as_leader(batch(3), leader_epoch=0)
    sealed, active = log.segments[:-1], log.active_segment
    assert len(sealed) >= 2 and log.recovery_point == 0
    assert all(disk.unflushed_bytes(s.log_path) > 0 for s in sealed)
    log.flush_sealed()
    assert log.recovery_point == active.base_offset
    assert all(disk.unflushed_bytes(s.log_path) == 0 for s in sealed)
    assert disk.unflushed_bytes(active.log_path) > 0  # the active segment waits for its own flush
    log.flush_sealed()  # nothing new rolled: no-op
    assert log.recovery_point == active.base_offset
    point = log.recovery_point
    disk.crash()  # the active segment's records were never fsynced: they go, the sealed ones stay
    recovered = Log.open(DIR, LogConfig(segment_bytes=400), disk, clock=ManualClock(), recovery_point=point)
    assert recovered.log_end_offset == point and recovered.read(0, 100_000).records


def test_flush_by_time() -> None:
    clock = ManualClock()
    log = open_log(clock=clock, flush_interval_ms=1000)
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 0
    clock.advance(1000)
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 2


def test_read_reports_slow_disk_latency() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    log.append_as_leader(batch(1), leader_epoch=0)
    disk.set_slow_reads(DIR, 250)
    assert log.read(0, 100).read_latency_ms == 250


def test_write_error_takes_the_log_offline_until_reopened() -> None:
    disk = MemoryDisk()
    log = open_log(disk, index_interval_bytes=0)
    log.append_as_leader(batch(2), leader_epoch=0)
    disk.set_io_error(f"{DIR}/00000000000000000000.index", on_read=False, on_write=True)
    with pytest.raises(KafkaException) as info:
        log.append_as_leader(batch(2, value_bytes=5000), leader_epoch=1)  # data written, index entry fails
    assert info.value.error == errors.KAFKA_STORAGE_ERROR and log.offline
    with pytest.raises(KafkaException) as info:
        log.read(0, 100)
    assert info.value.error == errors.KAFKA_STORAGE_ERROR
    disk.clear_faults()
    again = open_log(disk)  # recovery rebuilds the index the error left short
    assert again.log_end_offset == 4 and bases(again.read(0, 100_000).records) == [0, 2]
    assert again.append_as_leader(batch(1), leader_epoch=2).first_offset == 4


def test_read_error_fails_only_that_read() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    log.append_as_leader(batch(2), leader_epoch=0)
    disk.set_io_error(DIR, on_read=True, on_write=False)
    with pytest.raises(KafkaException) as info:
        log.read(0, 100)
    assert info.value.error == errors.KAFKA_STORAGE_ERROR and not log.offline
    disk.clear_faults()
    assert bases(log.read(0, 100).records) == [0]


def test_a_compacted_log_refuses_records_without_a_key_in_kafkas_words() -> None:
    log = Log.open(DIR, LogConfig(cleanup_policy=("compact",)), MemoryDisk(), clock=ManualClock())
    log.append_as_leader(build_batch([(b"k", b"v"), (b"k", None)]), leader_epoch=0)  # a tombstone has a key
    with pytest.raises(KafkaException) as refused:
        log.append_as_leader(build_batch([(b"k", b"v"), (None, b"v")]), leader_epoch=0)
    assert refused.value.error is errors.BY_NAME["INVALID_RECORD"]
    why = "Compacted topic cannot accept message without key in topic partition t-0"
    assert refused.value.record_errors == ((1, why),)  # type: ignore[attr-defined]
    assert refused.value.detail == ("One or more records have been rejected due to 1 record errors in total, and only "
                                    f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}')]")
    assert log.log_end_offset == 2


def test_compact_alone_keeps_segments_past_retention() -> None:
    clock = ManualClock()
    log = Log.open(DIR, LogConfig(cleanup_policy=("compact",), retention_ms=10), MemoryDisk(), clock=clock)
    log.append_as_leader(batch(1), leader_epoch=0)
    log.roll()
    log.append_as_leader(batch(1), leader_epoch=0)
    clock.advance(10_000_000_000_000)
    assert log.apply_retention(clock.now_ms(), high_watermark=2) == 0
    log.config = LogConfig(cleanup_policy=("compact", "delete"), retention_ms=10)
    assert log.apply_retention(clock.now_ms(), high_watermark=1) == 1  # the active one holds an uncommitted record
    assert log.apply_retention(clock.now_ms(), high_watermark=2) == 1  # then it goes too
