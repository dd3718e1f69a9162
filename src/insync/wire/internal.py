"""Internal requests and responses for the APIs that `broker/messages.py` does not carry yet.

Like the broker's own messages these are frozen dataclasses, not wire formats: the translators in this package
produce the requests from Kafka requests of any supported version and turn the responses back into Kafka
responses. The broker core answers each request with the matching response, one result per requested
partition (or topic), in any order; a partition the core does not know gets its own error in its result.

What the core is expected to do, following Kafka (REFERENCE 3, 8, 13):
- ListOffsets: `timestamp` is a time in ms or one of the special values below. LATEST is the high watermark for
  consumers (`replica_id == CONSUMER_REPLICA_ID`) and the log end offset for a broker reading its own log
  (`replica_id >= 0` or DEBUGGING_REPLICA_ID); EARLIEST is the log start offset; a time gives the first offset
  whose timestamp is >= it (offset -1 when none). Without tiered storage EARLIEST_LOCAL is EARLIEST and
  LATEST_TIERED / EARLIEST_PENDING_UPLOAD answer offset -1. With `isolation_level` READ_COMMITTED the answer
  is bounded by the last stable offset, which is the high watermark here (no transactions).
- OffsetForLeaderEpoch: the leader's (largest epoch <= requested, its end offset), REFERENCE 8.
- DeleteRecords: moves the log start offset to `offset` (HIGH_WATERMARK_OFFSET: to the high watermark) and
  answers the new `low_watermark`; OFFSET_OUT_OF_RANGE above the high watermark.
- InitProducerId: a new producer id with epoch 0, or, when `producer_id`/`producer_epoch` are given (v3+),
  a bumped epoch for that producer (INVALID_PRODUCER_EPOCH when the epoch does not match).
- CreateTopics/DeleteTopics: each topic is one `Controller.create_topic` / `delete_topic` call on the active
  controller; a `KafkaException` becomes that topic's error and message.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.types import UNDEFINED_EPOCH, UNKNOWN_OFFSET, BrokerId, LeaderEpoch, Offset, TopicPartition

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


# ListOffsets ---------------------------------------------------------------------------------------------


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


# CreateTopics / DeleteTopics -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic to create, defaults already applied (-1 on the wire means the broker's default)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]  # topic-level overrides, in request order
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partition, replicas) given by the client


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    correlation_id: int
    timeout_ms: int
    validate_only: bool
    topics: tuple[NewTopic, ...]


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: KafkaError
    message: str | None = None
    topic_id: str | None = None  # the image's string form
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    correlation_id: int
    results: tuple[CreateTopicResult, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    correlation_id: int
    timeout_ms: int
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str
    error: KafkaError
    message: str | None = None
    topic_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    correlation_id: int
    results: tuple[DeleteTopicResult, ...]


def created(topic: NewTopic, topic_id: str) -> CreateTopicResult:
    """The success result for `topic` (what the lead's handler answers after `Controller.create_topic`)."""
    return CreateTopicResult(topic.name, errors.NONE, None, topic_id, topic.num_partitions,
                             topic.replication_factor)
