"""Sparse offset and time indexes: lookups, truncation, file format, refusal to load damaged files."""

from __future__ import annotations

from insync.storage.disk import MemoryDisk
from insync.storage.index import OffsetIndex, TimeIndex


def make_disk() -> MemoryDisk:
    disk = MemoryDisk()
    disk.mkdir("/d")
    return disk


def test_offset_index_lookup_and_truncate() -> None:
    disk = make_disk()
    index = OffsetIndex.create(disk, "/d/00000000000000000100.index", 100)
    for offset, position in [(110, 400), (130, 900), (150, 1500)]:
        index.append(offset, position)
    assert disk.read_file(index.path)[:8] == bytes.fromhex("0000000a00000190")  # relative 10, position 400
    assert index.lookup(105) == (100, 0)
    assert index.lookup(130) == (130, 900)
    assert index.lookup(149) == (130, 900)
    assert index.lookup(10**9) == (150, 1500)
    index.truncate_to(130)
    assert index.offsets == [110] and disk.size(index.path) == 8
    loaded = OffsetIndex.load(disk, index.path, 100, log_size=1000)
    assert loaded is not None and loaded.offsets == [110] and loaded.positions == [400]


def test_offset_index_refuses_damaged_files() -> None:
    disk = make_disk()
    index = OffsetIndex.create(disk, "/d/0.index", 0)
    index.append(5, 100)
    index.append(9, 200)
    assert OffsetIndex.load(disk, "/d/0.index", 0, log_size=150) is None  # points past the log
    disk.append("/d/0.index", b"\x00\x00")
    assert OffsetIndex.load(disk, "/d/0.index", 0, log_size=1000) is None  # torn entry
    disk.write_file("/d/0.index", bytes.fromhex("0000000900000100" "0000000500000200"))
    assert OffsetIndex.load(disk, "/d/0.index", 0, log_size=1000) is None  # out of order
    assert OffsetIndex.load(disk, "/d/missing.index", 0, log_size=1000) is None


def test_time_index_only_grows_and_looks_up_strictly_before() -> None:
    disk = make_disk()
    index = TimeIndex.create(disk, "/d/0.timeindex", 0)
    index.maybe_append(1000, 0)
    index.maybe_append(1000, 5)  # not larger: ignored
    index.maybe_append(2000, 10)
    index.maybe_append(3000, 20)
    assert index.timestamps == [1000, 2000, 3000] and disk.size(index.path) == 36
    assert index.lookup_before(1000) == 0  # nothing strictly before: the base offset
    assert index.lookup_before(2500) == 10
    assert index.lookup_before(3000) == 10
    assert index.lookup_before(9999) == 20
    index.truncate_to(20)
    assert index.last_timestamp == 2000
    loaded = TimeIndex.load(disk, index.path, 0)
    assert loaded is not None and loaded.offsets == [0, 10]
    disk.write_file("/d/0.timeindex", disk.read_file(index.path)[::-1])
    assert TimeIndex.load(disk, "/d/0.timeindex", 0) is None
