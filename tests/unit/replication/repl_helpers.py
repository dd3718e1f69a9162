"""Shared helpers (imported by name: pytest puts this directory on sys.path) for the replication tests: real `Log`s on a `MemoryDisk`, batches, partitions, and a wire-free
fetch loop between a leader `Partition` and follower partitions through a `FetcherSession`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from insync import errors
from insync.clock import ManualClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.events import Event, EventType
from insync.protocol.records import build_batch
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetcherSession, FetchOutcome
from insync.replication.follower import Follower
from insync.replication.isr import IsrPolicy
from insync.replication.log_view import ReadResultView
from insync.replication.messages import (
    AlterPartitionItem,
    AlterPartitionResult,
    FetchPartitionData,
    FetchResponse,
)
from insync.replication.partition import Partition, PartitionConfig
from insync.replication.results import AlterOutcome, FollowerFetchResult
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.types import (
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Offset,
    PartitionEpoch,
    TopicPartition,
)

T0 = 1_700_000_000_000  # realistic epoch milliseconds: a last_caught_up of 0 must look ancient
LAG_MS = 10_000
TP = TopicPartition("events", 0)

_log_names = itertools.count()


def new_log(config: LogConfig | None = None) -> Log:
    """A fresh log on its own in-memory disk."""
    return Log.open(f"/logs/t-{next(_log_names)}", config or LogConfig(), disk=MemoryDisk(), clock=ManualClock(T0))


def batch(count: int = 1, *, value: bytes = b"v") -> bytes:
    """A produced batch of `count` records (offsets and epoch are stamped by the leader)."""
    return build_batch([(None, value + str(i).encode()) for i in range(count)], base_timestamp=T0)


def config(*, min_isr: int = 1, lag_ms: int = LAG_MS, lag_messages: int = 0, pending_reads: bool = False
           ) -> PartitionConfig:
    return PartitionConfig(IsrPolicy(lag_ms, lag_messages), min_isr, pending_reads)


def new_partition(broker: int, cfg: PartitionConfig | None = None, *, log: Log | None = None,
                  events: EventBuffer | None = None, eligible: Callable[[BrokerId], bool] | None = None,
                  topic_partition: TopicPartition = TP, high_watermark: int = 0) -> Partition:
    return Partition(topic_partition, BrokerId(broker), log or new_log(), cfg or config(), events=events,
                     is_replica_eligible=eligible, high_watermark=high_watermark)


def leader(broker: int = 1, *, isr: Sequence[int] = (1, 2, 3), replicas: Sequence[int] = (1, 2, 3),
           epoch: int = 1, partition_epoch: int = 1, now_ms: int = T0, **kwargs: object) -> Partition:
    partition = new_partition(broker, **kwargs)  # type: ignore[arg-type]
    assert partition.make_leader(LeaderEpoch(epoch), PartitionEpoch(partition_epoch), ids(isr), ids(replicas),
                                 now_ms)
    return partition


def follower_of(partition: Partition) -> Follower:
    """The partition's follower role, which must be there (this broker does not lead it)."""
    found = partition.follower
    assert found is not None, f"broker {partition.broker_id} leads {partition.topic_partition}"
    return found


def ids(brokers: Sequence[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(b) for b in brokers)


def events_of(buffer: EventBuffer, event_type: EventType) -> list[Event]:
    return [event for event in buffer.drain() if event.type == event_type]


def log_bytes(log: Log) -> bytes:
    """Every batch of the log from its start, as stored."""
    out, offset = bytearray(), log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            return bytes(out)
        result = log.read(offset, 1 << 20)
        out += result.records
        offset = result.next_offset
    raise AssertionError("log_bytes did not finish")


def fetch_round(session: FetcherSession, leaders: dict[TopicPartition, Partition], now_ms: int,
                max_bytes: int = 1 << 20, alter_items: list[AlterPartitionItem] | None = None) -> FetchOutcome | None:
    """One follower fetch from `leaders` through `session`, with immediate reads. Returns the outcome, or None
    when the session had nothing to ask. ISR expansions the leaders propose go to `alter_items`."""
    request = session.build_fetch_request(now_ms)
    if request is None:
        return None
    answers: list[FetchPartitionData] = []
    for requested in request.partitions:
        found = leaders.get(requested.topic_partition)
        if found is None:
            answers.append(FetchPartitionData(requested.topic_partition, errors.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        result = handle_follower_fetch(found, request.replica_id, requested.fetch_offset,
                                             requested.current_leader_epoch, requested.last_fetched_epoch,
                                             requested.log_start_offset, max_bytes, now_ms)
        if result.alter_partition is not None and alter_items is not None:
            alter_items.append(result.alter_partition)
        answers.append(result.data)
    return session.handle_fetch_response(FetchResponse(request.correlation_id, errors.NONE, tuple(answers)),
                                         now_ms)


def handle_follower_fetch(partition: Partition, replica_id: BrokerId, fetch_offset: Offset,
                          current_leader_epoch: LeaderEpoch, last_fetched_epoch: LeaderEpoch,
                          follower_log_start_offset: Offset, max_bytes: int, now_ms: int, *,
                          replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH) -> FollowerFetchResult:
    """Both halves of a follower fetch on the leader, with an immediate read."""
    started = partition.begin_follower_fetch(replica_id, fetch_offset, current_leader_epoch, last_fetched_epoch,
                                             follower_log_start_offset, now_ms, replica_epoch=replica_epoch)
    if isinstance(started, FetchPartitionData):
        return FollowerFetchResult(started)
    outcome: ReadResultView | KafkaException
    try:
        outcome = partition.log.read(fetch_offset, max_bytes)
    except KafkaException as exc:
        outcome = exc
    return partition.complete_follower_fetch(started, outcome, now_ms)


def fetch(partition: Partition, broker: int, offset: int, at_ms: int, *, last_epoch: int = -1,
          current_epoch: int | None = None) -> FollowerFetchResult:
    """A follower's fetch, read at once, in the partition's current leader epoch unless told."""
    epoch = partition.leader_epoch if current_epoch is None else current_epoch
    return handle_follower_fetch(partition, BrokerId(broker), Offset(offset), LeaderEpoch(epoch),
                                           LeaderEpoch(last_epoch), Offset(0), 1 << 20, at_ms)


def commit(partition: Partition, item: AlterPartitionItem, now_ms: int) -> AlterOutcome:
    """The controller commits `item` at the next partition epoch."""
    result = AlterPartitionResult(item.topic_partition, errors.NONE, item.leader_id, item.leader_epoch,
                                  PartitionEpoch(item.partition_epoch + 1), item.new_isr)
    return partition.on_alter_partition_result(item, result, now_ms).outcome


def fail(partition: Partition, item: AlterPartitionItem, error: errors.KafkaError, now_ms: int) -> AlterOutcome:
    """The controller refuses `item` with `error`."""
    return partition.on_alter_partition_result(item, AlterPartitionResult(item.topic_partition, error), now_ms).outcome
