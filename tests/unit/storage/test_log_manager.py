"""LogManager: partition directories, the three root checkpoints, safe defaults for damaged ones."""

from __future__ import annotations

import logging

import pytest
from storage_helpers import batch

from insync.clock import ManualClock
from insync.config import BrokerConfig, LogConfig
from insync.storage.checkpoint import CheckpointError
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager, tp_of
from insync.types import TopicPartition

ROOT = "/kafka-logs"
T0, T1 = TopicPartition("orders", 0), TopicPartition("my-topic", 3)


def filled_manager(disk: MemoryDisk) -> LogManager:
    manager = LogManager.open(ROOT, LogConfig(segment_bytes=2 * len(batch(2))), disk, ManualClock())
    for tp in (T0, T1):
        log = manager.get_or_create(tp)
        for _ in range(3):
            log.append_as_leader(batch(2), leader_epoch=1)
    return manager


def test_partition_directory_names() -> None:
    assert tp_of("my-topic-3") == T1 and tp_of("a.b_c-0") == TopicPartition("a.b_c", 0)
    assert tp_of("replication-offset-checkpoint") is None and tp_of("events.jsonl") is None


def test_close_and_reopen_restores_every_log_from_checkpoints() -> None:
    disk = MemoryDisk()
    manager = filled_manager(disk)
    manager.get_or_create(T0).delete_records_before(3)
    manager.close()
    assert disk.read_file(f"{ROOT}/recovery-point-offset-checkpoint") == b"0\n2\nmy-topic 3 6\norders 0 6\n"
    assert disk.read_file(f"{ROOT}/log-start-offset-checkpoint") == b"0\n2\nmy-topic 3 0\norders 0 3\n"
    again = LogManager.open(ROOT, BrokerConfig({"log.segment.bytes": 1000}), disk, ManualClock())
    assert set(again.all_logs()) == {T0, T1}
    log = again.get(T0)
    assert log is not None and (log.log_start_offset, log.log_end_offset, log.recovery_point) == (3, 6, 6)
    assert again.get(TopicPartition("nope", 0)) is None


def test_checkpoint_flushes_rolled_segments_and_records_their_end_as_recovery_point() -> None:
    disk = MemoryDisk()
    manager = filled_manager(disk)
    actives = {tp: log.active_segment.base_offset for tp, log in manager.all_logs().items()}
    assert all(base > 0 for base in actives.values())  # both logs rolled
    manager.checkpoint_recovery_points_and_log_starts()
    assert {tp: log.recovery_point for tp, log in manager.all_logs().items()} == actives
    assert disk.read_file(f"{ROOT}/recovery-point-offset-checkpoint") == (
        f"0\n2\nmy-topic 3 {actives[T1]}\norders 0 {actives[T0]}\n".encode())


def test_high_watermark_checkpoint_round_trip_and_strict_read() -> None:
    disk = MemoryDisk()
    manager = filled_manager(disk)
    assert manager.read_high_watermarks() == {}
    manager.checkpoint_high_watermarks({T0: 4, T1: 6, TopicPartition("gone", 0): 9})
    assert manager.read_high_watermarks() == {T0: 4, T1: 6}
    disk.write_file(f"{ROOT}/replication-offset-checkpoint", b"0\n2\norders 0 4\n")
    with pytest.raises(CheckpointError, match="replication-offset-checkpoint: line 4"):
        manager.read_high_watermarks()


def test_an_unchanged_checkpoint_is_not_written_again() -> None:
    """An idle broker's checkpoints: the same lines are not rewritten (and fsynced) every interval; a change is."""
    disk = MemoryDisk()
    manager = filled_manager(disk)
    path = f"{ROOT}/replication-offset-checkpoint"
    manager.checkpoint_high_watermarks({T0: 4, T1: 6})
    disk.write_file(path, b"0\n1\norders 0 1\n")  # a stand-in, so that a second write would show
    manager.checkpoint_high_watermarks({T0: 4, T1: 6})
    assert manager.read_high_watermarks() == {T0: 1}
    manager.checkpoint_high_watermarks({T0: 5, T1: 6})
    assert manager.read_high_watermarks() == {T0: 5, T1: 6}


def test_garbled_recovery_and_log_start_checkpoints_fall_back_safely(caplog: pytest.LogCaptureFixture) -> None:
    disk = MemoryDisk()
    manager = filled_manager(disk)
    manager.get_or_create(T0).delete_records_before(1)
    manager.close()
    disk.write_file(f"{ROOT}/recovery-point-offset-checkpoint", b"0\n2\norders 0 zz\n")
    disk.write_file(f"{ROOT}/log-start-offset-checkpoint", b"0\n")
    with caplog.at_level(logging.WARNING, logger="insync.storage"):
        again = LogManager.open(ROOT, LogConfig(), disk, ManualClock())
    log = again.get(T0)
    assert log is not None and log.recovery_point == 0 and log.log_start_offset == 0 and log.log_end_offset == 6
    assert "recovering every log in full" in caplog.text and "first segment" in caplog.text


def test_delete_and_retention() -> None:
    disk = MemoryDisk()
    manager = filled_manager(disk)
    manager.delete(T1)
    assert manager.get(T1) is None and "my-topic-3" not in disk.listdir(ROOT)
    manager.get_or_create(T0, LogConfig(segment_bytes=2 * len(batch(2)), retention_bytes=0, retention_ms=-1))
    assert manager.apply_retention({}) == 0  # a log without a high watermark keeps everything
    assert manager.apply_retention({T0: 4}) == 1  # segment [0, 4); the active [4, 6) is not all committed
    assert manager.apply_retention({T0: 6}) == 1  # then it is: retention.bytes=0 deletes it too, as Kafka does
    log = manager.get(T0)
    assert log is not None and log.log_start_offset == 6


class WallAhead(ManualClock):
    """A clock whose wall time was stepped `ahead_ms` past its monotonic time."""

    def __init__(self, ahead_ms: int) -> None:
        super().__init__()
        self.ahead_ms = ahead_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.ahead_ms


def test_retention_compares_record_timestamps_with_the_wall_clock() -> None:
    start_ms = ManualClock().now_ms()
    clock = WallAhead(0)
    manager = LogManager.open(ROOT, LogConfig(segment_bytes=2 * len(batch(2)), retention_ms=10_000), MemoryDisk(),
                              clock)
    log = manager.get_or_create(T0)
    for i in range(3):
        log.append_as_leader(batch(2, timestamp=start_ms + i), leader_epoch=0)
    assert manager.apply_retention({T0: log.log_end_offset}) == 0
    clock.ahead_ms = 10_002  # the wall clock, not the monotonic one, says the oldest records are past retention.ms
    assert manager.apply_retention({T0: log.log_end_offset}) == 1
