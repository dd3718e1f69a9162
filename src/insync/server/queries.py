"""Requests a broker answers from its partitions' state at once, without purgatory: ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, InitProducerId, and the metrics snapshot. Sans-IO, like the rest of `broker/`.

Kafka's rules (REFERENCE 3, 8, 13): ListOffsets LATEST is the high watermark for consumers and the log end
offset for a replica reading its own leader; EARLIEST (and EARLIEST_LOCAL, every segment being local) is the log
start offset, with the epoch of its record; a timestamp gives the first record at or after it, answered with that
record's own timestamp and its batch's leader epoch; MAX_TIMESTAMP (KIP-734) the first record with the largest
timestamp; LATEST_TIERED offset -1 (nothing is tiered). Only the leader answers (NOT_LEADER_OR_FOLLOWER
elsewhere), and a request carrying a leader epoch older than the partition's is FENCED_LEADER_EPOCH, newer
UNKNOWN_LEADER_EPOCH. The debugging replica id (-2) reads any replica's own log, as Kafka's ListOffsets allows;
insync allows it for OffsetForLeaderEpoch too (Kafka answers that on leaders only), so that tools can read a
replica's leader-epoch history, the part of KIP-966's GetReplicaLogInfo a Kafka API can carry
(`insync topics elect-leaders --unclean --dry-run`).

Producer ids: `ProducerIdAllocator` hands out ids unique across brokers and restarts without a coordinator:
the broker id in the top bits, the allocator's start time in milliseconds below it, and a counter; when the
counter wraps the start time moves on by a millisecond (so ids stay unique as long as a restart takes longer
than the ids issued per millisecond, 256).
"""

from __future__ import annotations

from collections.abc import Mapping

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import Command
from insync.errors import KafkaError, KafkaException
from insync.replication.log_view import LogView
from insync.replication.partition import Partition
from insync.server.metrics import MetricsSnapshot
from insync.types import UNDEFINED_EPOCH, UNKNOWN_OFFSET, BrokerId, LeaderEpoch, Offset, TopicPartition
from insync.wire.internal import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsResult,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochResult,
)

NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP: the answer to a position, not a time
PRODUCER_COUNTER_BITS = 8
PRODUCER_TIME_BITS = 40


def _leader(core: BrokerCore, tp: TopicPartition, current_leader_epoch: int,
            replica_id: int = CONSUMER_REPLICA_ID) -> Partition | KafkaError:
    partition = core.partitions.get(tp)
    if partition is None:
        known = core.metadata.registration(tp) is not None
        return errors.NOT_LEADER_OR_FOLLOWER if known else errors.UNKNOWN_TOPIC_OR_PARTITION
    if current_leader_epoch >= 0 and current_leader_epoch < partition.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    if current_leader_epoch > partition.leader_epoch:
        return errors.UNKNOWN_LEADER_EPOCH
    if not partition.is_leader and replica_id != DEBUGGING_REPLICA_ID:
        return errors.NOT_LEADER_OR_FOLLOWER
    return partition


def list_offsets(core: BrokerCore, request: ListOffsetsRequest) -> ListOffsetsResponse:
    results = []
    for asked in request.partitions:
        partition = _leader(core, asked.topic_partition, asked.current_leader_epoch, request.replica_id)
        if isinstance(partition, KafkaError):
            results.append(ListOffsetsResult(asked.topic_partition, partition))
            continue
        results.append(_list_offset(partition, asked.timestamp, request.replica_id))
    return ListOffsetsResponse(request.correlation_id, tuple(results))


def _list_offset(partition: Partition, timestamp: int, replica_id: int) -> ListOffsetsResult:
    """Kafka 4.x's `Partition.fetchOffsetForTimestamp` for a broker without tiered storage. Consumers see up to the
    high watermark (insync has no transactions, so READ_COMMITTED's last stable offset is the same), replicas up to
    the log end."""
    tp, epoch = partition.topic_partition, partition.leader_epoch
    log = partition.log
    fetchable = partition.high_watermark if replica_id == CONSUMER_REPLICA_ID else partition.log_end_offset
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # every segment is local
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, Offset(log.log_start_offset), _earliest_epoch(log))
    if timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, Offset(fetchable), epoch)
    if timestamp == LATEST_TIERED_TIMESTAMP:  # nothing is tiered: Kafka answers offset and epoch -1
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, UNKNOWN_OFFSET, UNDEFINED_EPOCH)
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:  # another negative value (EARLIEST_PENDING_UPLOAD) finds nothing, as Kafka without tiered storage
        found = log.offset_for_timestamp(timestamp) if timestamp >= 0 else None
    if found is None or found.offset >= fetchable:
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, UNKNOWN_OFFSET, UNDEFINED_EPOCH)
    return ListOffsetsResult(tp, errors.NONE, found.timestamp, Offset(found.offset),
                             LeaderEpoch(found.leader_epoch))


def _earliest_epoch(log: LogView) -> LeaderEpoch:
    """The epoch of the log start offset's record (Kafka: the first leader-epoch entry, when it starts at or
    before the log start), or -1."""
    entries = log.leader_epoch_cache.epoch_entries
    return LeaderEpoch(entries[0][0]) if entries and entries[0][1] <= log.log_start_offset else UNDEFINED_EPOCH


def offset_for_leader_epoch(core: BrokerCore, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    results = []
    for asked in request.partitions:
        partition = _leader(core, asked.topic_partition, asked.current_leader_epoch, request.replica_id)
        if isinstance(partition, KafkaError):
            results.append(OffsetForLeaderEpochResult(asked.topic_partition, partition))
            continue
        epoch, end = partition.log.end_offset_for_epoch(asked.leader_epoch)
        results.append(OffsetForLeaderEpochResult(asked.topic_partition, errors.NONE, LeaderEpoch(epoch),
                                                  Offset(end)))
    return OffsetForLeaderEpochResponse(request.correlation_id, tuple(results))


def delete_records(core: BrokerCore, request: DeleteRecordsRequest, now_ms: int
                   ) -> tuple[DeleteRecordsResponse, list[Command]]:
    results: list[DeleteRecordsResult] = []
    commands: list[Command] = []
    for tp, offset in request.partitions:
        partition = _leader(core, tp, -1)
        if isinstance(partition, KafkaError):
            results.append(DeleteRecordsResult(tp, partition))
            continue
        try:
            commands.extend(core.delete_records(now_ms, tp, None if offset < 0 else offset))
        except KafkaException as exc:
            results.append(DeleteRecordsResult(tp, exc.error))
            continue
        results.append(DeleteRecordsResult(tp, errors.NONE, Offset(partition.log.log_start_offset)))
    return DeleteRecordsResponse(request.correlation_id, tuple(results)), commands


class ProducerIdAllocator:
    def __init__(self, broker_id: BrokerId, now_ms: int) -> None:
        assert 0 <= broker_id < 2 ** (63 - PRODUCER_TIME_BITS - PRODUCER_COUNTER_BITS)
        self.broker_id = broker_id
        self._time_ms = now_ms % 2**PRODUCER_TIME_BITS
        self._counter = 0

    def allocate(self, request: InitProducerIdRequest, now_ms: int) -> InitProducerIdResponse:
        if request.producer_id >= 0:
            # KIP-360: an existing producer bumps its epoch (it stays fenced against its older self).
            if request.producer_epoch < 0:
                return InitProducerIdResponse(request.correlation_id, errors.INVALID_PRODUCER_EPOCH)
            return InitProducerIdResponse(request.correlation_id, errors.NONE, request.producer_id,
                                          request.producer_epoch + 1)
        if self._counter >= 2**PRODUCER_COUNTER_BITS:
            self._time_ms = max(self._time_ms + 1, now_ms % 2**PRODUCER_TIME_BITS)
            self._counter = 0
        producer_id = ((self.broker_id << (PRODUCER_TIME_BITS + PRODUCER_COUNTER_BITS))
                       | (self._time_ms << PRODUCER_COUNTER_BITS) | self._counter)
        self._counter += 1
        return InitProducerIdResponse(request.correlation_id, errors.NONE, producer_id, 0)


def metrics_snapshot(core: BrokerCore, events_written: Mapping[str, int]) -> MetricsSnapshot:
    """Gauges from the partitions and fetchers; the ISR meters count the isr_shrink/isr_expand events written."""
    led = [p for p in core.partitions.values() if p.is_leader]
    return MetricsSnapshot(
        under_replicated_partitions=sum(1 for p in led if p.is_under_replicated),
        under_min_isr_partitions=sum(1 for p in led if p.is_under_min_isr),
        failed_partitions=core.failed_partitions_count,
        max_lag=max((s.max_lag for s in core.fetchers.sessions.values()), default=0),
        isr_shrinks=events_written.get("isr_shrink", 0),
        isr_expands=events_written.get("isr_expand", 0),
        produce_purgatory_size=core.produce.purgatory_size,
        fetch_purgatory_size=core.fetch_server.purgatory_size,
    )
