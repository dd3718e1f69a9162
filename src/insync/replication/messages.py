"""The messages replication exchanges: follower fetches between brokers, and ISR proposals to the controller.

These are internal frozen dataclasses, not wire formats. A `FetchRequest` mirrors the fields of Kafka's Fetch
v12+ that replication needs (`replica_id`, `max_wait_ms`, `min_bytes`, `max_bytes`, and per partition
`fetch_offset`, `current_leader_epoch`, `last_fetched_epoch`, `log_start_offset`, `partition_max_bytes`), and
the follower's broker epoch (`replica_epoch`, Fetch v15's `ReplicaState.ReplicaEpoch`, KIP-903); the wire layer
translates Kafka Fetch v4-v17 to and from them, and the simulator passes them as they are.
Unknown offsets are -1 as on Kafka's wire; an unknown epoch is -1 (`UNDEFINED_EPOCH`).

`AlterPartitionItem` is a leader's proposed ISR change (Kafka's AlterPartition, KIP-497), with the broker epoch
the leader knows of each member from its fetches (AlterPartition v3's `new_isr_with_epochs`, KIP-903), and
`AlterPartitionResult` the controller's per-partition answer; the broker carries them to and from the
controller in its own request envelope.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.types import (
    UNDEFINED_EPOCH,
    UNKNOWN_BROKER_EPOCH,
    UNKNOWN_OFFSET,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Offset,
    PartitionEpoch,
    TopicPartition,
)

NO_SESSION = 0  # Kafka's INVALID_SESSION_ID
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSION_EPOCH_MAX = 2**31 - 1


def next_session_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: after the largest int comes 1 (0 only ever opens a session)."""
    assert epoch >= 0, epoch
    return 1 if epoch == SESSION_EPOCH_MAX else epoch + 1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The leader's answer for a follower's last fetched epoch: the largest epoch <= it, and where it ends."""

    epoch: LeaderEpoch
    end_offset: Offset


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    topic_partition: TopicPartition
    fetch_offset: Offset
    current_leader_epoch: LeaderEpoch
    last_fetched_epoch: LeaderEpoch  # UNDEFINED_EPOCH: no truncation check (an empty follower log)
    log_start_offset: Offset  # the follower's, so the leader knows it
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    correlation_id: int
    replica_id: BrokerId
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FetchRequestPartition, ...]
    replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH  # the follower's broker epoch; -1: not given
    isolation_level: int = 0  # a consumer's READ_COMMITTED (1) or READ_UNCOMMITTED (0, what followers send)
    rack_id: str | None = None  # the client metadata of v11+ (KIP-392); None: an older version, which has none
    # The incremental fetch session (KIP-227): NO_SESSION/FINAL_EPOCH is a full fetch outside any session; epoch
    # INITIAL_EPOCH asks the leader for a new session; later epochs list only what changed and what is forgotten.
    session_id: int = NO_SESSION
    session_epoch: int = FINAL_EPOCH
    forgotten: tuple[TopicPartition, ...] = ()

    def partition(self, topic_partition: TopicPartition) -> FetchRequestPartition | None:
        for requested in self.partitions:
            if requested.topic_partition == topic_partition:
                return requested
        return None


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    """One partition of a fetch response. On success the offsets are those the leader captured before its
    read (KAFKA-7104); with OFFSET_OUT_OF_RANGE they are the leader's current ones, which the follower needs
    to decide where to restart. `log_end_offset` is insync's addition (-1 when the leader did not say)."""

    topic_partition: TopicPartition
    error: KafkaError
    high_watermark: Offset = UNKNOWN_OFFSET
    log_start_offset: Offset = UNKNOWN_OFFSET
    log_end_offset: Offset = UNKNOWN_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    records: bytes = b""

    def __post_init__(self) -> None:
        assert self.diverging_epoch is None or self.error == errors.NONE, self
        assert not self.records or self.error == errors.NONE, "records come only with success"


@dataclass(frozen=True, slots=True)
class FetchResponse:
    correlation_id: int
    error: KafkaError  # top level: when not NONE, `partitions` is empty and every partition backs off
    partitions: tuple[FetchPartitionData, ...]
    session_id: int = NO_SESSION  # the leader's session for the follower's next fetches; NO_SESSION: none


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """A leader's proposal: set the ISR of `topic_partition` to `new_isr`, valid only if the controller's
    leader epoch and partition epoch still equal the ones given here."""

    topic_partition: TopicPartition
    leader_id: BrokerId
    leader_epoch: LeaderEpoch
    partition_epoch: PartitionEpoch
    new_isr: tuple[BrokerId, ...]
    # The broker epoch of each member of `new_isr`, in order (-1: unknown, the controller does not check it);
    # the leader's own is -1 here, since a partition does not know its broker's epoch: the broker fills it in.
    new_isr_broker_epochs: tuple[BrokerEpoch, ...] = ()

    def __post_init__(self) -> None:
        assert self.leader_id in self.new_isr, "a leader never proposes an ISR without itself"
        assert len(set(self.new_isr)) == len(self.new_isr), self.new_isr
        assert not self.new_isr_broker_epochs or len(self.new_isr_broker_epochs) == len(self.new_isr), self


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """The controller's answer for one item: on NONE, the committed state (possibly the same partition epoch
    when the change was already in place); on an error, the other fields are not meaningful."""

    topic_partition: TopicPartition
    error: KafkaError
    leader_id: BrokerId = BrokerId(-1)
    leader_epoch: LeaderEpoch = UNDEFINED_EPOCH
    partition_epoch: PartitionEpoch = PartitionEpoch(-1)
    isr: tuple[BrokerId, ...] = ()
