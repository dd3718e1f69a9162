"""The leader role of one partition: what the leader knows of each follower, the leader's half of a follower
fetch, and the high watermark rule. As Kafka's raft gives each role its own state class, a `Leader` lives for one
leader epoch of this broker; the partition keeps what both roles share and hands the leader what it needs.
Starting an epoch records (epoch, log end offset) in the leader-epoch cache at once, so followers with entries
from a later failed epoch truncate correctly before this leader appends (REFERENCE.md 8), and resets each
follower's `ReplicaState`: ISR members get a full lag period, a new leader forgets what an earlier one knew.
Follower fetches come in two halves so a slow read can be modelled (KIP-501): `begin_fetch` captures high
watermark, log start and log end BEFORE the read (KAFKA-7104), answers a diverging epoch at once and registers
a pending read; `complete_fetch` updates the follower's state only on a first read in the same epoch and life of
the follower's broker (KIP-903). The read stays in flight between the halves whatever KIP-501's flag says, so a
follower removed meanwhile says so in its `isr_shrink` (`fetch_pending_since_ms`): evidence of a slow leader.
The high watermark (REFERENCE.md 3) is min(leader LEO, LEO of every replica in the maximal ISR or caught up and
eligible), only moves forward, and stands still while the committed ISR is below min ISR (Kafka 3.7+).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from insync import errors, limits
from insync.errors import KafkaError, KafkaException
from insync.replication.isr import IsrCheck, IsrPolicy, IsrState
from insync.replication.log_view import LogView, ReadResultView
from insync.replication.messages import EpochEndOffset, FetchPartitionData
from insync.replication.replica_state import ReplicaState
from insync.replication.results import FollowerRead
from insync.types import (
    UNDEFINED_EPOCH,
    UNKNOWN_BROKER_EPOCH,
    UNKNOWN_OFFSET,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Offset,
    TopicPartition,
)


@dataclasses.dataclass(slots=True)
class FollowerClock:
    """When a follower last fetched from this broker (`fetch_ms`), shared by every partition it is idle on."""

    fetch_ms: int = -1


class Leader:
    def __init__(self, topic_partition: TopicPartition, broker_id: BrokerId, log: LogView,
                 leader_epoch: LeaderEpoch, epoch_start_offset: Offset, followers: Iterable[ReplicaState], *,
                 recovering: bool) -> None:
        """See `start_epoch`. `recovering`: KIP-704, elected uncleanly and RECOVERED not yet recorded."""
        assert 0 <= epoch_start_offset <= log.log_end_offset, epoch_start_offset
        self.topic_partition = topic_partition
        self.broker_id = broker_id
        self.log = log
        self.leader_epoch = leader_epoch
        self.epoch_start_offset = epoch_start_offset
        self.recovering = recovering
        self._states = {state.broker_id: state for state in followers}
        assert broker_id not in self._states, broker_id
        # Per follower idle here (`note_idle_fetch`): the clock of its fetches, and the lag. Each use of the states
        # catches them up to it, until a fetch of that follower reads this partition again; so that an idle
        # fetch costs this leader nothing at all, and a fetch that does not visit it still counts.
        self._idle_fetches: dict[BrokerId, tuple[FollowerClock, int]] = {}
        self._next_read_id = 0
        # Per follower, the first reads begun and not completed: read id -> when the fetch arrived.
        self._fetches_in_flight: dict[BrokerId, dict[int, int]] = {}

    @property
    def _replica_states(self) -> dict[BrokerId, ReplicaState]:
        """The followers' states, every idle follower caught up to its latest fetch."""
        for broker, (clock, lag_time_max_ms) in self._idle_fetches.items():
            state = self._states[broker]
            if clock.fetch_ms > state.last_fetch_time_ms:
                self._states[broker] = state.after_idle_fetch(clock.fetch_ms, lag_time_max_ms)
        return self._states

    @_replica_states.setter
    def _replica_states(self, states: dict[BrokerId, ReplicaState]) -> None:
        self._idle_fetches.clear()
        self._states = states

    @classmethod
    def start_epoch(cls, topic_partition: TopicPartition, broker_id: BrokerId, log: LogView,
                    leader_epoch: LeaderEpoch, replicas: Sequence[BrokerId], isr: Sequence[BrokerId], now_ms: int,
                    *, previous: Leader | None, recovering: bool) -> Leader:
        """Start leading in `leader_epoch`: a new leader (`previous` None) or this one re-elected."""
        start = Offset(log.log_end_offset)
        log.leader_epoch_cache.assign(leader_epoch, start)
        known = previous._replica_states if previous is not None else {}
        followers = (known.get(broker, ReplicaState(broker)).reset(
            now_ms=now_ms, leader_log_end_offset=start, is_new_leader=previous is None, in_isr=broker in isr)
            for broker in replicas if broker != broker_id)
        return cls(topic_partition, broker_id, log, leader_epoch, start, followers, recovering=recovering)

    def reassign(self, replicas: Sequence[BrokerId], recovering: bool) -> None:
        """New metadata in the same epoch: followers still assigned keep their state, new ones start from
        nothing. Recovering only ends here (it starts with an epoch)."""
        self._replica_states = {broker: self._replica_states.get(broker, ReplicaState(broker))
                                for broker in replicas if broker != self.broker_id}
        self._fetches_in_flight = {broker: reads for broker, reads in self._fetches_in_flight.items()
                                   if broker in self._replica_states}
        self.recovering = recovering and self.recovering

    def replica_state(self, broker_id: BrokerId) -> ReplicaState | None:
        return self._replica_states.get(broker_id)

    def broker_epochs(self, brokers: Sequence[BrokerId]) -> tuple[BrokerEpoch, ...]:
        """Each follower's broker epoch from its fetches (KIP-903); this leader's own is left to the broker."""
        return tuple(self._replica_states[b].broker_epoch if b in self._replica_states else UNKNOWN_BROKER_EPOCH
                     for b in brokers)

    # --- Follower fetches -------------------------------------------------------------------------------------

    def begin_fetch(self, replica_id: BrokerId, fetch_offset: Offset, current_leader_epoch: LeaderEpoch,
                    last_fetched_epoch: LeaderEpoch, follower_log_start_offset: Offset, now_ms: int, *,
                    high_watermark: Offset, register_pending_read: bool, from_purgatory: bool,
                    replica_epoch: BrokerEpoch) -> FollowerRead | FetchPartitionData:
        """First half: the answer at once (an error, or a diverging epoch with no records, neither of which
        touches the follower's state), or a `FollowerRead` to complete after reading the log at `fetch_offset`.
        `register_pending_read`: KIP-501's flag."""
        error = self._leader_epoch_error(current_leader_epoch)
        if error is None and replica_id not in self._replica_states:
            error = errors.NOT_LEADER_OR_FOLLOWER  # not a replica, as far as this leader knows
        if not from_purgatory:  # caught up to the fetch before this one, and no further
            self._idle_fetches.pop(replica_id, None)
        if error is not None:
            return FetchPartitionData(self.topic_partition, error)
        life = self._replica_states[replica_id].for_broker_epoch(replica_epoch)
        if life is None:
            return FetchPartitionData(self.topic_partition, errors.NOT_LEADER_OR_FOLLOWER)
        if not from_purgatory:
            self._replica_states[replica_id] = life
        log_start_offset, log_end_offset = Offset(self.log.log_start_offset), Offset(self.log.log_end_offset)
        if fetch_offset < log_start_offset:
            return self._error_data(errors.OFFSET_OUT_OF_RANGE, high_watermark)
        if last_fetched_epoch != UNDEFINED_EPOCH:
            epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0 or end_offset < 0:  # as Kafka: nothing to compare against
                return self._error_data(errors.OFFSET_OUT_OF_RANGE, high_watermark)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                diverging = EpochEndOffset(LeaderEpoch(epoch), Offset(end_offset))
                return FetchPartitionData(self.topic_partition, errors.NONE, high_watermark, log_start_offset,
                                          log_end_offset, diverging)
        if fetch_offset > log_end_offset:
            return self._error_data(errors.OFFSET_OUT_OF_RANGE, high_watermark)
        read_id, self._next_read_id = self._next_read_id, self._next_read_id + 1
        registered = False
        # A parked fetch's read too: a caught-up follower's fetch waits in the purgatory, and a slow leader spends
        # its time reading for it once data arrives.
        in_flight = self._fetches_in_flight.setdefault(replica_id, {})
        if len(in_flight) < limits.PENDING_READS_PER_REPLICA_MAX:  # beyond it, the oldest still says since when
            in_flight[read_id] = now_ms
        if register_pending_read and not from_purgatory:
            state, registered = self._replica_states[replica_id].begin_pending_read(read_id, fetch_offset, now_ms)
            self._replica_states[replica_id] = state
        return FollowerRead(replica_id, self.leader_epoch, read_id, registered, fetch_offset,
                            follower_log_start_offset, now_ms, high_watermark, log_start_offset, log_end_offset,
                            from_purgatory, replica_epoch)

    def complete_fetch(self, read: FollowerRead, outcome: ReadResultView | KafkaException, now_ms: int, *,
                       high_watermark: Offset, lag_time_max_ms: int) -> tuple[FetchPartitionData, ReplicaState | None]:
        """Second half: the read finished at `now_ms`, with records or an error. Returns the answer, and the
        follower's new state when this read updated it (then the ISR may expand and the high watermark move)."""
        assert now_ms >= read.fetch_time_ms and lag_time_max_ms > 0, (now_ms, read)
        state = self._replica_states.get(read.replica_id)
        if state is not None and state.broker_epoch != read.replica_epoch:
            state = None  # the broker restarted during the read: this life's state is not the read's to update
        if read.leader_epoch != self.leader_epoch:
            return FetchPartitionData(self.topic_partition, errors.FENCED_LEADER_EPOCH), None  # a new epoch began
        self._fetches_in_flight.get(read.replica_id, {}).pop(read.read_id, None)
        if state is None:  # the replica was reassigned away
            return FetchPartitionData(self.topic_partition, errors.NOT_LEADER_OR_FOLLOWER), None
        if read.was_pending_read:
            state = state.end_pending_read(read.read_id)
        if isinstance(outcome, KafkaException):
            self._replica_states[read.replica_id] = state
            return self._error_data(outcome.error, high_watermark), None
        data = FetchPartitionData(self.topic_partition, errors.NONE, read.high_watermark, read.log_start_offset,
                                  read.log_end_offset, None, bytes(outcome.records))
        if read.from_purgatory:
            return data, None
        state = state.after_fetch(
            fetch_offset=read.fetch_offset, follower_log_start_offset=read.follower_log_start_offset,
            fetch_time_ms=read.fetch_time_ms, leader_log_end_offset=read.log_end_offset, completed_ms=now_ms,
            was_pending_read=read.was_pending_read, lag_time_max_ms=lag_time_max_ms)
        self._replica_states[read.replica_id] = state
        return data, state

    def fetch_is_idle(self, replica_id: BrokerId, fetch_offset: Offset, current_leader_epoch: LeaderEpoch,
                      last_fetched_epoch: LeaderEpoch, follower_log_start_offset: Offset,
                      replica_epoch: BrokerEpoch) -> bool:
        """Whether this fetch would read nothing and change nothing but the follower's fetch time: the follower
        is at this leader's log end, where its last fetch left it, in the same life, with no read pending and no
        divergence. `note_idle_fetch` then does all that `begin_fetch` and `complete_fetch` would."""
        state = self._states.get(replica_id)  # what an idle fetch changes is not read here
        if state is None or state.broker_epoch != replica_epoch or state.pending_reads \
                or self._leader_epoch_error(current_leader_epoch) is not None:
            return False
        log_end_offset = self.log.log_end_offset
        if not (fetch_offset == log_end_offset == state.log_end_offset
                and follower_log_start_offset == state.log_start_offset):
            return False
        if last_fetched_epoch == UNDEFINED_EPOCH:
            return True
        epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
        return epoch == last_fetched_epoch and end_offset == log_end_offset

    def note_idle_fetch(self, replica_id: BrokerId, clock: FollowerClock, lag_time_max_ms: int) -> None:
        """A fetch `fetch_is_idle` accepted: the follower is caught up at each fetch `clock` tells of, until one
        reads this partition again (`begin_fetch`). Whoever advances the clock must make sure a fetch after a
        change here reads it: the fetch sessions' changed partitions (`broker.fetch_sessions`)."""
        assert replica_id in self._states and lag_time_max_ms > 0, replica_id
        self._idle_fetches[replica_id] = (clock, lag_time_max_ms)

    def end_idle_fetches(self, replica_id: BrokerId) -> None:
        """The follower's fetches no longer include this partition (it left its session, as a failed or backing-off
        partition does): it was caught up at its last fetch, not at the ones that follow."""
        if replica_id in self._idle_fetches:
            _ = self._replica_states  # caught up to the clock as it stands: the follower's last fetch
            del self._idle_fetches[replica_id]

    def _leader_epoch_error(self, current_leader_epoch: LeaderEpoch) -> KafkaError | None:
        if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == self.leader_epoch:
            return None
        return errors.FENCED_LEADER_EPOCH if current_leader_epoch < self.leader_epoch else errors.UNKNOWN_LEADER_EPOCH

    def _error_data(self, error: KafkaError, high_watermark: Offset) -> FetchPartitionData:
        """An error answer; with OFFSET_OUT_OF_RANGE, the current offsets the follower needs to restart."""
        if error != errors.OFFSET_OUT_OF_RANGE:
            return FetchPartitionData(self.topic_partition, error)
        return FetchPartitionData(self.topic_partition, error, high_watermark, Offset(self.log.log_start_offset),
                                  Offset(self.log.log_end_offset))

    # --- ISR check and high watermark -------------------------------------------------------------------------

    def out_of_sync_replicas(self, now_ms: int, isr: Sequence[BrokerId], policy: IsrPolicy) -> IsrCheck:
        """The ISR members other than this leader that `policy` removes (a member never heard from is stuck)."""
        followers = [self._replica_states.get(broker, ReplicaState(broker))
                     for broker in isr if broker != self.broker_id]
        check = policy.out_of_sync_replicas(now_ms, Offset(self.log.log_end_offset), followers)
        if not check.removals:
            return check
        return dataclasses.replace(check, removals=tuple(
            dataclasses.replace(r, fetch_pending_since_ms=min(self._fetches_in_flight.get(r.broker, {}).values(),
                                                              default=None))
            for r in check.removals))

    def advanced_high_watermark(self, now_ms: int, isr_state: IsrState, min_isr: int, high_watermark: Offset,
                                lag_time_max_ms: int, is_eligible: Callable[[BrokerId], bool]) -> Offset | None:
        """The high watermark after `high_watermark` (REFERENCE.md 3), or None when it does not move."""
        if len(isr_state.isr) < min_isr:
            return None
        leader_leo = Offset(self.log.log_end_offset)
        maximal_isr = isr_state.maximal_isr
        candidate = leader_leo
        for broker in maximal_isr:
            if broker != self.broker_id:
                state = self._replica_states.get(broker)
                candidate = min(candidate, state.log_end_offset if state is not None else UNKNOWN_OFFSET)
        for broker, state in self._replica_states.items():
            # A caught-up replica about to join the ISR is waited for, as Kafka does.
            if broker not in maximal_isr and state.is_caught_up(now_ms, leader_leo, lag_time_max_ms) \
                    and is_eligible(broker):
                candidate = min(candidate, state.log_end_offset)
        if candidate <= high_watermark:
            return None
        assert candidate <= leader_leo, (candidate, leader_leo)
        return candidate
