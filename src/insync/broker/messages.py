"""The internal messages a broker core exchanges with clients, and the commands it gives its driver.

These are plain frozen dataclasses, not wire formats: the simulator passes them between nodes as they are, and
the asyncio server translates Kafka requests (Produce 0, Fetch 1, Metadata 3) to and from them at its boundary.
Follower fetches between brokers use `replication.messages.FetchRequest/FetchResponse`, the conversation with the
controller `controller.messages`.

Every request carries a `correlation_id` chosen by the sender; the response echoes it, as on Kafka's wire.
Record data stays opaque `bytes` (one or more v2 record batches) from producer to log to consumer.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.errors import KafkaError
from insync.types import BrokerId, LeaderEpoch, Offset, Outgoing, TopicPartition


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


@dataclass(frozen=True, slots=True)
class PartitionProduceResult:
    topic_partition: TopicPartition
    error: KafkaError
    base_offset: Offset


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
    (KIP-74)."""

    correlation_id: int
    partitions: tuple[tuple[TopicPartition, Offset], ...]
    max_wait_ms: int
    max_bytes: int
    partition_max_bytes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerFetchPartition:
    topic_partition: TopicPartition
    error: KafkaError
    high_watermark: Offset
    log_start_offset: Offset
    records: bytes


@dataclass(frozen=True, slots=True)
class ConsumerFetchResponse:
    correlation_id: int
    partitions: tuple[ConsumerFetchPartition, ...]
