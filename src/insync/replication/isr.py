"""Who leaves the ISR and why (`IsrPolicy`), and the ISR state of one partition as a closed set.

Seed 001 is the reason for the time-based rule: a follower is out of sync when it has not caught up to the
leader's log end within `replica.lag.time.max.ms` (`ReplicaState`): `stuck` (no fetch) or `slow` (never reaching
the end). The 0.8.2 count rule stays behind `replica.lag.max.messages` > 0 so its flapping can be shown: it
wrongly removes healthy followers whenever one batch is larger than the setting (`messages`). KIP-501's pending
reads may keep a follower the time rule would remove (`kept_by_pending_read`), but not past the lag time.
A follower joins (`propose_expand`, REFERENCE.md 2) when its log end reached the high watermark and the start of
the leader's epoch and its broker is eligible; a read longer than the lag time brings nobody back. ISR states:
`Committed`, `PendingExpand` or `PendingShrink`; `isr` is the last committed ISR (acks=all admission, min ISR)
and `maximal_isr` the largest that may be in force (high watermark, acks=all completion), so a change is assumed
only in the safe direction. Every transition is a pure function, state in, next state and what to tell the
controller out (`propose_*`, `after_alter_partition`, `from_metadata`); `Partition` applies it in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.events import ShrinkReason
from insync.replication.messages import AlterPartitionItem, AlterPartitionResult
from insync.replication.replica_state import ReplicaState
from insync.replication.results import AlterOutcome
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch

# AlterPartition errors after which the controller guarantees the request was not applied: back to the last
# committed ISR, so the next check proposes again (Kafka's handleAlterPartitionError).
_ROLL_BACK = frozenset({errors.INELIGIBLE_REPLICA, errors.BY_NAME["OPERATION_NOT_ATTEMPTED"]})
# Errors meaning this broker's view is stale. The request may have been applied by an earlier attempt, so the
# change stays pending (safe: the maximal ISR is used) until metadata with a newer partition epoch arrives.
_AWAIT_METADATA = frozenset({errors.FENCED_LEADER_EPOCH, errors.INVALID_UPDATE_VERSION,
                             errors.UNKNOWN_TOPIC_OR_PARTITION, errors.UNKNOWN_TOPIC_ID, errors.INVALID_REQUEST,
                             errors.NEW_LEADER_ELECTED})


@dataclass(frozen=True, slots=True)
class Removal:
    """One follower leaving the ISR, with what the leader knew of it (the `removed` entries of `isr_shrink`).
    `fetch_pending_since_ms`: when the oldest fetch from it that the leader was still serving arrived (None: none
    was), whatever KIP-501's flag says; the leader fills it in (`Leader.out_of_sync_replicas`)."""

    broker: BrokerId
    leo: Offset
    last_caught_up_ms: int
    last_fetch_ms: int
    reason: ShrinkReason
    fetch_pending_since_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "leo": self.leo, "last_caught_up_ms": self.last_caught_up_ms,
                "last_fetch_ms": self.last_fetch_ms, "reason": str(self.reason),
                "fetch_pending": self.fetch_pending_since_ms is not None,
                "fetch_pending_since_ms": self.fetch_pending_since_ms}


@dataclass(frozen=True, slots=True)
class KeptByPendingRead:
    """A follower the time rule would remove, kept because a read for it is still being served (KIP-501)."""

    broker: BrokerId
    pending_since_ms: int


@dataclass(frozen=True, slots=True)
class IsrCheck:
    removals: tuple[Removal, ...] = ()
    kept_by_pending_read: tuple[KeptByPendingRead, ...] = ()


@dataclass(frozen=True, slots=True)
class IsrPolicy:
    replica_lag_time_max_ms: int = 30_000
    replica_lag_max_messages: int = 0  # 0: the legacy count rule is off

    def __post_init__(self) -> None:
        assert self.replica_lag_time_max_ms > 0, self
        assert self.replica_lag_max_messages >= 0, self

    @classmethod
    def from_config(cls, config: BrokerConfig) -> IsrPolicy:
        return cls(config.replication.lag_time_max_ms, config.replication.lag_max_messages)

    def out_of_sync_replicas(self, now_ms: int, leader_log_end_offset: Offset,
                             replicas: Iterable[ReplicaState]) -> IsrCheck:
        """Check the given followers (the ISR members other than the leader) against both rules."""
        assert leader_log_end_offset >= 0
        removals: list[Removal] = []
        kept: list[KeptByPendingRead] = []
        for replica in replicas:
            reason = self._time_reason(now_ms, leader_log_end_offset, replica)
            since = replica.pending_read_since_ms(now_ms, self.replica_lag_time_max_ms)
            if reason is not None and since is not None:
                kept.append(KeptByPendingRead(replica.broker_id, since))
                reason = None
            if reason is None and self._behind_by_count(leader_log_end_offset, replica):
                reason = ShrinkReason.MESSAGES
            if reason is not None:
                removals.append(Removal(replica.broker_id, replica.log_end_offset, replica.last_caught_up_ms,
                                        replica.last_heard_ms, reason))
        return IsrCheck(tuple(removals), tuple(kept))

    def _time_reason(self, now_ms: int, leader_log_end_offset: Offset, replica: ReplicaState) -> ShrinkReason | None:
        if replica.lag_caught_up(now_ms, leader_log_end_offset, self.replica_lag_time_max_ms):
            return None
        if now_ms - replica.last_heard_ms > self.replica_lag_time_max_ms:
            return ShrinkReason.STUCK
        return ShrinkReason.SLOW

    def _behind_by_count(self, leader_log_end_offset: Offset, replica: ReplicaState) -> bool:
        # As 0.8.2: a follower whose end offset the leader does not know yet is never removed by count.
        return (self.replica_lag_max_messages > 0 and replica.log_end_offset >= 0
                and leader_log_end_offset - replica.log_end_offset > self.replica_lag_max_messages)


# --- ISR state ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Committed:
    isr: tuple[BrokerId, ...]

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PendingExpand:
    isr: tuple[BrokerId, ...]
    new_in_sync_replica: BrokerId
    proposal: AlterPartitionItem

    def __post_init__(self) -> None:
        assert self.new_in_sync_replica not in self.isr, self
        assert self.proposal.new_isr == (*self.isr, self.new_in_sync_replica), self

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        return (*self.isr, self.new_in_sync_replica)

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PendingShrink:
    isr: tuple[BrokerId, ...]
    removals: tuple[Removal, ...]
    proposal: AlterPartitionItem

    def __post_init__(self) -> None:
        assert self.removals and all(r.broker in self.isr for r in self.removals), self
        assert set(self.proposal.new_isr) == set(self.isr) - {r.broker for r in self.removals}, self

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return True


IsrState = Committed | PendingExpand | PendingShrink


# --- Transitions: state in, the next state and the proposal out -----------------------------------------------

Propose = Callable[[tuple[BrokerId, ...]], AlterPartitionItem]  # the AlterPartition item asking for a new ISR


def propose_shrink(state: IsrState, check: IsrCheck, propose: Propose) -> tuple[IsrState, AlterPartitionItem | None]:
    """Committed -> PendingShrink: propose the committed ISR without the members `check` removes. Nothing
    changes while a change is in flight or when nobody is out of sync."""
    if state.is_inflight or not check.removals:
        return state, None
    removed = {removal.broker for removal in check.removals}
    proposal = propose(tuple(broker for broker in state.isr if broker not in removed))
    return PendingShrink(state.isr, check.removals, proposal), proposal


def propose_expand(state: IsrState, policy: IsrPolicy, follower: ReplicaState, *, now_ms: int, fetch_time_ms: int,
           high_watermark: Offset, leader_epoch_start_offset: Offset, is_eligible: Callable[[BrokerId], bool],
           propose: Propose) -> tuple[IsrState, AlterPartitionItem | None]:
    """Committed -> PendingExpand: the expansion rule (see the module docstring) for `follower` just after a
    successful fetch that arrived at `fetch_time_ms`. Nothing changes while a change is in flight."""
    assert now_ms >= fetch_time_ms and leader_epoch_start_offset >= 0, (now_ms, fetch_time_ms)
    replica = follower.broker_id
    fresh = now_ms - fetch_time_ms <= policy.replica_lag_time_max_ms
    if not fresh or state.is_inflight or replica in state.isr:
        return state, None
    if follower.log_end_offset < high_watermark or follower.log_end_offset < leader_epoch_start_offset:
        return state, None
    if not is_eligible(replica):
        return state, None
    proposal = propose((*state.isr, replica))
    return PendingExpand(state.isr, replica, proposal), proposal


def after_alter_partition(state: IsrState, item: AlterPartitionItem, result: AlterPartitionResult,
                          leader_epoch: LeaderEpoch, partition_epoch: PartitionEpoch) -> tuple[IsrState, AlterOutcome]:
    """The controller answered `item`: commit (the caller takes `result.partition_epoch`), roll back, keep
    waiting for metadata, or send it again (an unexpected error such as a lost connection)."""
    if isinstance(state, Committed) or state.proposal != item:
        return state, AlterOutcome.IGNORED
    if result.error == errors.NONE:
        if result.leader_epoch != leader_epoch or result.partition_epoch < partition_epoch:
            return state, AlterOutcome.IGNORED  # stale: metadata will bring the truth
        return Committed(result.isr), AlterOutcome.COMMITTED
    if result.error in _ROLL_BACK:
        return Committed(state.isr), AlterOutcome.ROLLED_BACK
    if result.error in _AWAIT_METADATA:
        return state, AlterOutcome.AWAITING_METADATA
    return state, AlterOutcome.RETRY


def from_metadata(isr: tuple[BrokerId, ...]) -> Committed:
    """The ISR metadata names, in any state: newer metadata resolves any pending change."""
    return Committed(isr)


def committed_change(previous: IsrState, state: IsrState,
                     leader_epoch: LeaderEpoch) -> PendingExpand | PendingShrink | None:
    """The change `previous` proposed in `leader_epoch`, when `state` commits it (from the controller's answer
    or from metadata); None for anything else, a roll back included."""
    if isinstance(previous, Committed) or not isinstance(state, Committed):
        return None
    if previous.proposal.leader_epoch != leader_epoch or set(previous.proposal.new_isr) != set(state.isr):
        return None
    return previous
