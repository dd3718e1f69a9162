"""The ISR of one partition as its leader keeps it: the one place its `IsrState` changes, and what follows.

A leader proposes a change (`shrink` on the isr-expiration check, `expand` after a follower's fetch) by moving to
PendingShrink / PendingExpand through the pure transitions of `isr.py` and returning the `AlterPartitionItem` to
send; `enter` applies every state, proposed, answered or from metadata. A change this leader proposed in its
current epoch is reported when it commits (an `isr_shrink` or `isr_expand` event and Kafka's log line), and the
health that follows the committed ISR (under-replicated, under min ISR) is reported as it flips. What the ISR
needs of the partition while it leads comes in a `Lead`, taken when the partition calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from insync import kafkalog
from insync.events import EventType
from insync.replication.isr import (
    Committed,
    IsrPolicy,
    IsrState,
    PendingExpand,
    PendingShrink,
    committed_change,
    propose_expand,
    propose_shrink,
)
from insync.replication.leader import Leader
from insync.replication.log_view import LogView
from insync.replication.messages import AlterPartitionItem
from insync.replication.replica_state import ReplicaState
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch, TopicPartition

logger = logging.getLogger(kafkalog.PARTITION_LOGGER)


def isr_text(isr: Sequence[int]) -> str:
    return ",".join(str(broker) for broker in isr)


@dataclass(frozen=True, slots=True)
class Lead:
    """The partition while this broker leads it, as the ISR needs it."""

    leader: Leader
    leader_epoch: LeaderEpoch
    partition_epoch: PartitionEpoch
    replicas: tuple[BrokerId, ...]
    high_watermark: Offset
    min_isr: int  # min(min.insync.replicas, replication factor)
    policy: IsrPolicy


class PartitionIsr:
    def __init__(self, topic_partition: TopicPartition, broker_id: BrokerId, log: LogView,
                 is_replica_eligible: Callable[[BrokerId], bool],
                 emit: Callable[..., None]) -> None:
        """`emit(event_type, now_ms, **fields)`: the partition's events."""
        self.topic_partition = topic_partition
        self.broker_id = broker_id
        self.log = log
        self._is_replica_eligible = is_replica_eligible
        self._emit = emit
        self.state: IsrState = Committed(())
        self.under_replicated = False
        self.under_min_isr = False
        self._log_prefix = f"[Partition {topic_partition} broker={broker_id}] "

    def shrink(self, now_ms: int, lead: Lead) -> AlterPartitionItem | None:
        """The isr-expiration check: propose removing the ISR members (other than this leader) that are out
        of sync. Does nothing while an ISR change is in flight."""
        if self.state.is_inflight:
            return None
        committed = self.state.isr
        check = lead.leader.out_of_sync_replicas(now_ms, committed, lead.policy)
        for kept in check.kept_by_pending_read:
            self._emit(EventType.ISR_KEPT_PENDING_READ, now_ms, replica=kept.broker,
                       pending_since_ms=kept.pending_since_ms)
        state, proposal = propose_shrink(self.state, check, lambda new_isr: self._proposal(new_isr, lead))
        if proposal is None:
            return None
        self.enter(state, now_ms, lead)
        out_of_sync = [{"broker": r.broker, "leo": r.leo, "last_caught_up_ms": r.last_caught_up_ms}
                       for r in check.removals]
        logger.info("%s%s", self._log_prefix, kafkalog.shrink_message(
            committed, proposal.new_isr, lead.high_watermark, self.log.log_end_offset, out_of_sync))
        return proposal

    def expand(self, follower_state: ReplicaState, fetch_time_ms: int, now_ms: int,
               lead: Lead) -> AlterPartitionItem | None:
        """After a follower's successful fetch (`propose_expand` in isr.py). A recovering leader (KIP-704) adds
        nobody."""
        assert follower_state.broker_id in lead.replicas, follower_state
        if lead.leader.recovering:
            return None
        committed = self.state.isr
        state, proposal = propose_expand(
            self.state, lead.policy, follower_state, now_ms=now_ms, fetch_time_ms=fetch_time_ms,
            high_watermark=lead.high_watermark, leader_epoch_start_offset=lead.leader.epoch_start_offset,
            is_eligible=self._is_replica_eligible, propose=lambda new_isr: self._proposal(new_isr, lead))
        if proposal is None:
            return None
        self.enter(state, now_ms, lead)
        logger.info("%sExpanding ISR from %s to %s", self._log_prefix, isr_text(committed),
                    isr_text(proposal.new_isr))
        return proposal

    def _proposal(self, new_isr: tuple[BrokerId, ...], lead: Lead) -> AlterPartitionItem:
        """The ISR change to send, with each follower's broker epoch from its fetches (KIP-903); this leader's
        own is left to the broker (-1 here)."""
        return AlterPartitionItem(self.topic_partition, self.broker_id, lead.leader_epoch, lead.partition_epoch,
                                  new_isr, lead.leader.broker_epochs(new_isr))

    def enter(self, state: IsrState, now_ms: int, lead: Lead | None) -> None:
        """The one place the ISR state changes (`lead` None: this broker does not lead). A leader reports the
        change it proposed in its current epoch when it commits (`committed_change`); health follows the
        committed ISR."""
        previous = self.state
        assert not (previous.is_inflight and state.is_inflight), (previous, state)  # one change in flight
        assert lead is not None or not state.is_inflight, state
        assert lead is None or self.broker_id in state.isr, state
        self.state = state
        change = committed_change(previous, state, lead.leader_epoch) if lead is not None else None
        if change is not None:
            assert lead is not None
            self._report_change(change, state.isr, now_ms, lead)
        self.refresh_health(now_ms, lead)

    def _report_change(self, change: PendingExpand | PendingShrink, isr: tuple[BrokerId, ...], now_ms: int,
                       lead: Lead) -> None:
        before = list(change.isr)
        if isinstance(change, PendingShrink):
            self._emit(EventType.ISR_SHRINK, now_ms, isr_before=before, isr_after=list(isr),
                       removed=[removal.to_dict() for removal in change.removals], leader_epoch=lead.leader_epoch,
                       hw=lead.high_watermark, leo=self.log.log_end_offset)
        else:
            added = lead.leader.replica_state(change.new_in_sync_replica)
            assert added is not None, change
            self._emit(EventType.ISR_EXPAND, now_ms, isr_before=before, isr_after=list(isr),
                       added=[{"broker": added.broker_id, "leo": added.log_end_offset}])
        logger.info("%s%s", self._log_prefix, kafkalog.isr_updated_message(
            isr, lead.partition_epoch, len(isr) < lead.min_isr))

    def refresh_health(self, now_ms: int, lead: Lead | None) -> None:
        """Under-replicated and under-min-ISR are leader-side conditions on the committed ISR."""
        isr_size = len(self.state.isr)
        under_replicated = lead is not None and isr_size < len(lead.replicas)
        under_min_isr = lead is not None and isr_size < lead.min_isr
        if under_replicated != self.under_replicated:
            self.under_replicated = under_replicated
            kind = EventType.UNDER_REPLICATED_START if under_replicated else EventType.UNDER_REPLICATED_END
            self._emit(kind, now_ms)
        if under_min_isr != self.under_min_isr:
            self.under_min_isr = under_min_isr
            self._emit(EventType.UNDER_MIN_ISR_START if under_min_isr else EventType.UNDER_MIN_ISR_END, now_ms)
