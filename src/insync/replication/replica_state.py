"""The leader's view of one follower, and the rules that decide whether it is caught up (REFERENCE.md 1).

A `ReplicaState` is an immutable snapshot, swapped in one assignment. On each successful follower fetch (offset
`f`, time `t`, and the leader's log end `leader_leo` captured BEFORE the read, so appends during the read never
keep a follower out): if `f >= leader_leo`, `last_caught_up = max(last_caught_up, t)`; elif `f >=
last_fetch_leader_log_end_offset`, `last_caught_up = max(last_caught_up, last_fetch_time)`. A follower is
caught up when its log end equals the leader's or it caught up within `L = replica.lag.time.max.ms`.
KIP-501 (seed 000): a read with `f >= last_fetch_leader_log_end_offset` is pending from its start, since the
leader, not the follower, is slow; insync bounds the KIP by `L`: a pending read keeps the follower only while it
is at most `L` old, and credits its completion only if it took at most `L`, so a cut-off follower is removed
within [`L`, 1.5 x `L`] of its last fetch, as without a pending read. A late read never moves the view back.
KIP-903: the state belongs to one life of the follower's broker (`broker_epoch`); older epochs are refused, and
a newer one starts from nothing, unlike Kafka, so the old life's offsets never count for the new one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from insync import limits
from insync.types import UNKNOWN_BROKER_EPOCH, UNKNOWN_OFFSET, BrokerEpoch, BrokerId, Offset


@dataclass(frozen=True, slots=True)
class PendingRead:
    read_id: int
    fetch_offset: Offset
    started_ms: int


@dataclass(frozen=True, slots=True)
class ReplicaState:
    broker_id: BrokerId
    log_end_offset: Offset = UNKNOWN_OFFSET
    log_start_offset: Offset = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: Offset = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    pending_reads: tuple[PendingRead, ...] = ()
    broker_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH

    def __post_init__(self) -> None:
        assert self.log_end_offset >= UNKNOWN_OFFSET and self.log_start_offset >= UNKNOWN_OFFSET, self
        assert len(self.pending_reads) <= limits.PENDING_READS_PER_REPLICA_MAX, self.broker_id

    # --- Leadership -------------------------------------------------------------------------------------------

    def reset(self, *, now_ms: int, leader_log_end_offset: Offset, is_new_leader: bool,
              in_isr: bool) -> ReplicaState:
        """On becoming leader, or a new leader epoch on the same leader. ISR members get a full lag period
        (`last_caught_up = now`); others start at 0 so they do not hold the high watermark back. A new leader
        knows nothing of the follower's log; a re-elected one keeps what it knew."""
        assert now_ms >= 0 and leader_log_end_offset >= 0
        last_caught_up_ms = now_ms if in_isr else 0
        if is_new_leader:
            return ReplicaState(self.broker_id, last_caught_up_ms=last_caught_up_ms)
        return ReplicaState(
            self.broker_id,
            log_end_offset=self.log_end_offset,
            log_start_offset=self.log_start_offset,
            last_fetch_time_ms=now_ms if in_isr else 0,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            last_caught_up_ms=last_caught_up_ms,
            broker_epoch=self.broker_epoch,
        )

    def for_broker_epoch(self, broker_epoch: BrokerEpoch) -> ReplicaState | None:
        """KIP-903: the state a fetch from `broker_epoch` (-1: not given) works on, or None when the fetch comes
        from an older life of the broker than one already seen (stale: refuse it). A newer life starts from
        nothing; a fetch that does not give its epoch leaves the state unchecked (-1), as in Kafka."""
        assert broker_epoch >= UNKNOWN_BROKER_EPOCH, broker_epoch
        if broker_epoch == self.broker_epoch:
            return self
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < self.broker_epoch:
            return None
        if broker_epoch != UNKNOWN_BROKER_EPOCH and self.broker_epoch != UNKNOWN_BROKER_EPOCH:
            return ReplicaState(self.broker_id, broker_epoch=broker_epoch)  # the broker restarted
        return dataclasses.replace(self, broker_epoch=broker_epoch)

    # --- Fetches ----------------------------------------------------------------------------------------------

    def begin_pending_read(self, read_id: int, fetch_offset: Offset, now_ms: int) -> tuple[ReplicaState, bool]:
        """KIP-501: register a read that starts at or beyond the leader's end at the previous fetch. Returns
        the new state and whether the read was registered (not when ineligible or at the bound)."""
        assert fetch_offset >= 0 and all(p.read_id != read_id for p in self.pending_reads)
        eligible = UNKNOWN_OFFSET < self.last_fetch_leader_log_end_offset <= fetch_offset
        if not eligible or len(self.pending_reads) >= limits.PENDING_READS_PER_REPLICA_MAX:
            return self, False
        pending = (*self.pending_reads, PendingRead(read_id, fetch_offset, now_ms))
        return dataclasses.replace(self, pending_reads=pending), True

    def end_pending_read(self, read_id: int) -> ReplicaState:
        """Forget a pending read (completed or failed); a no-op when it is not there (reset since)."""
        remaining = tuple(p for p in self.pending_reads if p.read_id != read_id)
        if len(remaining) == len(self.pending_reads):
            return self
        return dataclasses.replace(self, pending_reads=remaining)

    def after_fetch(self, *, fetch_offset: Offset, follower_log_start_offset: Offset, fetch_time_ms: int,
                    leader_log_end_offset: Offset, completed_ms: int, was_pending_read: bool,
                    lag_time_max_ms: int) -> ReplicaState:
        """The state after a successful read. `leader_log_end_offset` is the leader's LEO captured before the
        read; `was_pending_read` says the read was registered under KIP-501 (its completion time counts when
        the read took at most `lag_time_max_ms`)."""
        assert fetch_offset >= 0 and leader_log_end_offset >= 0 and lag_time_max_ms > 0
        assert completed_ms >= fetch_time_ms >= 0
        if was_pending_read and completed_ms - fetch_time_ms <= lag_time_max_ms:
            last_caught_up_ms = max(self.last_caught_up_ms, completed_ms)
        elif fetch_offset >= leader_log_end_offset:
            last_caught_up_ms = max(self.last_caught_up_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            # Never true for a stale read: the newer fetch's leader end offset is at least this read's.
            last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_time_ms)
        else:
            last_caught_up_ms = self.last_caught_up_ms
        # One constructor call, not dataclasses.replace (twice): this runs for every follower fetch, and replace
        # costs a walk over the fields each time.
        newest = fetch_time_ms >= self.last_fetch_time_ms  # a stale read does not move the follower's offsets
        return ReplicaState(
            self.broker_id,
            log_end_offset=fetch_offset if newest else self.log_end_offset,
            log_start_offset=follower_log_start_offset if newest else self.log_start_offset,
            last_fetch_time_ms=fetch_time_ms if newest else self.last_fetch_time_ms,
            last_fetch_leader_log_end_offset=max(leader_log_end_offset, self.last_fetch_leader_log_end_offset),
            last_caught_up_ms=last_caught_up_ms,
            pending_reads=self.pending_reads,
            broker_epoch=self.broker_epoch,
        )

    def after_idle_fetch(self, fetch_time_ms: int, lag_time_max_ms: int) -> ReplicaState:
        """`after_fetch` for a fetch at this state's log end, which was the leader's too when it arrived (an
        incremental fetch's quiet partition): only the fetch time and the catch-up time move."""
        return self.after_fetch(fetch_offset=self.log_end_offset, follower_log_start_offset=self.log_start_offset,
                                fetch_time_ms=fetch_time_ms, leader_log_end_offset=self.log_end_offset,
                                completed_ms=fetch_time_ms, was_pending_read=False, lag_time_max_ms=lag_time_max_ms)

    # --- Queries ----------------------------------------------------------------------------------------------

    def pending_read_since_ms(self, now_ms: int, lag_time_max_ms: int) -> int | None:
        """When the oldest pending read that still counts (at most `lag_time_max_ms` old) started, or None."""
        return min((p.started_ms for p in self.pending_reads if now_ms - p.started_ms <= lag_time_max_ms),
                   default=None)

    @property
    def last_heard_ms(self) -> int:
        """When the follower's latest fetch arrived: its last completed fetch, or a read still pending."""
        return max([self.last_fetch_time_ms, *(p.started_ms for p in self.pending_reads)])

    def lag_caught_up(self, now_ms: int, leader_log_end_offset: Offset, lag_time_max_ms: int) -> bool:
        """Kafka's rule alone (3.3+), without KIP-501."""
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_ms <= lag_time_max_ms)

    def is_caught_up(self, now_ms: int, leader_log_end_offset: Offset, lag_time_max_ms: int) -> bool:
        """Kafka's rule, or a pending read younger than the lag (KIP-501: only registered when the flag is on)."""
        return (self.pending_read_since_ms(now_ms, lag_time_max_ms) is not None
                or self.lag_caught_up(now_ms, leader_log_end_offset, lag_time_max_ms))
