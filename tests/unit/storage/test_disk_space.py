"""`Disk.space`: the volume's size and usable bytes, from the file system or the in-memory disk's accounting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from insync.storage.disk import MEMORY_VOLUME_BYTES, DiskSpace, MemoryDisk, RealDisk


def test_a_real_disk_reports_its_file_systems_volume(tmp_path: Path) -> None:
    disk = RealDisk()
    space = disk.space(str(tmp_path))
    stats = os.statvfs(tmp_path)
    assert space.total_bytes == stats.f_blocks * stats.f_frsize
    assert 0 < space.usable_bytes <= space.total_bytes
    disk.set_io_error(str(tmp_path), on_read=True, on_write=False)
    with pytest.raises(OSError):
        disk.space(str(tmp_path))


def test_a_memory_disk_counts_what_its_files_hold() -> None:
    disk = MemoryDisk()
    disk.mkdir("/d")
    disk.append("/d/f", b"x" * 100)
    assert disk.space("/d") == DiskSpace(MEMORY_VOLUME_BYTES, MEMORY_VOLUME_BYTES - 100)
    disk.set_io_error("/d", on_read=True, on_write=False)
    with pytest.raises(OSError):
        disk.space("/d")
