"""JournalingDisk + lose_unsynced on real files lose exactly what MemoryDisk.crash loses, for random workloads."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from insync.storage.disk import MemoryDisk, RealDisk
from insync.storage.power_loss import JOURNAL_FILE, JournalingDisk, durable_sizes, lose_unsynced, open_disk

NAMES = ("a.log", "b.log", "c.index", "d.checkpoint")


def _step(rng: random.Random, disks: tuple[JournalingDisk, MemoryDisk], root: str) -> None:
    """One random operation, the same on both disks."""
    path = f"{root}/{rng.choice(NAMES)}"
    exists = disks[1].exists(path)
    action = rng.random()
    size = rng.randint(1, 40)
    target = f"{root}/{rng.choice(NAMES)}"
    for disk in disks:
        if action < 0.45:
            disk.append(path, b"x" * size)
        elif not exists:
            disk.write_file(path, b"new")
        elif action < 0.6:
            disk.fsync(path)
        elif action < 0.7:
            disk.truncate(path, disk.size(path) // 2)
        elif action < 0.8:
            disk.write_file(path, b"replaced")
        elif action < 0.85:  # several checkpoints at once, durable on return (`Disk.replace_files`)
            files = [(path, b"both" * size), (target, b"at once")] if target != path else [(path, b"alone")]
            assert disk.replace_files(files) == [None] * len(files)
        elif action < 0.9:
            if target != path:
                disk.rename(path, target)
        else:
            disk.remove(path)


@pytest.mark.parametrize("seed", range(20))
def test_a_power_cut_keeps_what_memory_disk_keeps(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = str(tmp_path / "data")
    os.makedirs(root)
    real, memory = JournalingDisk(str(tmp_path / JOURNAL_FILE)), MemoryDisk()
    memory.mkdir(root)
    for name in NAMES[:2]:  # files from before the broker started are durable as they are
        for disk in (real, memory):
            disk.write_file(f"{root}/{name}", b"old" * 10)
            disk.fsync(f"{root}/{name}")
    real.close()
    real = JournalingDisk(str(tmp_path / JOURNAL_FILE))  # a restart: a fresh journal
    for _ in range(60):
        _step(rng, (real, memory), root)
    real.close()
    lose_unsynced(tmp_path / JOURNAL_FILE)
    memory.crash()
    assert not (tmp_path / JOURNAL_FILE).exists()
    assert sorted(os.listdir(root)) == memory.listdir(root)
    for name in os.listdir(root):
        assert Path(root, name).read_bytes() == memory.read_file(f"{root}/{name}"), name


def test_unflushed_appends_are_lost_and_flushed_ones_kept(tmp_path: Path) -> None:
    disk = JournalingDisk(str(tmp_path / JOURNAL_FILE))
    path = str(tmp_path / "segment.log")
    disk.append(path, b"durable")
    disk.fsync(path)
    disk.append(path, b"lost")
    cut = lose_unsynced(tmp_path / JOURNAL_FILE)
    assert Path(path).read_bytes() == b"durable"
    assert (cut.files_cut, cut.bytes_lost) == (1, 4)


def test_a_torn_tail_keeps_a_prefix_of_what_was_lost(tmp_path: Path) -> None:
    disk = JournalingDisk(str(tmp_path / JOURNAL_FILE))
    path = str(tmp_path / "segment.log")
    disk.append(path, b"durable")
    disk.fsync(path)
    disk.append(path, b"0123456789")
    cut = lose_unsynced(tmp_path / JOURNAL_FILE, torn_tail=True, rng=random.Random(3))
    kept = Path(path).read_bytes()
    assert b"durable0123456789".startswith(kept) and len(kept) > len(b"durable")
    assert cut.bytes_lost == len(b"durable0123456789") - len(kept) > 0


def test_no_journal_means_nothing_to_cut(tmp_path: Path) -> None:
    assert lose_unsynced(tmp_path / JOURNAL_FILE).files_cut == 0


def test_a_journal_line_that_is_not_an_entry_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="journal line 2 is not an entry: unknown entry 'grow'"):
        durable_sizes('["size", "/a", 3]\n["grow", "/a"]\n')
    with pytest.raises(ValueError, match="journal line 1 is not an entry"):
        durable_sizes("garbage\n")


def test_the_disk_journals_only_when_power_loss_is_on(tmp_path: Path) -> None:
    plain = open_disk(str(tmp_path / "off"), power_loss=False)
    assert type(plain) is RealDisk and not (tmp_path / "off").exists()
    journaling = open_disk(str(tmp_path / "on"), power_loss=True)
    assert isinstance(journaling, JournalingDisk) and (tmp_path / "on" / JOURNAL_FILE).exists()
    journaling.close()


def test_a_moved_directory_keeps_its_files_unsynced_bytes_under_the_new_name(tmp_path: Path) -> None:
    disk = JournalingDisk(str(tmp_path / JOURNAL_FILE))
    disk.mkdir(str(tmp_path / "a" / "t-0"))
    disk.append(str(tmp_path / "a" / "t-0" / "0.log"), b"synced")
    disk.fsync(str(tmp_path / "a" / "t-0" / "0.log"))
    disk.append(str(tmp_path / "a" / "t-0" / "0.log"), b"lost")
    disk.mkdir(str(tmp_path / "b"))
    disk.rename_dir(str(tmp_path / "a" / "t-0"), str(tmp_path / "b" / "t-0"))
    disk.close()
    assert durable_sizes((tmp_path / JOURNAL_FILE).read_text()) == {str(tmp_path / "b" / "t-0" / "0.log"): 6}
    lose_unsynced(tmp_path / JOURNAL_FILE)
    assert (tmp_path / "b" / "t-0" / "0.log").read_bytes() == b"synced"
