"""The leader epoch cache answers OffsetsForLeaderEpoch as Kafka does and persists every change, at once or at
the end of an `EpochCheckpoints.batched` block, with a failed file handed to its log."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from insync.storage.disk import MemoryDisk
from insync.storage.leader_epoch import EpochCheckpoints, LeaderEpochCache

PATH = "/d/leader-epoch-checkpoint"


def cache_with(*entries: tuple[int, int]) -> tuple[MemoryDisk, LeaderEpochCache]:
    disk = MemoryDisk()
    disk.mkdir("/d")
    cache = LeaderEpochCache(disk, PATH)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return disk, cache


def test_assign_keeps_increasing_entries_and_persists() -> None:
    disk, cache = cache_with((0, 0), (0, 10), (2, 50), (5, 80))
    assert cache.epoch_entries == [(0, 0), (2, 50), (5, 80)]
    assert cache.latest_epoch == 5
    assert LeaderEpochCache.load(disk, PATH).epoch_entries == [(0, 0), (2, 50), (5, 80)]


def test_assign_drops_entries_that_contradict_the_new_one() -> None:
    _, cache = cache_with((1, 0), (2, 50), (5, 80))
    cache.assign(3, 60)  # Kafka: drop entries with epoch >= 3 or start offset >= 60
    assert cache.epoch_entries == [(1, 0), (2, 50), (3, 60)]
    cache.assign(4, 55)
    assert cache.epoch_entries == [(1, 0), (2, 50), (4, 55)]


def test_end_offset_for_follows_kafka() -> None:
    _, cache = cache_with((1, 0), (3, 100), (6, 250))
    leo = 300
    assert cache.end_offset_for(6, leo) == (6, 300)  # latest epoch: the log end offset
    assert cache.end_offset_for(3, leo) == (3, 250)  # known epoch: start of the next one
    assert cache.end_offset_for(4, leo) == (3, 250)  # unknown epoch between: floor epoch, next start
    assert cache.end_offset_for(0, leo) == (0, 0)  # older than all: requested epoch, first start
    assert cache.end_offset_for(7, leo) == (-1, -1)  # newer than all
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    _, empty = cache_with()
    assert empty.end_offset_for(0, 10) == (-1, -1)


def test_truncate_from_end_and_start() -> None:
    disk, cache = cache_with((1, 0), (3, 100), (6, 250))
    cache.truncate_from_end(250)
    assert cache.epoch_entries == [(1, 0), (3, 100)]
    cache.truncate_from_start(120)
    assert cache.epoch_entries == [(3, 120)]
    cache.truncate_from_start(50)  # never moves back
    assert cache.epoch_entries == [(3, 120)]
    assert LeaderEpochCache.load(disk, PATH).epoch_entries == [(3, 120)]
    cache.clear()
    assert cache.latest_epoch is None and LeaderEpochCache.load(disk, PATH).epoch_entries == []


class CountingDisk(MemoryDisk):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        self.batches.append([path for path, _ in files])
        return super().replace_files(files)


def batched_caches(count: int) -> tuple[CountingDisk, EpochCheckpoints, list[LeaderEpochCache]]:
    disk = CountingDisk()
    writer = EpochCheckpoints(disk)
    caches = []
    for i in range(count):
        disk.mkdir(f"/d{i}")
        caches.append(LeaderEpochCache(disk, f"/d{i}/leader-epoch-checkpoint", writer=writer))
    return disk, writer, caches


def test_changes_in_a_batch_are_written_once_each_when_the_outermost_block_ends() -> None:
    disk, writer, caches = batched_caches(3)
    with writer.batched():
        for i, cache in enumerate(caches):
            cache.assign(1, 0)
            cache.assign(2, 10 + i)
        with writer.batched():
            caches[0].assign(3, 20)
        assert disk.batches == [] and not disk.exists(caches[0].path)  # the inner block's end writes nothing
    assert disk.batches == [[c.path for c in caches]]
    assert [LeaderEpochCache.load(disk, c.path).epoch_entries for c in caches] == [
        [(1, 0), (2, 10), (3, 20)], [(1, 0), (2, 11)], [(1, 0), (2, 12)]]
    caches[1].assign(4, 30)  # outside a block: at once, as before
    assert LeaderEpochCache.load(disk, caches[1].path).epoch_entries[-1] == (4, 30) and len(disk.batches) == 1


def test_a_failed_file_goes_to_its_logs_handler_and_the_others_are_written() -> None:
    disk, writer, caches = batched_caches(3)
    failed: list[OSError] = []
    caches[1].on_write_error = failed.append
    disk.set_io_error("/d1/", on_read=False, on_write=True)
    with writer.batched():
        for cache in caches:
            cache.assign(1, 0)
    assert len(failed) == 1
    assert [disk.exists(c.path) for c in caches] == [True, False, True]
    caches[1].on_write_error = None  # no handler: the error is raised at the block's end
    with pytest.raises(OSError), writer.batched():
        caches[1].assign(2, 5)


def test_a_deleted_logs_noted_change_is_not_written() -> None:
    disk, writer, caches = batched_caches(2)
    with writer.batched():
        caches[0].assign(1, 0)
        caches[1].assign(1, 0)
        writer.forget(caches[0])
    assert disk.batches == [[caches[1].path]] and not disk.exists(caches[0].path)
