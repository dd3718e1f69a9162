"""Opening a log recovers it: torn and corrupt tails are cut and logged, indexes and epochs are rebuilt."""

from __future__ import annotations

import logging

import pytest
from storage_helpers import DIR, bases, batch, open_log

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log

SEG0 = f"{DIR}/00000000000000000000.log"


def test_clean_reopen_trusts_everything_and_keeps_state() -> None:
    disk = MemoryDisk()
    clock = ManualClock()
    log = open_log(disk, clock, segment_bytes=2 * len(batch(2)), index_interval_bytes=10)
    for epoch in range(5):
        log.append_as_leader(batch(2, timestamp=1000 + epoch), leader_epoch=epoch)
    log.close()
    again = Log.open(DIR, log.config, disk, clock=clock, recovery_point=log.recovery_point)
    assert again.log_end_offset == 10 and again.recovery_point == 10
    assert again.leader_epoch_cache.epoch_entries == log.leader_epoch_cache.epoch_entries
    assert [s.max_timestamp for s in again.segments] == [s.max_timestamp for s in log.segments]
    assert again.read(0, 10_000).records == log.read(0, 10_000).records
    assert again.offset_for_timestamp(1003).offset == 6


def test_torn_tail_is_truncated_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    for _ in range(3):
        log.append_as_leader(batch(2), leader_epoch=0)
    disk.truncate(SEG0, disk.size(SEG0) - 7)  # the last batch lost its end
    with caplog.at_level(logging.WARNING, logger="insync.storage"):
        again = open_log(disk)
    assert again.log_end_offset == 4
    assert f"Truncated {len(batch(2)) - 7} bytes of corrupt tail in {SEG0}" in caplog.text
    assert disk.size(SEG0) == 2 * len(batch(2))
    again.append_as_leader(batch(1), leader_epoch=0)
    assert bases(again.read(0, 10_000).records) == [0, 2, 4]


def test_corrupt_batch_cuts_the_rest_of_the_log(caplog: pytest.LogCaptureFixture) -> None:
    disk = MemoryDisk()
    size = len(batch(2))
    log = open_log(disk, segment_bytes=2 * size)
    for _ in range(6):
        log.append_as_leader(batch(2), leader_epoch=0)
    assert len(log.segments) == 3
    data = bytearray(disk.read_file(SEG0))
    data[size + 40] ^= 0x01  # flip a bit inside the CRC range of the second batch
    disk.write_file(SEG0, bytes(data))
    with caplog.at_level(logging.WARNING, logger="insync.storage"):
        again = open_log(disk)
    assert again.log_end_offset == 2 and [s.base_offset for s in again.segments] == [0]
    assert "CRC mismatch" in caplog.text and "00000000000000000004.log" not in disk.listdir(DIR)


def test_trusted_segment_with_damaged_index_is_rebuilt() -> None:
    disk = MemoryDisk()
    log = open_log(disk, segment_bytes=4 * len(batch(2)), index_interval_bytes=10)
    for _ in range(8):
        log.append_as_leader(batch(2), leader_epoch=0)
    log.close()
    index_path = f"{DIR}/00000000000000000000.index"
    expected = disk.read_file(index_path)
    disk.write_file(index_path, b"\x00\x01\x02")
    again = Log.open(DIR, log.config, disk, clock=ManualClock(), recovery_point=log.recovery_point)
    assert disk.read_file(index_path) == expected
    assert bases(again.read(2, 10_000).records) == [2, 4, 6]


def test_garbled_leader_epoch_checkpoint_is_rebuilt_from_batches(caplog: pytest.LogCaptureFixture) -> None:
    disk = MemoryDisk()
    log = open_log(disk, segment_bytes=2 * len(batch(2)))
    for epoch in (1, 1, 4, 4, 7):
        log.append_as_leader(batch(2), leader_epoch=epoch)
    log.close()
    disk.write_file(f"{DIR}/leader-epoch-checkpoint", b"0\n3\n1 0\n")
    with caplog.at_level(logging.WARNING, logger="insync.storage"):
        again = Log.open(DIR, log.config, disk, clock=ManualClock(), recovery_point=log.recovery_point)
    assert again.leader_epoch_cache.epoch_entries == [(1, 0), (4, 4), (7, 8)]
    assert "leader-epoch-checkpoint: line 4" in caplog.text


def test_stale_files_are_cleaned_and_missing_log_starts_empty() -> None:
    disk = MemoryDisk()
    disk.mkdir(DIR)
    disk.write_file(f"{DIR}/leader-epoch-checkpoint.tmp", b"junk")
    disk.write_file(f"{DIR}/00000000000000000042.index", b"")
    log = Log.open(DIR, LogConfig(), disk, clock=ManualClock(), log_start_offset=7)
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert disk.listdir(DIR) == ["00000000000000000007.index", "00000000000000000007.log",
                                 "00000000000000000007.timeindex"]


def test_log_start_checkpoint_past_the_end_restarts_the_log() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    log.append_as_leader(batch(2), leader_epoch=0)
    log.close()
    again = Log.open(DIR, LogConfig(), disk, clock=ManualClock(), log_start_offset=10)
    assert (again.log_start_offset, again.log_end_offset) == (10, 10)


def test_missing_leader_epoch_checkpoint_is_rebuilt_from_batches() -> None:
    disk = MemoryDisk()
    log = open_log(disk, segment_bytes=2 * len(batch(2)))
    for epoch in (2, 2, 5):
        log.append_as_leader(batch(2), leader_epoch=epoch)
    log.delete_records_before(3)
    log.close()
    disk.remove(f"{DIR}/leader-epoch-checkpoint")
    again = Log.open(DIR, log.config, disk, clock=ManualClock(), recovery_point=log.recovery_point,
                     log_start_offset=3)
    assert again.leader_epoch_cache.epoch_entries == [(2, 3), (5, 4)]
    assert again.end_offset_for_epoch(2) == (2, 4)
