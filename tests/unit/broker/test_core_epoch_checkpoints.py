"""A metadata update that makes a broker the leader of many partitions writes their leader epoch files together
(one `Disk.replace_files`), all before the update's outcome is returned; a file that fails takes its log
directory offline, as a failed write of that log does, and leaves the other directory serving."""

from __future__ import annotations

from collections.abc import Sequence

from broker_harness import START as NOW
from broker_harness import Clock, registered

from insync.broker.core import BrokerCore
from insync.config import BrokerConfig
from insync.controller.messages import MetadataUpdate
from insync.metadata.records import (
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from insync.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import BrokerId, TopicPartition

TOPIC_ID = "00000000-0000-4000-8000-000000000001"
PARTITIONS = 40


class CountingDisk(MemoryDisk):
    def __init__(self) -> None:
        super().__init__()
        self.replaced: list[list[str]] = []

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        self.replaced.append([path for path, _ in files])
        return super().replace_files(files)


def _broker(disk: CountingDisk) -> tuple[BrokerCore, list[int]]:
    """Broker 1 with two log dirs, registered, following every partition of `t` (leader 2); the offset of the
    next metadata record."""
    config = BrokerConfig({"node.id": 1, "log.dirs": "/b1/a,/b1/b"})
    core = registered(BrokerCore(BrokerId(1), config, LogManager.open(("/b1/a", "/b1/b"), config, disk, Clock()),
                                 1, NOW), NOW)
    records: list[Record] = [
        RegisterBrokerRecord(1, 0, "i1", "h", 1), RegisterBrokerRecord(2, 1, "i2", "h", 2),
        UnfenceBrokerRecord(1, 0), UnfenceBrokerRecord(2, 1), TopicRecord("t", TOPIC_ID),
        *(PartitionRecord(TOPIC_ID, p, (2, 1), (2, 1), 2, 0, 0) for p in range(PARTITIONS)),
    ]
    core.handle(NOW, "controller", MetadataUpdate(0, tuple(enumerate(records)), len(records)))
    return core, [len(records)]


def _all_led_by_1(core: BrokerCore, next_offset: list[int]) -> None:
    """Broker 2 fenced: every partition's leadership moves to broker 1 in one update, epoch 1."""
    records = [PartitionChangeRecord(TOPIC_ID, p, isr=(1,), leader=1, leader_epoch=1, partition_epoch=1)
               for p in range(PARTITIONS)]
    first = next_offset[0]
    next_offset[0] += len(records)
    core.handle(NOW, "controller", MetadataUpdate(1, tuple(enumerate(records, first)), next_offset[0]))


def _epoch_file(core: BrokerCore, partition: int) -> str:
    directory = core.log_manager.dir_of(TopicPartition("t", partition))
    return f"{directory}/t-{partition}/{LEADER_EPOCH_CHECKPOINT}"


def test_the_leaders_epoch_files_of_one_update_are_written_together() -> None:
    disk = CountingDisk()
    core, next_offset = _broker(disk)
    disk.replaced.clear()
    _all_led_by_1(core, next_offset)
    assert all(core.partitions[TopicPartition("t", p)].is_leader for p in range(PARTITIONS))
    assert len(disk.replaced) == 1 and len(disk.replaced[0]) == PARTITIONS
    assert sorted(disk.replaced[0]) == sorted(_epoch_file(core, p) for p in range(PARTITIONS))
    for p in range(PARTITIONS):
        assert read_epoch_checkpoint(disk, _epoch_file(core, p))[-1] == (1, 0)
    disk.crash()  # durable when the update returned
    assert all(read_epoch_checkpoint(disk, _epoch_file(core, p))[-1] == (1, 0) for p in range(PARTITIONS))


def test_an_epoch_file_that_fails_takes_its_directory_offline_and_the_other_serves() -> None:
    disk = CountingDisk()
    core, next_offset = _broker(disk)
    disk.set_full("/b1/b/")
    _all_led_by_1(core, next_offset)
    assert core.log_manager.offline_dirs == frozenset({"/b1/b"}) and core.halt_message is None
    on_a = [p for p in range(PARTITIONS) if core.log_manager.dir_of(TopicPartition("t", p)) == "/b1/a"]
    assert on_a and len(on_a) < PARTITIONS
    assert all(read_epoch_checkpoint(disk, _epoch_file(core, p))[-1] == (1, 0) for p in on_a)
    assert set(core.offline_partitions) == {TopicPartition("t", p) for p in range(PARTITIONS)} - {
        TopicPartition("t", p) for p in on_a}
