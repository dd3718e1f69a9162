"""IsrPolicy reasons (stuck, slow, messages), the bursty-producer case of seed 001, the ISR states, and the pure
transitions between them (propose shrink / expand, the controller's answer, metadata)."""

from __future__ import annotations

import pytest
from repl_helpers import T0, ids

from insync import errors
from insync.config import BrokerConfig
from insync.events import ShrinkReason
from insync.replication.isr import (
    Committed,
    IsrCheck,
    IsrPolicy,
    PendingExpand,
    PendingShrink,
    Removal,
    after_alter_partition,
    committed_change,
    from_metadata,
    propose_expand,
    propose_shrink,
)
from insync.replication.messages import AlterPartitionItem, AlterPartitionResult
from insync.replication.replica_state import ReplicaState
from insync.replication.results import AlterOutcome
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch, TopicPartition

LAG = 10_000
TIME_ONLY = IsrPolicy(LAG)


def follower(broker: int, *, leo: int, last_fetch_ms: int, last_caught_up_ms: int) -> ReplicaState:
    return ReplicaState(BrokerId(broker), log_end_offset=Offset(leo), last_fetch_time_ms=last_fetch_ms,
                        last_fetch_leader_log_end_offset=Offset(leo), last_caught_up_ms=last_caught_up_ms)


def test_isr_expiration_for_stuck_followers() -> None:
    stuck = follower(2, leo=100, last_fetch_ms=T0, last_caught_up_ms=T0)  # a GC pause: no fetch since T0
    assert not TIME_ONLY.out_of_sync_replicas(T0 + LAG, Offset(120), [stuck]).removals
    check = TIME_ONLY.out_of_sync_replicas(T0 + LAG + 1, Offset(120), [stuck])
    assert check.removals == (Removal(BrokerId(2), Offset(100), T0, T0, ShrinkReason.STUCK),)


def test_isr_expiration_for_slow_followers() -> None:
    # Fetching every 500 ms, but never reaching the leader's end since T0.
    slow = follower(2, leo=100, last_fetch_ms=T0 + LAG, last_caught_up_ms=T0)
    (removal,) = TIME_ONLY.out_of_sync_replicas(T0 + LAG + 1, Offset(500), [slow]).removals
    assert removal.reason == ShrinkReason.SLOW and removal.last_fetch_ms == T0 + LAG


def test_isr_expiration_for_caught_up_followers() -> None:
    idle = follower(2, leo=500, last_fetch_ms=T0, last_caught_up_ms=T0)  # at the end: in sync however long
    assert TIME_ONLY.out_of_sync_replicas(T0 + 100 * LAG, Offset(500), [idle]).removals == ()


def test_unknown_replica_is_stuck() -> None:
    (removal,) = TIME_ONLY.out_of_sync_replicas(T0, Offset(10), [ReplicaState(BrokerId(3))]).removals
    assert removal.reason == ShrinkReason.STUCK and removal.leo == -1


def test_bursty_producer_count_rule_removes_a_healthy_follower_time_rule_does_not() -> None:
    # Seed 001: a follower that was at the end 100 ms ago, fetching normally, sees one 5,000-record batch land.
    healthy = follower(2, leo=1_000, last_fetch_ms=T0, last_caught_up_ms=T0)
    now, leader_leo = T0 + 100, Offset(6_000)
    assert TIME_ONLY.out_of_sync_replicas(now, leader_leo, [healthy]).removals == ()
    legacy = IsrPolicy(LAG, replica_lag_max_messages=4_000)
    (removal,) = legacy.out_of_sync_replicas(now, leader_leo, [healthy]).removals
    assert removal.reason == ShrinkReason.MESSAGES


def test_count_rule_is_off_at_zero_and_ignores_an_unknown_end() -> None:
    far_behind = follower(2, leo=0, last_fetch_ms=T0, last_caught_up_ms=T0)
    assert TIME_ONLY.out_of_sync_replicas(T0, Offset(10**6), [far_behind]).removals == ()
    legacy = IsrPolicy(LAG, replica_lag_max_messages=10)
    fresh_after_election = ReplicaState(BrokerId(2), last_caught_up_ms=T0)
    assert legacy.out_of_sync_replicas(T0, Offset(10**6), [fresh_after_election]).removals == ()


def test_time_reason_wins_over_the_count_rule() -> None:
    stuck = follower(2, leo=0, last_fetch_ms=T0, last_caught_up_ms=T0)
    legacy = IsrPolicy(LAG, replica_lag_max_messages=10)
    (removal,) = legacy.out_of_sync_replicas(T0 + LAG + 1, Offset(1_000), [stuck]).removals
    assert removal.reason == ShrinkReason.STUCK


def test_pending_read_keeps_a_follower_and_says_so() -> None:
    state = follower(2, leo=100, last_fetch_ms=T0, last_caught_up_ms=T0)
    state, registered = state.begin_pending_read(1, Offset(100), T0 + 5)
    assert registered
    check = TIME_ONLY.out_of_sync_replicas(T0 + 5 + LAG, Offset(200), [state])
    assert check.removals == ()
    assert [(k.broker, k.pending_since_ms) for k in check.kept_by_pending_read] == [(2, T0 + 5)]


def test_a_pending_read_older_than_the_lag_keeps_nobody() -> None:
    # The follower's last fetch (T0 + 5) is still being read, 120 s long; it was cut off meanwhile.
    state = follower(2, leo=100, last_fetch_ms=T0, last_caught_up_ms=T0)
    state, _ = state.begin_pending_read(1, Offset(100), T0 + 5)
    check = TIME_ONLY.out_of_sync_replicas(T0 + 6 + LAG, Offset(200), [state])
    assert check.kept_by_pending_read == ()
    assert check.removals == (Removal(BrokerId(2), Offset(100), T0, T0 + 5, ShrinkReason.STUCK),)


def test_policy_from_broker_config() -> None:
    config = BrokerConfig({"replica.lag.time.max.ms": "5000", "replica.lag.max.messages": "4000"})
    assert IsrPolicy.from_config(config) == IsrPolicy(5_000, 4_000)
    assert IsrPolicy.from_config(BrokerConfig()) == IsrPolicy(30_000, 0)


def _item(new_isr: tuple[int, ...]) -> AlterPartitionItem:
    return AlterPartitionItem(TopicPartition("t", 0), BrokerId(1), LeaderEpoch(3), PartitionEpoch(7),
                              tuple(BrokerId(b) for b in new_isr))


def test_maximal_isr_assumes_a_change_only_in_the_safe_direction() -> None:
    isr = (BrokerId(1), BrokerId(2))
    assert Committed(isr).maximal_isr == isr and not Committed(isr).is_inflight
    expand = PendingExpand(isr, BrokerId(3), _item((1, 2, 3)))
    assert expand.isr == isr and expand.maximal_isr == (1, 2, 3) and expand.is_inflight
    removal = Removal(BrokerId(2), Offset(5), T0, T0, ShrinkReason.STUCK)
    shrink = PendingShrink(isr, (removal,), _item((1,)))
    assert shrink.isr == isr and shrink.maximal_isr == isr and shrink.is_inflight


def test_a_pending_state_must_match_its_proposal() -> None:
    with pytest.raises(AssertionError):
        PendingExpand((BrokerId(1),), BrokerId(3), _item((1, 2)))


# --- Transitions --------------------------------------------------------------------------------------------------

ISR = (BrokerId(1), BrokerId(2))


def _propose(new_isr: tuple[BrokerId, ...]) -> AlterPartitionItem:
    return _item(tuple(new_isr))


def _expand(state: Committed | PendingExpand | PendingShrink, *, leo: int, fetch_ms: int = T0, now_ms: int = T0,
            eligible: bool = True) -> tuple[object, AlterPartitionItem | None]:
    follower_state = follower(3, leo=leo, last_fetch_ms=fetch_ms, last_caught_up_ms=fetch_ms)
    return propose_expand(state, TIME_ONLY, follower_state, now_ms=now_ms, fetch_time_ms=fetch_ms,
                          high_watermark=Offset(10), leader_epoch_start_offset=Offset(5),
                          is_eligible=lambda _broker: eligible, propose=_propose)


def test_shrink_proposes_the_committed_isr_without_the_removed() -> None:
    removal = Removal(BrokerId(2), Offset(5), T0, T0, ShrinkReason.STUCK)
    state, proposal = propose_shrink(Committed(ISR), IsrCheck((removal,)), _propose)
    assert proposal == _item((1,)) and state == PendingShrink(ISR, (removal,), proposal)
    assert propose_shrink(Committed(ISR), IsrCheck(), _propose) == (Committed(ISR), None)
    assert propose_shrink(state, IsrCheck((removal,)), _propose) == (state, None)  # one change in flight


def test_expand_rule_needs_the_high_watermark_the_epoch_start_an_eligible_broker_and_a_fresh_read() -> None:
    state, proposal = _expand(Committed(ISR), leo=10)
    assert proposal == _item((1, 2, 3)) and state == PendingExpand(ISR, BrokerId(3), proposal)
    assert _expand(Committed(ISR), leo=9) == (Committed(ISR), None)  # below the high watermark
    assert _expand(Committed(ISR), leo=10, eligible=False) == (Committed(ISR), None)
    assert _expand(Committed(ISR), leo=10, now_ms=T0 + LAG + 1) == (Committed(ISR), None)  # the read took too long
    assert _expand(Committed((*ISR, BrokerId(3))), leo=10)[1] is None  # already a member
    assert _expand(state, leo=10) == (state, None)  # one change in flight


def test_the_controllers_answer_commits_rolls_back_waits_or_retries() -> None:
    proposal = _item((1, 2, 3))
    pending = PendingExpand(ISR, BrokerId(3), proposal)
    epoch, partition_epoch = LeaderEpoch(3), PartitionEpoch(7)

    def answer(error: errors.KafkaError, *, leader_epoch: int = 3) -> tuple[object, AlterOutcome]:
        result = AlterPartitionResult(proposal.topic_partition, error, BrokerId(1), LeaderEpoch(leader_epoch),
                                      PartitionEpoch(8), proposal.new_isr)
        return after_alter_partition(pending, proposal, result, epoch, partition_epoch)

    assert answer(errors.NONE) == (Committed(proposal.new_isr), AlterOutcome.COMMITTED)
    assert answer(errors.NONE, leader_epoch=4) == (pending, AlterOutcome.IGNORED)
    assert answer(errors.INELIGIBLE_REPLICA) == (Committed(ISR), AlterOutcome.ROLLED_BACK)
    assert answer(errors.FENCED_LEADER_EPOCH) == (pending, AlterOutcome.AWAITING_METADATA)
    assert answer(errors.BY_NAME["NETWORK_EXCEPTION"]) == (pending, AlterOutcome.RETRY)
    other = AlterPartitionResult(proposal.topic_partition, errors.NONE)
    assert after_alter_partition(Committed(ISR), proposal, other, epoch, partition_epoch)[1] == AlterOutcome.IGNORED


def test_committed_change_is_the_proposal_a_commit_completes_in_the_same_epoch() -> None:
    pending = PendingExpand(ISR, BrokerId(3), _item((1, 2, 3)))
    assert committed_change(pending, from_metadata(ids((3, 2, 1))), LeaderEpoch(3)) == pending
    assert committed_change(pending, from_metadata(ids((3, 2, 1))), LeaderEpoch(4)) is None  # a later epoch
    assert committed_change(pending, from_metadata(ISR), LeaderEpoch(3)) is None  # rolled back
    assert committed_change(Committed(ISR), from_metadata(ISR), LeaderEpoch(3)) is None
