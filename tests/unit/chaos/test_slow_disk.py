"""The slow disk: a FUSE passthrough that delays reads of the segments of the partitions its control file names
(chaos/slow_disk.py), mounted for real."""

from __future__ import annotations

import errno
import mmap
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos import slow_disk

DELAY_MS = 300


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Path]:
    reason = slow_disk.unavailable()
    if reason is not None:
        pytest.skip(reason)
    process = slow_disk.mount(tmp_path)
    try:
        yield tmp_path
    finally:
        slow_disk.unmount(tmp_path, process)
    assert not os.path.ismount(tmp_path / "data")


def _timed_read(path: Path) -> tuple[bytes, float]:
    start = time.monotonic()
    with path.open("rb") as f:
        return f.read(4096), time.monotonic() - start


def test_reads_of_a_named_partitions_segments_wait_and_nothing_else_does(node: Path) -> None:
    partition, other = node / "data" / "t-0", node / "data" / "t-1"
    partition.mkdir()
    other.mkdir()
    for directory in (partition, other):
        (directory / "00000000000000000000.log").write_bytes(b"r" * 10_000)
    (partition / "leader-epoch-checkpoint").write_text("0\n0\n")
    assert _timed_read(partition / "00000000000000000000.log")[1] < DELAY_MS / 1000
    slow_disk.write_control(node, {"t-0": DELAY_MS})
    time.sleep(2 * slow_disk.CONTROL_CHECK_S)
    data, took = _timed_read(partition / "00000000000000000000.log")
    assert data == b"r" * 4096 and took >= DELAY_MS / 1000
    assert _timed_read(other / "00000000000000000000.log")[1] < DELAY_MS / 1000  # another partition
    assert _timed_read(partition / "leader-epoch-checkpoint")[1] < DELAY_MS / 1000  # not a segment
    a, b = socket.socketpair()  # Kafka serves fetches with sendfile: it waits too
    with a, b, (partition / "00000000000000000000.log").open("rb") as f:
        start = time.monotonic()
        assert os.sendfile(a.fileno(), f.fileno(), 0, 1000) == 1000
        assert time.monotonic() - start >= DELAY_MS / 1000
    slow_disk.write_control(node, {})
    time.sleep(2 * slow_disk.CONTROL_CHECK_S)
    assert _timed_read(partition / "00000000000000000000.log")[1] < DELAY_MS / 1000


def test_what_kafka_does_to_its_log_dirs_passes_through(node: Path) -> None:
    directory = node / "data" / "t-0"
    directory.mkdir()
    index = directory / "00000000000000000000.index"
    with index.open("w+b") as f:  # Kafka maps its index files into memory
        f.truncate(4096)
        with mmap.mmap(f.fileno(), 4096) as mapped:
            mapped[0:4] = b"abcd"
            mapped.flush()
    (directory / "checkpoint.tmp").write_text("0\n")
    os.replace(directory / "checkpoint.tmp", directory / "checkpoint")
    os.truncate(index, 8)
    assert index.read_bytes() == b"abcd" + bytes(4)
    assert sorted(p.name for p in (node / slow_disk.DISK_DIR / "t-0").iterdir()) == [
        "00000000000000000000.index", "checkpoint"]  # written through to the disk below
    assert os.statvfs(directory).f_bavail > 0


def test_with_errors_on_every_read_and_write_fails_with_eio_and_works_again_after(node: Path) -> None:
    partition = node / "data" / "t-0"
    partition.mkdir()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(b"r" * 1000)
    slow_disk.write_errors(node, True)
    time.sleep(2 * slow_disk.CONTROL_CHECK_S)
    for operation in (segment.read_bytes, lambda: segment.write_bytes(b"w"), lambda: (partition / "new").mkdir()):
        with pytest.raises(OSError) as raised:
            operation()
        assert raised.value.errno == errno.EIO
    assert segment.exists() and [p.name for p in partition.iterdir()] == [segment.name]  # lookups still work
    slow_disk.write_errors(node, False)
    time.sleep(2 * slow_disk.CONTROL_CHECK_S)
    assert segment.read_bytes() == b"r" * 1000
