"""Kafka-format checkpoint files: round trips, and damage is a CheckpointError naming file and line."""

from __future__ import annotations

import pytest

from insync.storage.checkpoint import (
    CheckpointError,
    OffsetLines,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_offset_checkpoint,
)
from insync.storage.disk import MemoryDisk
from insync.types import TopicPartition

PATH = "/logs/replication-offset-checkpoint"


@pytest.fixture
def disk() -> MemoryDisk:
    disk = MemoryDisk()
    disk.mkdir("/logs")
    return disk


def test_offset_checkpoint_round_trip_in_kafka_format(disk: MemoryDisk) -> None:
    offsets = {TopicPartition("orders", 0): 1100, TopicPartition("my.topic-x", 12): 0}
    write_offset_checkpoint(disk, PATH, offsets)
    assert disk.read_file(PATH) == b"0\n2\nmy.topic-x 12 0\norders 0 1100\n"
    assert read_offset_checkpoint(disk, PATH) == offsets
    assert not disk.exists(PATH + ".tmp")


def test_kept_lines_rewrite_what_changed_and_write_what_a_fresh_rendering_writes(disk: MemoryDisk) -> None:
    rendered = OffsetLines()
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 3, TopicPartition("b", 0): 9}
    steps = [dict(offsets), {**offsets, TopicPartition("b", 0): 10},  # an offset moved
             {**offsets, TopicPartition("a", 1): 0},  # a partition added: sorted again
             {TopicPartition("b", 1): 8}]  # partitions gone
    for step in steps:
        write_offset_checkpoint(disk, PATH, step, rendered)
        kept = disk.read_file(PATH)
        write_offset_checkpoint(disk, PATH, step)
        assert kept == disk.read_file(PATH) and read_offset_checkpoint(disk, PATH) == step
    assert disk.read_file(PATH) == b"0\n1\nb 1 8\n"


def test_checkpoint_write_is_durable_and_atomic(disk: MemoryDisk) -> None:
    write_offset_checkpoint(disk, PATH, {TopicPartition("t", 0): 5})
    disk.crash()
    assert read_offset_checkpoint(disk, PATH) == {TopicPartition("t", 0): 5}


def test_missing_file_is_empty(disk: MemoryDisk) -> None:
    assert read_offset_checkpoint(disk, PATH) == {}
    assert read_epoch_checkpoint(disk, "/logs/leader-epoch-checkpoint") == []


def test_epoch_checkpoint_round_trip(disk: MemoryDisk) -> None:
    path = "/logs/leader-epoch-checkpoint"
    write_epoch_checkpoint(disk, path, [(0, 0), (3, 120), (7, 500)])
    assert disk.read_file(path) == b"0\n3\n0 0\n3 120\n7 500\n"
    assert read_epoch_checkpoint(disk, path) == [(0, 0), (3, 120), (7, 500)]


@pytest.mark.parametrize(("text", "line", "words"), [
    (b"", 1, "missing version"),
    (b"0\n", 2, "missing version or entry count"),
    (b"1\n0\n", 1, "unsupported version"),
    (b"0\n2\nt 0 5\n", 4, "expected 2 entries, found 1"),
    (b"0\n1\nt 0 5\nt 1 6\n", 4, "expected 1 entries, found 2"),
    (b"0\n1\nt 0 5", 3, "not terminated"),
    (b"0\n1\nt 0\n", 3, "expected 3 fields"),
    (b"0\n1\nt 0 -5\n", 3, "non-negative integer"),
    (b"0\n1\nt x 5\n", 3, "non-negative integer"),
    (b"0\nabc\n", 2, "non-negative integer"),
    (b"0\n2\nt 0 5\nt 0 6\n", 4, "duplicate"),
    (b"0\n1\nt 0 \xff\n", 3, "not UTF-8"),
])
def test_garbled_offset_checkpoint_names_file_and_line(disk: MemoryDisk, text: bytes, line: int,
                                                      words: str) -> None:
    disk.write_file(PATH, text)
    with pytest.raises(CheckpointError) as info:
        read_offset_checkpoint(disk, PATH)
    assert info.value.path == PATH and info.value.line == line
    assert words in str(info.value) and PATH in str(info.value)


def test_epoch_checkpoint_out_of_order_is_an_error(disk: MemoryDisk) -> None:
    path = "/logs/leader-epoch-checkpoint"
    disk.write_file(path, b"0\n2\n5 100\n4 200\n")
    with pytest.raises(CheckpointError, match="line 4"):
        read_epoch_checkpoint(disk, path)
