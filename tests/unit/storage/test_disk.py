"""Both disks behave alike; MemoryDisk crashes keep only fsynced bytes; faults fire where they are aimed."""

from __future__ import annotations

import errno
import random
import time
from pathlib import Path

import pytest

from insync.storage.disk import Disk, MemoryDisk, RealDisk


@pytest.fixture(params=["memory", "real"])
def disk_and_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Disk, str]:
    if request.param == "memory":
        return MemoryDisk(), "/data"
    return RealDisk(), str(tmp_path / "data")


def test_file_operations_agree(disk_and_root: tuple[Disk, str]) -> None:
    disk, root = disk_and_root
    disk.mkdir(f"{root}/t-0")
    path = f"{root}/t-0/a.log"
    assert disk.append(path, b"hello") == 0
    assert disk.append(path, bytearray(b" world")) == 5
    assert disk.size(path) == 11
    assert disk.pread(path, 6, 100) == b"world"
    disk.truncate(path, 5)
    assert disk.read_file(path) == b"hello"
    disk.write_file(f"{root}/t-0/b.tmp", b"new")
    disk.fsync(f"{root}/t-0/b.tmp")
    disk.rename(f"{root}/t-0/b.tmp", f"{root}/t-0/b")
    assert disk.listdir(f"{root}/t-0") == ["a.log", "b"]
    disk.remove(path)
    disk.remove(f"{root}/t-0/b")
    assert not disk.exists(path)
    disk.rmdir(f"{root}/t-0")
    assert not disk.exists(f"{root}/t-0")


def test_io_errors_by_prefix(disk_and_root: tuple[Disk, str]) -> None:
    disk, root = disk_and_root
    disk.mkdir(root)
    disk.append(f"{root}/x.log", b"data")
    disk.set_io_error(f"{root}/x", on_read=True, on_write=False)  # type: ignore[attr-defined]
    with pytest.raises(OSError) as info:
        disk.pread(f"{root}/x.log", 0, 4)
    assert info.value.errno == errno.EIO
    disk.append(f"{root}/x.log", b"more")  # writes still succeed
    disk.clear_faults()  # type: ignore[attr-defined]
    assert disk.pread(f"{root}/x.log", 0, 8) == b"datamore"


def test_memory_disk_reports_slow_reads_without_waiting() -> None:
    disk = MemoryDisk()
    disk.mkdir("/d")
    disk.append("/d/s.log", b"x" * 10)
    disk.set_slow_reads("/d/s", 500)
    start = time.monotonic()
    assert disk.pread("/d/s.log", 0, 10) == b"x" * 10
    assert time.monotonic() - start < 0.1
    assert disk.read_latency_ms("/d/s.log") == 500
    assert disk.read_latency_ms("/d/other.log") == 0


def test_real_disk_slow_reads_are_reported_for_the_driver_to_charge(tmp_path: Path) -> None:
    disk = RealDisk()
    path = str(tmp_path / "s.log")
    disk.append(path, b"abc")
    disk.set_slow_reads(str(tmp_path), 50)
    assert disk.pread(path, 0, 3) == b"abc"
    assert disk.read_latency_ms(path) == 50
    assert disk.read_latency_ms("/elsewhere/s.log") == 0
    disk.close()


def test_crash_keeps_only_fsynced_bytes() -> None:
    disk = MemoryDisk()
    disk.mkdir("/d")
    disk.append("/d/a", b"durable")
    disk.fsync("/d/a")
    disk.append("/d/a", b"-lost")
    disk.append("/d/b", b"never synced")
    assert disk.unflushed_bytes("/d/a") == 5
    disk.crash()
    assert disk.read_file("/d/a") == b"durable"
    assert disk.read_file("/d/b") == b""


def test_torn_crash_keeps_a_prefix_of_the_last_unflushed_write() -> None:
    seen = set()
    for seed in range(40):
        disk = MemoryDisk()
        disk.mkdir("/d")
        disk.append("/d/a", b"sync")
        disk.fsync("/d/a")
        disk.append("/d/a", b"0123456789")
        disk.crash(torn_tail=True, rng=random.Random(seed))
        data = disk.read_file("/d/a")
        assert b"sync0123456789".startswith(data) and data.startswith(b"sync")
        seen.add(len(data))
    assert len(seen) > 3  # really torn at different places


def test_truncation_is_durable_so_cut_data_never_returns() -> None:
    disk = MemoryDisk()
    disk.mkdir("/d")
    disk.append("/d/a", b"abcdef")
    disk.fsync("/d/a")
    disk.truncate("/d/a", 2)
    disk.crash()
    assert disk.read_file("/d/a") == b"ab"


def test_real_disk_bounds_its_open_files(tmp_path: Path) -> None:
    from insync.storage import disk as disk_module

    disk = RealDisk()
    paths = [str(tmp_path / f"f{i}") for i in range(disk_module.OPEN_FILES_MAX + 20)]
    for number, path in enumerate(paths):
        disk.append(path, b"%d" % number)
    assert len(disk._fds) == disk_module.OPEN_FILES_MAX
    assert [disk.pread(path, 0, 10) for path in paths[:3]] == [b"0", b"1", b"2"]  # reopened on demand
    disk.close()
    assert not disk._fds


def test_a_directory_moves_whole_and_never_over_another(disk_and_root: tuple[Disk, str]) -> None:
    disk, root = disk_and_root
    disk.mkdir(f"{root}/a/t-0/sub")
    disk.append(f"{root}/a/t-0/0.log", b"abc")
    disk.append(f"{root}/a/t-0/sub/x", b"y")
    disk.mkdir(f"{root}/b")
    disk.rename_dir(f"{root}/a/t-0", f"{root}/b/t-0")
    assert disk.listdir(f"{root}/a") == [] and disk.listdir(f"{root}/b/t-0") == ["0.log", "sub"]
    assert disk.pread(f"{root}/b/t-0/0.log", 0, 3) == b"abc" and disk.read_file(f"{root}/b/t-0/sub/x") == b"y"
    disk.append(f"{root}/b/t-0/0.log", b"d")  # appends after the move land in the moved file
    assert disk.size(f"{root}/b/t-0/0.log") == 4
    disk.mkdir(f"{root}/c")
    with pytest.raises(FileExistsError):
        disk.rename_dir(f"{root}/c", f"{root}/b/t-0")


def test_files_replaced_together_are_each_durable_and_fail_alone(disk_and_root: tuple[Disk, str]) -> None:
    disk, root = disk_and_root
    files = [(f"{root}/p-{i}/leader-epoch-checkpoint", f"0\n1\n{i} 0\n".encode()) for i in range(40)]
    for path, _ in files:
        disk.mkdir(path.rsplit("/", 1)[0])
    disk.write_file(files[0][0], b"old")
    disk.set_io_error(f"{root}/p-7/", on_read=False, on_write=True)  # type: ignore[attr-defined]
    results = disk.replace_files(files)
    assert [i for i, error in enumerate(results) if error is not None] == [7]
    assert isinstance(results[7], OSError) and results[7].errno == errno.EIO
    for i, (path, data) in enumerate(files):
        assert i == 7 or disk.read_file(path) == data
        assert not disk.exists(path + ".tmp") or i == 7
    if isinstance(disk, MemoryDisk):
        disk.crash()  # each was fsynced before its rename: all kept
        assert all(disk.read_file(path) == data for i, (path, data) in enumerate(files) if i != 7)
