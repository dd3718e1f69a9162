"""Requests a broker core answers from its partitions' state at once, without purgatory: ListOffsets,
OffsetForLeaderEpoch, DeleteRecords and InitProducerId, for the server and the simulator alike.

Kafka's rules (REFERENCE 3, 8, 13): ListOffsets LATEST is the high watermark (the last stable offset for
READ_COMMITTED, the log end for a replica reading its own leader); EARLIEST is the log start with its epoch; a timestamp gives the first record at or after it;
MAX_TIMESTAMP (KIP-734) the first record with the largest timestamp; LATEST_TIERED -1. Only the leader answers,
and a leader epoch older than the partition's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. The debugging
replica id (-2) reads any replica's own log, as Kafka's ListOffsets allows; insync allows it for
OffsetForLeaderEpoch too, so that tools can read a replica's leader-epoch history, the part of KIP-966's
GetReplicaLogInfo a Kafka API can carry (`insync topics elect-leaders --unclean --dry-run`).
`ProducerIdAllocator` hands out ids unique across brokers and restarts without a coordinator: the broker id in
the top bits, the allocator's start time in milliseconds below, and a counter; when the counter wraps the start
time moves on by a millisecond (unique as long as a restart takes longer than the ids issued per ms, 256).
"""

from __future__ import annotations

from collections.abc import Mapping

from insync import errors
from insync.broker.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    HIGH_WATERMARK_OFFSET,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    READ_COMMITTED,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsResult,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsResult,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochResult,
)
from insync.broker.metadata import BrokerMetadata
from insync.errors import KafkaError, KafkaException
from insync.replication.log_view import LogView
from insync.replication.partition import Partition
from insync.types import UNDEFINED_EPOCH, UNKNOWN_OFFSET, BrokerId, LeaderEpoch, Offset, TopicPartition

NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP: the answer to a position, not a time
PRODUCER_COUNTER_BITS = 8
PRODUCER_TIME_BITS = 40


Partitions = Mapping[TopicPartition, Partition]


def _leader(partitions: Partitions, metadata: BrokerMetadata, tp: TopicPartition, current_leader_epoch: int,
            replica_id: int = CONSUMER_REPLICA_ID) -> Partition | KafkaError:
    partition = partitions.get(tp)
    if partition is None:
        known = metadata.registration(tp) is not None
        return errors.NOT_LEADER_OR_FOLLOWER if known else errors.UNKNOWN_TOPIC_OR_PARTITION
    if current_leader_epoch >= 0 and current_leader_epoch < partition.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    if current_leader_epoch > partition.leader_epoch:
        return errors.UNKNOWN_LEADER_EPOCH
    if not partition.is_leader and replica_id != DEBUGGING_REPLICA_ID:
        return errors.NOT_LEADER_OR_FOLLOWER
    return partition


def list_offsets(partitions: Partitions, metadata: BrokerMetadata, request: ListOffsetsRequest
                 ) -> ListOffsetsResponse:
    return ListOffsetsResponse(request.correlation_id, tuple(
        _list_offset(partitions, metadata, asked, request.replica_id, request.isolation_level)
        for asked in request.partitions))


def _list_offset(partitions: Partitions, metadata: BrokerMetadata, asked: ListOffsetsPartition,
                 replica_id: int, isolation_level: int) -> ListOffsetsResult:
    """Kafka 4.x's `Partition.fetchOffsetForTimestamp` for a broker without tiered storage. Consumers see up to the
    high watermark (READ_COMMITTED: the last stable offset), replicas up to the log end. While a new leader's high
    watermark lags behind its epoch's start, a consumer asking for the latest offset, or for a timestamp found only
    past what it may read, gets OFFSET_NOT_AVAILABLE (KIP-207): the answer could go back once the followers catch up."""
    tp, timestamp = asked.topic_partition, asked.timestamp
    partition = _leader(partitions, metadata, tp, asked.current_leader_epoch, replica_id)
    if isinstance(partition, KafkaError):
        return ListOffsetsResult(tp, partition)
    epoch, log = partition.leader_epoch, partition.log
    fetchable, lagging = partition.log_end_offset, False
    if replica_id == CONSUMER_REPLICA_ID:
        committed = isolation_level == READ_COMMITTED
        fetchable = partition.last_stable_offset if committed else partition.high_watermark
        lagging = partition.high_watermark_lagging
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):  # every segment is local
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, Offset(log.log_start_offset), _earliest_epoch(log))
    if timestamp == LATEST_TIMESTAMP:
        if lagging:
            return ListOffsetsResult(tp, errors.OFFSET_NOT_AVAILABLE)
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, Offset(fetchable), epoch)
    if timestamp == LATEST_TIERED_TIMESTAMP:  # nothing is tiered: Kafka answers offset and epoch -1
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, UNKNOWN_OFFSET, UNDEFINED_EPOCH)
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:  # another negative value (EARLIEST_PENDING_UPLOAD) finds nothing, as Kafka without tiered storage
        found = log.offset_for_timestamp(timestamp) if timestamp >= 0 else None
    if found is not None and found.offset >= fetchable and lagging:
        return ListOffsetsResult(tp, errors.OFFSET_NOT_AVAILABLE)
    if found is None or found.offset >= fetchable:
        return ListOffsetsResult(tp, errors.NONE, NO_TIMESTAMP, UNKNOWN_OFFSET, UNDEFINED_EPOCH)
    return ListOffsetsResult(tp, errors.NONE, found.timestamp, Offset(found.offset),
                             LeaderEpoch(found.leader_epoch))


def _earliest_epoch(log: LogView) -> LeaderEpoch:
    """The epoch of the log start offset's record (Kafka: the first leader-epoch entry, when it starts at or
    before the log start), or -1."""
    entries = log.leader_epoch_cache.epoch_entries
    return LeaderEpoch(entries[0][0]) if entries and entries[0][1] <= log.log_start_offset else UNDEFINED_EPOCH


def offset_for_leader_epoch(partitions: Partitions, metadata: BrokerMetadata,
                            request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(request.correlation_id, tuple(
        _end_offset_for_epoch(partitions, metadata, asked, request.replica_id) for asked in request.partitions))


def _end_offset_for_epoch(partitions: Partitions, metadata: BrokerMetadata,
                          asked: OffsetForLeaderEpochPartition, replica_id: int) -> OffsetForLeaderEpochResult:
    tp = asked.topic_partition
    partition = _leader(partitions, metadata, tp, asked.current_leader_epoch, replica_id)
    if isinstance(partition, KafkaError):
        return OffsetForLeaderEpochResult(tp, partition)
    epoch, end = partition.log.end_offset_for_epoch(asked.leader_epoch)
    return OffsetForLeaderEpochResult(tp, errors.NONE, LeaderEpoch(epoch), Offset(end))


def delete_records(partitions: Partitions, metadata: BrokerMetadata, request: DeleteRecordsRequest
                   ) -> DeleteRecordsResponse:
    results: list[DeleteRecordsResult] = []
    for tp, offset in request.partitions:
        partition = _leader(partitions, metadata, tp, -1)
        if isinstance(partition, KafkaError):
            results.append(DeleteRecordsResult(tp, partition))
            continue
        try:
            target = HIGH_WATERMARK_OFFSET if offset < 0 else offset
            log_start_offset = partition.delete_records_on_leader(target)
        except KafkaException as exc:  # OFFSET_OUT_OF_RANGE past the high watermark
            results.append(DeleteRecordsResult(tp, exc.error))
            continue
        results.append(DeleteRecordsResult(tp, errors.NONE, Offset(log_start_offset)))
    return DeleteRecordsResponse(request.correlation_id, tuple(results))


class ProducerIdAllocator:
    def __init__(self, broker_id: BrokerId, now_ms: int) -> None:
        assert 0 <= broker_id < 2 ** (63 - PRODUCER_TIME_BITS - PRODUCER_COUNTER_BITS)
        self.broker_id = broker_id
        self._time_ms = now_ms % 2**PRODUCER_TIME_BITS
        self._counter = 0

    def allocate(self, request: InitProducerIdRequest, now_ms: int) -> InitProducerIdResponse:
        """A new producer id at epoch 0, whatever id and epoch an idempotent producer sends: as Kafka's coordinator
        answers a null transactional id (an idempotent producer bumps its epoch itself, KIP-360). An id without an
        epoch, or an epoch without an id, is INVALID_REQUEST, as Kafka's KafkaApis checks first."""
        if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResponse(request.correlation_id, errors.INVALID_REQUEST)
        if self._counter >= 2**PRODUCER_COUNTER_BITS:
            self._time_ms = max(self._time_ms + 1, now_ms % 2**PRODUCER_TIME_BITS)
            self._counter = 0
        producer_id = ((self.broker_id << (PRODUCER_TIME_BITS + PRODUCER_COUNTER_BITS))
                       | (self._time_ms << PRODUCER_COUNTER_BITS) | self._counter)
        self._counter += 1
        return InitProducerIdResponse(request.correlation_id, errors.NONE, producer_id, 0)
