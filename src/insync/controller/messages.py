"""The messages brokers and the controller exchange: registration, heartbeats, AlterPartition, metadata fetches.

Plain frozen dataclasses, not wire formats: the simulator passes them between nodes as they are, and the asyncio
drivers translate Kafka's BrokerRegistration 62, BrokerHeartbeat 63, AlterPartition 56 and Fetch 1 of
`__cluster_metadata` to and from them (`wire.controller_apis`, `wire.metadata_log`). Brokers build requests in
`broker.controller_channel`; the controller node core (`controller.node`) answers them.

An AlterPartition request carries one `controller.replication_control.AlterPartitionData` per partition (Kafka's
`AlterPartitionRequestData.PartitionData`: by topic id, as on the wire) and is answered with one
`controller.controller.AlterPartitionDataResult` each. The leader's own proposal, by topic-partition, is
`replication.messages.AlterPartitionItem`.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.controller.unclean_recovery import ReplicaLogReport
from insync.errors import KafkaError
from insync.metadata.records import Record
from insync.types import BrokerEpoch, BrokerId

# The controller's address in `Outgoing.destination`; brokers are addressed by their integer id.
CONTROLLER = "controller"


# Requests and responses ----------------------------------------------------------------------------------------------


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
class Registration:
    """A registration as the controller receives it: the broker's message, plus what its listener learnt (the
    Kafka request's incarnation UUID, listener and rack; the simulator fills these in for its brokers)."""

    request: BrokerRegistrationRequest
    incarnation_id: str  # the UUID's text, the form the controller stores
    host: str
    port: int
    rack: str | None
    error: KafkaError  # NONE, or why the controller listener refuses it without asking the controller
    listeners: tuple[str, ...] = ()  # every advertised listener, NAME://host:port; the first is host and port


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    correlation_id: int
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    metadata_offset: int  # the last metadata record this broker applied
    want_shutdown: bool = False  # controlled shutdown: move my leaderships away, then let me go
    offline_log_dirs: tuple[str, ...] = ()  # ids of its failed log directories (KIP-858)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat as the controller receives it: the broker's message, plus Kafka's `want_fence` flag."""

    request: BrokerHeartbeatRequest  # carries want_shutdown
    want_fence: bool


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    correlation_id: int
    error: KafkaError
    is_fenced: bool
    published_offset: int  # the controller's published metadata offset: a broker behind it fetches
    should_shut_down: bool = False  # controlled shutdown done: the broker leads nothing and is fenced
    is_caught_up: bool = False  # Kafka's flag, on the wire only: brokers go by `is_fenced`


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    correlation_id: int
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    items: tuple[AlterPartitionData, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    correlation_id: int
    error: KafkaError
    results: tuple[AlterPartitionDataResult, ...]  # per partition, in item order


@dataclass(frozen=True, slots=True)
class MetadataFetchRequest:
    """A broker asks for the published metadata records after `from_offset`."""

    correlation_id: int
    broker_id: BrokerId
    from_offset: int
    max_records: int
    max_wait_ms: int  # a long poll: the controller parks the fetch until it publishes past `from_offset`


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    """Published metadata records `(offset, record)`: the answer to a fetch, at once or, for a long poll, when the
    controller publishes past its offset (or its wait ends, with no records)."""

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
