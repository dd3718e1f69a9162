"""The internal messages a broker core exchanges with clients, and the commands it gives its driver.

These are plain frozen dataclasses, not wire formats: the simulator passes them between nodes as they are, and
the asyncio server translates Kafka requests to and from them (`wire/`): Produce, Fetch, ListOffsets, Metadata,
DeleteRecords, InitProducerId and OffsetForLeaderEpoch. Follower fetches use `replication.messages`, the
controller conversation `controller.messages`. Every request carries a `correlation_id` the response echoes;
record data stays opaque `bytes` (v2 record batches) from producer to log to consumer. The queries answered at
once (`broker/queries.py`, REFERENCE 3, 8, 13) give one result per requested partition:
- ListOffsets: LATEST is the high watermark for consumers and the log end for a broker reading its own log;
  EARLIEST the log start; a time the first offset at or after it (-1 when none); no tiered storage, and the last
  stable offset is the high watermark (no transactions).
- OffsetForLeaderEpoch: the leader's (largest epoch <= requested, its end offset).
- DeleteRecords: the new `low_watermark`; InitProducerId: a new id at epoch 0, or a bumped epoch (v3+).
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.errors import KafkaError
from insync.protocol.control_records import AbortedTxn
from insync.types import (
    UNDEFINED_EPOCH,
    UNKNOWN_OFFSET,
    BrokerId,
    LeaderEpoch,
    Offset,
    Outgoing,
    TopicPartition,
)

# Who asks ListOffsets / OffsetForLeaderEpoch (Kafka's replica ids): a consumer, or a tool reading any log.
CONSUMER_REPLICA_ID = BrokerId(-1)
DEBUGGING_REPLICA_ID = BrokerId(-2)

# ListOffsets special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

HIGH_WATERMARK_OFFSET = Offset(-1)  # DeleteRecords: "up to the high watermark"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class CompleteAfter:
    """A follower fetch whose disk read takes `delay_ms`: call `BrokerCore.complete_read(token)` after it."""

    delay_ms: int
    token: int


Command = Outgoing | CompleteAfter


# Clients -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    correlation_id: int
    acks: int  # 0, 1 or -1 (all)
    timeout_ms: int
    partitions: tuple[tuple[TopicPartition, bytes], ...]
    from_client: bool = True  # False: a coordinator's (markers, transactional offset commits)


@dataclass(frozen=True, slots=True)
class PartitionProduceResult:
    topic_partition: TopicPartition
    error: KafkaError
    base_offset: Offset
    log_start_offset: Offset = Offset(-1)  # -1 where Kafka answers no log (see broker.produce)
    error_message: str | None = None  # INVALID_RECORD's words (KIP-467)
    record_errors: tuple[tuple[int, str], ...] = ()  # (index of the record in the batch, why)


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    correlation_id: int
    results: tuple[PartitionProduceResult, ...]


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    correlation_id: int
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic_partition: TopicPartition
    leader: BrokerId
    leader_epoch: LeaderEpoch
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    correlation_id: int
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True, slots=True)
class ConsumerFetchRequest:
    """A consumer's fetch: reads committed data only (below the high watermark). `max_bytes` bounds the whole
    response and `partition_max_bytes` (one per partition, in order; empty: no bound but `max_bytes`) each
    partition's data, as Kafka's Fetch request does; the first partition with data may exceed both by one batch
    (KIP-74). Unless `leader_only` (Kafka's `fetchOnlyLeader`: a request without client metadata, before v11), a
    follower replica answers too, below its own high watermark (KIP-392)."""

    correlation_id: int
    partitions: tuple[tuple[TopicPartition, Offset], ...]
    max_wait_ms: int
    max_bytes: int
    partition_max_bytes: tuple[int, ...] = ()
    leader_only: bool = True
    isolation_level: int = READ_UNCOMMITTED  # READ_COMMITTED reads below the last stable offset


@dataclass(frozen=True, slots=True)
class ConsumerFetchPartition:
    topic_partition: TopicPartition
    error: KafkaError
    high_watermark: Offset
    log_start_offset: Offset
    records: bytes
    last_stable_offset: Offset = UNKNOWN_OFFSET
    aborted_transactions: tuple[AbortedTxn, ...] | None = None  # None: not asked (read_uncommitted)


@dataclass(frozen=True, slots=True)
class ConsumerFetchResponse:
    correlation_id: int
    partitions: tuple[ConsumerFetchPartition, ...]


# Queries answered at once: ListOffsets -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    topic_partition: TopicPartition
    timestamp: int
    current_leader_epoch: LeaderEpoch = UNDEFINED_EPOCH  # -1: the client does not check


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    correlation_id: int
    replica_id: BrokerId
    isolation_level: int
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    topic_partition: TopicPartition
    error: KafkaError
    timestamp: int = -1
    offset: Offset = UNKNOWN_OFFSET
    leader_epoch: LeaderEpoch = UNDEFINED_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    correlation_id: int
    results: tuple[ListOffsetsResult, ...]


# OffsetForLeaderEpoch ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochPartition:
    topic_partition: TopicPartition
    current_leader_epoch: LeaderEpoch
    leader_epoch: LeaderEpoch


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequest:
    correlation_id: int
    replica_id: BrokerId  # CONSUMER_REPLICA_ID for clients, DEBUGGING_REPLICA_ID from v2 requests
    partitions: tuple[OffsetForLeaderEpochPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResult:
    topic_partition: TopicPartition
    error: KafkaError
    leader_epoch: LeaderEpoch = UNDEFINED_EPOCH
    end_offset: Offset = UNKNOWN_OFFSET


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponse:
    correlation_id: int
    results: tuple[OffsetForLeaderEpochResult, ...]


# DeleteRecords -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    correlation_id: int
    timeout_ms: int
    partitions: tuple[tuple[TopicPartition, Offset], ...]


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    topic_partition: TopicPartition
    error: KafkaError
    low_watermark: Offset = UNKNOWN_OFFSET


@dataclass(frozen=True, slots=True)
class DeleteRecordsResponse:
    correlation_id: int
    results: tuple[DeleteRecordsResult, ...]


# InitProducerId ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    correlation_id: int
    transaction_timeout_ms: int
    producer_id: int = NO_PRODUCER_ID  # v3+: an existing producer asking for an epoch bump
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    correlation_id: int
    error: KafkaError
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
