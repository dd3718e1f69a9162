"""The leader epoch cache answers OffsetsForLeaderEpoch as Kafka does and persists every change."""

from __future__ import annotations

from insync.storage.disk import MemoryDisk
from insync.storage.leader_epoch import LeaderEpochCache

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
