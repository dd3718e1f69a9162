"""A broker's log dirs (JBOD) and moving a replica between them: placement, per-dir checkpoints, the copy that
follows a log while it is written and truncated, the swap, and start-up after a crash at each point of a move."""

from __future__ import annotations

import pytest
from storage_helpers import all_batches, batch

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.storage.log_dir_layout import LogDirLayoutError, delete_name
from insync.storage.log_manager import LogManager
from insync.storage.replica_move import MoveThrottle, caught_up, copy_step
from insync.types import TopicPartition

A, B = "/data/a", "/data/b"
T0, T1, T2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("audit", 0)
CONFIG = LogConfig(segment_bytes=3 * len(batch(2)))


def open_manager(disk: MemoryDisk, clock: ManualClock | None = None) -> LogManager:
    return LogManager.open((A, B), CONFIG, disk, clock or ManualClock())


def fill(log: Log, batches: int, epoch: int = 1) -> None:
    for _ in range(batches):
        log.append_as_leader(batch(2), leader_epoch=epoch)


def step_until_moved(manager: LogManager, clock: ManualClock, steps_max: int = 1000) -> int:
    for step in range(steps_max):
        if not manager.moves.active:
            return step
        clock.advance(10)
        manager.moves.step(clock.monotonic_ms())
    raise AssertionError("the move did not finish")


def test_new_logs_spread_over_the_dirs_and_reopen_from_their_own_checkpoints() -> None:
    disk = MemoryDisk()
    manager = open_manager(disk)
    for tp in (T0, T1, T2):
        fill(manager.get_or_create(tp), 2)
    assert [manager.dir_of(tp) for tp in (T0, T1, T2)] == [A, B, A]
    manager.checkpoint_high_watermarks({T0: 4, T1: 3, T2: 1})
    manager.close()
    assert disk.read_file(f"{B}/recovery-point-offset-checkpoint") == b"0\n1\norders 1 4\n"
    assert disk.read_file(f"{B}/replication-offset-checkpoint") == b"0\n1\norders 1 3\n"
    again = open_manager(disk)
    assert again.read_high_watermarks() == {T0: 4, T1: 3, T2: 1}
    assert {tp: (again.dir_of(tp), log.log_end_offset) for tp, log in again.all_logs().items()} == {
        T0: (A, 4), T1: (B, 4), T2: (A, 4)}


def test_a_dir_that_cannot_be_listed_is_offline_and_new_logs_go_elsewhere() -> None:
    disk = MemoryDisk()
    disk.set_io_error(A, on_read=True, on_write=True)
    manager = open_manager(disk)
    assert manager.offline_dirs == {A} and manager.online_dirs() == (B,)
    manager.get_or_create(T0)
    assert manager.dir_of(T0) == B
    disk.set_io_error(B, on_read=True, on_write=True)
    with pytest.raises(LogDirLayoutError, match="every log dir is offline: /data/a, /data/b"):
        open_manager(disk)


def test_a_move_copies_while_the_log_is_written_then_swaps_in_place() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    manager = open_manager(disk, clock)
    log = manager.get_or_create(T0)
    fill(log, 10)
    before = all_batches(log)
    manager.moves.set_rate(2 * len(batch(2)) * 100)  # two batches a step of 10 ms
    manager.moves.start(T0, B)
    assert manager.moves.future_dir_of(T0) == B and manager.dir_of(T0) == A
    for _ in range(2):  # the throttle starts empty at the first step
        clock.advance(10)
        manager.moves.step(clock.monotonic_ms())
    future = manager.moves.future_logs()[T0]
    assert 0 < future.log_end_offset < log.log_end_offset
    fill(log, 3)  # appends go on while it copies
    step_until_moved(manager, clock)
    assert manager.get(T0) is log and manager.dir_of(T0) == B and log.log_end_offset == 26
    assert all_batches(log)[: len(before)] == before
    assert disk.listdir(A) == sorted(n for n in disk.listdir(A) if not n.startswith("orders"))
    fill(log, 1)  # the moved log takes appends in its new dir
    manager.close()
    again = open_manager(disk, clock)
    moved = again.get(T0)
    assert moved is not None and again.dir_of(T0) == B and moved.log_end_offset == 28 and not again.moves.active


def test_the_copy_follows_a_truncation_by_leader_epoch() -> None:
    disk = MemoryDisk()
    current = Log.open(f"{A}/orders-0", CONFIG, disk, clock=ManualClock())
    future = Log.open(f"{B}/orders-0.{'0' * 32}-future", CONFIG, disk, clock=ManualClock())
    fill(current, 4, epoch=1)
    copy_step(current, future, 1 << 20)
    assert caught_up(current, future)
    current.truncate_to(4)  # a new leader's log diverged at offset 4
    fill(current, 3, epoch=2)
    copy_step(current, future, 1 << 20)
    assert caught_up(current, future) and all_batches(future) == all_batches(current)
    assert future.leader_epoch_cache.epoch_entries == [(1, 0), (2, 4)]
    current.delete_records_before(8)  # and its log start moves up
    copy_step(current, future, 1 << 20)
    assert future.log_start_offset == current.log_start_offset == 8 and caught_up(current, future)


def test_a_crash_mid_copy_keeps_the_current_log_and_resumes_the_move() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    manager = open_manager(disk, clock)
    fill(manager.get_or_create(T0), 10)
    manager.moves.set_rate(len(batch(2)) * 100)
    manager.moves.start(T0, B)
    for _ in range(3):
        clock.advance(10)
        manager.moves.step(clock.monotonic_ms())
    assert 0 < manager.moves.future_logs()[T0].log_end_offset < 20
    manager.get_or_create(T0).flush()
    disk.crash()
    again = open_manager(disk, clock)
    again.get_or_create(T0)
    assert again.dir_of(T0) == A and again.moves.future_dir_of(T0) == B
    step_until_moved(again, clock)
    log = again.get(T0)
    assert log is not None and again.dir_of(T0) == B and log.log_end_offset == 20


def test_a_crash_between_the_swaps_two_renames_serves_the_copy() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    manager = open_manager(disk, clock)
    log = manager.get_or_create(T0)
    fill(log, 5)
    log.flush()
    manager.moves.start(T0, B)
    future = manager.moves.future_logs()[T0]
    copy_step(log, future, 1 << 20)
    future.flush()
    disk.rename_dir(f"{A}/orders-0", f"{A}/{delete_name(T0, 'f' * 32)}")  # the swap's first rename, then a crash
    disk.crash()
    again = open_manager(disk, clock)
    served = again.get(T0)
    assert served is not None and again.dir_of(T0) == B and served.log_end_offset == 10
    assert not again.moves.active and disk.listdir(A) == sorted(n for n in disk.listdir(A) if "orders" not in n)


def test_asking_for_the_dir_the_log_is_in_cancels_a_move_and_deleting_drops_both() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    manager = open_manager(disk, clock)
    fill(manager.get_or_create(T0), 2)
    manager.moves.set_rate(0)  # nothing copies: the move waits
    manager.moves.start(T0, B)
    future_dir = manager.moves.future_logs()[T0].directory
    manager.moves.start(T0, A)
    assert not manager.moves.active and not disk.exists(future_dir)
    manager.moves.start(T0, B)
    manager.moves.step(clock.monotonic_ms())
    manager.delete(T0)
    assert manager.get(T0) is None and not manager.moves.active and "orders" not in " ".join(disk.listdir(B))


def test_the_throttle_allows_its_rate_saves_at_most_a_second_and_is_paid_back() -> None:
    throttle = MoveThrottle(1000, now_ms=0)
    assert throttle.budget(0, 1 << 20) == 0
    assert throttle.budget(100, 1 << 20) == 100
    throttle.spend(300)  # a whole batch over the budget
    assert throttle.budget(200, 1 << 20) == 0
    assert throttle.budget(5000, 1 << 20) == 1000
    assert throttle.budget(6000, 10) == 10
