"""The internal messages a broker core exchanges with clients and with the controller.

These are plain frozen dataclasses, not wire formats: the simulator passes them between nodes as they are, and
the asyncio server (a later issue) translates Kafka requests (Produce 0, Fetch 1, Metadata 3,
BrokerRegistration 62, BrokerHeartbeat 63, AlterPartition 56) to and from them at its boundary. Follower fetches
between brokers use `replication.messages.FetchRequest/FetchResponse`.

Every request carries a `correlation_id` chosen by the sender; the response echoes it, as on Kafka's wire.
Record data stays opaque `bytes` (one or more v2 record batches) from producer to log to consumer.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.controller.controller import AlterPartitionItemResult
from insync.controller.replication_control import AlterPartitionItem
from insync.controller.unclean_recovery import ReplicaLogReport
from insync.errors import KafkaError
from insync.metadata.records import Record
from insync.types import BrokerEpoch, BrokerId, LeaderEpoch, Offset, TopicPartition

# The controller's address in `Outgoing.destination`; brokers are addressed by their integer id, clients by name.
CONTROLLER = "controller"

Address = int | str


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message the core wants sent; the driver (server or simulator) delivers it."""

    destination: Address
    message: object


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
    """A consumer's fetch: reads committed data only (below the high watermark)."""

    correlation_id: int
    partitions: tuple[tuple[TopicPartition, Offset], ...]
    max_wait_ms: int
    max_bytes: int


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


# Controller ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    correlation_id: int
    broker_id: BrokerId
    incarnation_id: int  # new on every start, so the controller can tell a restart from a retry
    previous_broker_epoch: int = -1  # KIP-966: the epoch of a last life that ended cleanly, else -1


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    correlation_id: int
    error: KafkaError
    broker_epoch: BrokerEpoch


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    correlation_id: int
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    metadata_offset: int  # the last metadata record this broker applied
    want_shutdown: bool = False  # controlled shutdown: move my leaderships away, then let me go


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    correlation_id: int
    error: KafkaError
    is_fenced: bool
    published_offset: int  # the controller's published metadata offset: a broker behind it fetches
    should_shut_down: bool = False  # controlled shutdown done: the broker leads nothing and is fenced


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    correlation_id: int
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    items: tuple[AlterPartitionItem, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    correlation_id: int
    error: KafkaError
    results: tuple[AlterPartitionItemResult, ...]  # per partition, in item order


@dataclass(frozen=True, slots=True)
class MetadataFetchRequest:
    """A broker asks for the published metadata records after `from_offset`."""

    correlation_id: int
    broker_id: BrokerId
    from_offset: int
    max_records: int


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    """Published metadata records `(offset, record)`, as the answer to a fetch or pushed on publication."""

    correlation_id: int
    records: tuple[tuple[int, Record], ...]
    published_offset: int


@dataclass(frozen=True, slots=True)
class ReplicaLogReportRequest:
    """A broker's logs of the offline partitions it hosts, sent with each heartbeat while there are any (KIP-966's
    GetReplicaLogInfo, pushed instead of asked for: brokers connect to the controller, not the reverse). No
    answer: the next heartbeat's report replaces it."""

    correlation_id: int  # the heartbeat's it was sent with
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    reports: tuple[ReplicaLogReport, ...]
