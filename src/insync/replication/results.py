"""What a `Partition` hands back to its driver: append results, follower reads and their answers, and the
outcome of an ISR proposal. Plain frozen values, so the broker and the simulator can keep and compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from insync.replication.messages import AlterPartitionItem, FetchPartitionData
from insync.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, LeaderEpoch, Offset


@dataclass(frozen=True, slots=True)
class ProduceWait:
    """What an acks=all produce waits for: the high watermark at `required_offset` within `leader_epoch`."""

    required_offset: Offset
    leader_epoch: LeaderEpoch


@dataclass(frozen=True, slots=True)
class LeaderAppendResult:
    first_offset: Offset
    last_offset: Offset
    record_count: int
    wait: ProduceWait
    high_watermark_advanced: bool


@dataclass(frozen=True, slots=True)
class FollowerRead:
    """A follower fetch between its two halves: what the leader captured before reading the log."""

    replica_id: BrokerId
    leader_epoch: LeaderEpoch
    read_id: int
    was_pending_read: bool  # registered under KIP-501
    fetch_offset: Offset
    follower_log_start_offset: Offset
    fetch_time_ms: int
    high_watermark: Offset
    log_start_offset: Offset
    log_end_offset: Offset
    # The re-read of a fetch woken from the purgatory: its first read updated the follower's state, this one only
    # answers (Kafka's readFromPurgatory).
    from_purgatory: bool = False
    replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH  # the follower's broker epoch the fetch came with (KIP-903)


@dataclass(frozen=True, slots=True)
class FollowerFetchResult:
    data: FetchPartitionData
    alter_partition: AlterPartitionItem | None = None  # an ISR expansion to send to the controller
    high_watermark_advanced: bool = False  # delayed produces may complete


class AlterOutcome(StrEnum):
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    AWAITING_METADATA = "awaiting_metadata"
    RETRY = "retry"  # send the same item again
    IGNORED = "ignored"  # not the change in flight, or a stale answer


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    outcome: AlterOutcome
    high_watermark_advanced: bool = False
