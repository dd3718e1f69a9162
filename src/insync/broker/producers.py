"""DescribeProducers (KIP-664): the idempotent producers a replica knows of, per partition, answered at once.

Kafka's `KafkaApis.handleDescribeProducersRequest` and `Partition.activeProducerState`: an illegal topic name is
INVALID_TOPIC_EXCEPTION (with the rule it breaks), a topic the metadata does not know UNKNOWN_TOPIC_OR_PARTITION,
as is a partition it does not know; a known partition this broker hosts no replica of is NOT_LEADER_OR_FOLLOWER,
and one whose log is offline KAFKA_STORAGE_ERROR. Any replica answers from its own producer state, as Kafka's
does (admin clients ask the leader unless told a broker; followers track producers too, so a new leader answers
retries as the old one would). Per producer: its id and epoch, the last sequence it wrote, and the largest
timestamp of its last batch (read back from the log: -1 when that batch cannot be read), the coordinator epoch
of its last transaction marker, and the first offset of its open transaction (-1 outside one), which
`kafka-transactions find-hanging` and `abort` read.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.broker.metadata import BrokerMetadata
from insync.broker.queries import Partitions
from insync.controller.replication_control import check_topic_name
from insync.errors import KafkaError, KafkaException
from insync.replication.producer_state import ProducerEntry
from insync.storage.log import Log
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class DescribeProducersRequest:
    correlation_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class PartitionProducers:
    topic_partition: TopicPartition
    error: KafkaError
    message: str | None = None
    producers: tuple[ActiveProducer, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeProducersResponse:
    correlation_id: int
    results: tuple[PartitionProducers, ...]


def describe_producers(log_manager: LogManager, partitions: Partitions, metadata: BrokerMetadata,
                       request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(request.correlation_id, tuple(
        _partition_producers(log_manager, partitions, metadata, tp) for tp in request.partitions))


def _partition_producers(log_manager: LogManager, partitions: Partitions, metadata: BrokerMetadata,
                         tp: TopicPartition) -> PartitionProducers:
    try:
        check_topic_name(tp.topic)
    except KafkaException as exc:
        return PartitionProducers(tp, exc.error, exc.detail)
    partition = partitions.get(tp)
    if partition is None:
        known = metadata.registration(tp) is not None
        return PartitionProducers(tp, errors.NOT_LEADER_OR_FOLLOWER if known else errors.UNKNOWN_TOPIC_OR_PARTITION)
    log = log_manager.get(tp)
    if log is None or log.offline:
        return PartitionProducers(tp, errors.KAFKA_STORAGE_ERROR, f"the log of {tp} is offline")
    table = partition.producer_state
    return PartitionProducers(tp, errors.NONE, producers=tuple(
        ActiveProducer(producer_id, entry.producer_epoch, entry.last_sequence, _last_timestamp(log, entry),
                       entry.coordinator_epoch, _or_none(table.transactions.open_transaction(producer_id)))
        for producer_id, entry in table.entries()))


def _or_none(offset: int | None) -> int:
    return -1 if offset is None else offset


def _last_timestamp(log: Log, entry: ProducerEntry) -> int:
    """The max timestamp of the producer's last batch, which Kafka keeps in its producer state: here its header
    is read back (a producer's batches all lie in the log, `ProducerStateTable.drop_below`)."""
    if not entry.batches:
        return NO_TIMESTAMP
    try:
        header = log.batch_header(entry.batches[-1].last_offset)
    except KafkaException:  # an I/O error
        return NO_TIMESTAMP
    return NO_TIMESTAMP if header is None else header.max_timestamp
