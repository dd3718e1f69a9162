"""ReplicaState: Kafka's last_caught_up rules (REFERENCE.md 1) and KIP-501 pending reads (seed 000)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from repl_helpers import T0

from insync import limits
from insync.replication.replica_state import ReplicaState
from insync.types import BrokerEpoch, BrokerId, Offset

LAG = 10_000


def fetched(state: ReplicaState, fetch_offset: int, at_ms: int, leader_leo: int, *, completed_ms: int | None = None,
            pending: bool = False) -> ReplicaState:
    return state.after_fetch(fetch_offset=Offset(fetch_offset), follower_log_start_offset=Offset(0),
                             fetch_time_ms=at_ms, leader_log_end_offset=Offset(leader_leo),
                             completed_ms=at_ms if completed_ms is None else completed_ms, was_pending_read=pending,
                             lag_time_max_ms=LAG)


def test_fetch_at_the_leader_end_catches_up_at_the_fetch_time() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    assert state.last_caught_up_ms == T0
    assert state.log_end_offset == 100 and state.last_fetch_leader_log_end_offset == 100


def test_fetch_at_the_previous_leader_end_catches_up_at_the_previous_fetch_time() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 50, T0, leader_leo=100)  # behind: no catch-up yet
    assert state.last_caught_up_ms == 0
    state = fetched(state, 100, T0 + 500, leader_leo=180)  # reached where the leader was at the last fetch
    assert state.last_caught_up_ms == T0
    assert state.last_fetch_leader_log_end_offset == 180 and state.last_fetch_time_ms == T0 + 500


def test_fetch_behind_both_leaves_last_caught_up_alone() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    state = fetched(state, 90, T0 + 500, leader_leo=200)
    assert state.last_caught_up_ms == T0


def test_appends_during_the_read_never_keep_a_follower_out() -> None:
    # The follower asks for offset 100 when the leader's end is 100; 50 more records land while the leader reads.
    # The rule uses the end captured before the read, so the follower counts as caught up at the fetch time.
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    assert state.lag_caught_up(T0 + LAG, Offset(150), LAG)
    assert not state.lag_caught_up(T0 + LAG + 1, Offset(150), LAG)


def test_caught_up_when_at_the_leader_end_whatever_the_time() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=120)
    assert not state.is_caught_up(T0 + 10 * LAG, Offset(120), LAG)
    assert state.is_caught_up(T0 + 10 * LAG, Offset(100), LAG)


def test_an_unknown_replica_is_out_of_sync() -> None:
    assert not ReplicaState(BrokerId(2)).is_caught_up(T0, Offset(0), LAG)


def test_reset_on_a_new_leader_forgets_the_follower_log_and_trusts_isr_members() -> None:
    known = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    in_isr = known.reset(now_ms=T0 + 1, leader_log_end_offset=Offset(120), is_new_leader=True, in_isr=True)
    assert (in_isr.log_end_offset, in_isr.last_caught_up_ms, in_isr.last_fetch_time_ms) == (-1, T0 + 1, 0)
    outside = known.reset(now_ms=T0 + 1, leader_log_end_offset=Offset(120), is_new_leader=True, in_isr=False)
    assert outside.last_caught_up_ms == 0


def test_reset_on_reelection_keeps_the_follower_log_end() -> None:
    known = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    state = known.reset(now_ms=T0 + 1, leader_log_end_offset=Offset(120), is_new_leader=False, in_isr=True)
    assert state.log_end_offset == 100 and state.last_fetch_leader_log_end_offset == 120
    assert state.last_fetch_time_ms == T0 + 1


def test_pending_read_registered_only_at_or_beyond_the_previous_leader_end() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 950, T0, leader_leo=1002)  # seed 000: LEO 1002, fetch 950
    behind, registered = state.begin_pending_read(1, Offset(990), T0 + 10)
    assert not registered and behind is state
    pending, registered = state.begin_pending_read(2, Offset(1002), T0 + 10)
    assert registered and pending.pending_read_since_ms(T0 + 10, LAG) == T0 + 10


def test_no_pending_read_without_a_previous_fetch() -> None:
    _, registered = ReplicaState(BrokerId(2)).begin_pending_read(1, Offset(0), T0)
    assert not registered


def test_seed_000_slow_read_keeps_the_follower_caught_up_and_completion_time_counts() -> None:
    tx = T0
    state = fetched(ReplicaState(BrokerId(2)), 950, tx, leader_leo=1002)
    ty = tx + 3_000
    state, registered = state.begin_pending_read(7, Offset(1002), ty)  # the read will take as long as the lag
    assert registered
    for probe_ms in (tx + LAG + 1, ty + LAG):
        assert not state.lag_caught_up(probe_ms, Offset(1100), LAG)  # Kafka alone would drop it
        assert state.is_caught_up(probe_ms, Offset(1100), LAG)
    state = state.end_pending_read(7)
    state = fetched(state, 1002, ty, leader_leo=1100, completed_ms=ty + LAG, pending=True)
    assert state.last_caught_up_ms == ty + LAG and not state.pending_reads


def test_a_pending_read_keeps_a_follower_only_while_younger_than_the_lag() -> None:
    # Seed 000 with a read of 120 s, the follower cut off meanwhile: the read stops counting after the lag.
    state = fetched(ReplicaState(BrokerId(2)), 950, T0, leader_leo=1002)
    ty = T0 + 3_000
    state, _ = state.begin_pending_read(7, Offset(1002), ty)
    assert state.pending_read_since_ms(ty + LAG, LAG) == ty and state.is_caught_up(ty + LAG, Offset(1100), LAG)
    assert state.pending_read_since_ms(ty + LAG + 1, LAG) is None
    assert not state.is_caught_up(ty + LAG + 1, Offset(1100), LAG)
    assert state.last_heard_ms == ty


def test_completion_time_counts_only_for_a_read_no_longer_than_the_lag() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 950, T0, leader_leo=1002)
    ty = T0 + 3_000
    state, _ = state.begin_pending_read(7, Offset(1002), ty)
    state = state.end_pending_read(7)
    late = fetched(state, 1002, ty, leader_leo=1100, completed_ms=ty + 120_000, pending=True)
    # Not the completion time: Kafka's rule (reached the leader's end of the previous fetch, at T0).
    assert late.last_caught_up_ms == T0
    assert not late.is_caught_up(ty + 120_000, Offset(1100), LAG)


def test_a_stale_read_never_moves_the_leader_view_back() -> None:
    # A read of offset 100 that started at T0 completes after a newer fetch (offset 180 at T0 + 40 s) was applied.
    state = fetched(ReplicaState(BrokerId(2)), 100, T0 - 500, leader_leo=100)
    state, _ = state.begin_pending_read(1, Offset(100), T0)
    newer = fetched(state, 180, T0 + 40_000, leader_leo=180)
    stale = newer.end_pending_read(1)
    stale = fetched(stale, 100, T0, leader_leo=150, completed_ms=T0 + 45_000, pending=True)
    assert (stale.log_end_offset, stale.last_fetch_time_ms) == (180, T0 + 40_000)
    assert stale.last_fetch_leader_log_end_offset == 180 and stale.last_caught_up_ms == T0 + 40_000
    assert stale.is_caught_up(T0 + 45_000, Offset(200), LAG)


def test_a_failed_read_leaves_no_pending_read_behind() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    state, _ = state.begin_pending_read(1, Offset(100), T0 + 1)
    state = state.end_pending_read(1)
    assert not state.is_caught_up(T0 + LAG + 1, Offset(120), LAG)


def test_pending_reads_are_bounded() -> None:
    state = fetched(ReplicaState(BrokerId(2)), 100, T0, leader_leo=100)
    for read_id in range(limits.PENDING_READS_PER_REPLICA_MAX):
        state, registered = state.begin_pending_read(read_id, Offset(100), T0)
        assert registered
    _, registered = state.begin_pending_read(limits.PENDING_READS_PER_REPLICA_MAX, Offset(100), T0)
    assert not registered


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 1_000)), min_size=1, max_size=30))
def test_last_caught_up_never_moves_back_and_never_passes_the_last_fetch(
        steps: list[tuple[int, int, int]]) -> None:
    state, now, leader_leo = ReplicaState(BrokerId(2)), T0, 0
    for fetch_delta, append_count, wait_ms in steps:
        now += wait_ms
        fetch_offset = min(leader_leo, max(0, state.log_end_offset) + fetch_delta)
        before = state.last_caught_up_ms
        state = fetched(state, fetch_offset, now, leader_leo)
        assert before <= state.last_caught_up_ms <= now
        leader_leo += append_count


def test_a_new_life_of_the_broker_starts_from_nothing_and_an_old_one_is_refused() -> None:
    state = fetched(ReplicaState(BrokerId(2), broker_epoch=BrokerEpoch(5)), 100, T0, leader_leo=100)
    assert state.for_broker_epoch(BrokerEpoch(5)) is state
    assert state.for_broker_epoch(BrokerEpoch(4)) is None  # a fetch from a life that has ended
    restarted = state.for_broker_epoch(BrokerEpoch(7))
    assert restarted == ReplicaState(BrokerId(2), broker_epoch=BrokerEpoch(7))
    unchecked = state.for_broker_epoch(BrokerEpoch(-1))  # a fetch that does not say (Fetch before v15)
    assert unchecked is not None and unchecked.log_end_offset == 100 and unchecked.broker_epoch == -1
    first = ReplicaState(BrokerId(2)).for_broker_epoch(BrokerEpoch(3))
    assert first is not None and first.broker_epoch == 3
    kept = state.reset(now_ms=T0 + 1, leader_log_end_offset=Offset(120), is_new_leader=False, in_isr=True)
    assert kept.broker_epoch == 5  # a re-elected leader keeps it, as Kafka
