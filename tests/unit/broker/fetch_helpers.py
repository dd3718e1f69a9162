"""Leader partitions and fetch requests for the tests of the fetch server and its fetch sessions."""

from __future__ import annotations

from insync.broker.fetch_serving import FetchOutcome
from insync.broker.messages import ConsumerFetchRequest, ConsumerFetchResponse
from insync.clock import ManualClock
from insync.config import LogConfig
from insync.protocol.records import build_batch
from insync.replication.messages import FetchRequest, FetchRequestPartition, FetchResponse
from insync.replication.partition import Partition
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.types import Address, BrokerId, LeaderEpoch, Offset, Outgoing, PartitionEpoch, TopicPartition

T0 = 1_700_000_000_000
A, B = TopicPartition("a", 0), TopicPartition("b", 0)


def leaders() -> dict[TopicPartition, Partition]:
    partitions = {}
    for n, tp in enumerate((A, B)):
        log = Log.open(f"/logs/{n}", LogConfig(), disk=MemoryDisk(), clock=ManualClock(T0))
        partition = Partition(tp, BrokerId(1), log)
        assert partition.make_leader(LeaderEpoch(1), PartitionEpoch(1), (BrokerId(1), BrokerId(2), BrokerId(3)),
                                     (BrokerId(1), BrokerId(2), BrokerId(3)), T0)
        partitions[tp] = partition
    return partitions


def append(partition: Partition, count: int, now_ms: int) -> int:
    records = build_batch([(None, b"v%d" % i) for i in range(count)], base_timestamp=T0)
    partition.append_records_as_leader(records, 1, now_ms)
    return len(records)


def follower_request(correlation_id: int, replica: int, offsets: dict[TopicPartition, int], min_bytes: int = 1,
                     max_wait_ms: int = 500) -> FetchRequest:
    return FetchRequest(correlation_id, BrokerId(replica), max_wait_ms, min_bytes, 1 << 20, tuple(
        FetchRequestPartition(tp, Offset(offset), LeaderEpoch(1), LeaderEpoch(-1), Offset(0), 1 << 20)
        for tp, offset in offsets.items()))


def consumer_request(correlation_id: int, tps: tuple[TopicPartition, ...], max_wait_ms: int = 500
                     ) -> ConsumerFetchRequest:
    return ConsumerFetchRequest(correlation_id, tuple((tp, Offset(0)) for tp in tps), max_wait_ms, 1 << 20)


def answered(outcome: FetchOutcome) -> list[tuple[Address, int]]:
    """(destination, correlation id) of each response, in order."""
    replies = []
    for command in outcome.commands:
        assert isinstance(command, Outgoing)
        assert isinstance(command.message, FetchResponse | ConsumerFetchResponse)
        replies.append((command.destination, command.message.correlation_id))
    return replies
