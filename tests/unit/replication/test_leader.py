"""Leader, the leader role of one partition on its own: starting an epoch (the leader-epoch cache entry, the
followers' states reset), new metadata within the epoch, a fetch's two halves across epochs, and the high
watermark rule. Partition-level behaviour (roles, ISR proposals, produce) is in test_partition.py."""

from __future__ import annotations

from repl_helpers import LAG_MS, T0, TP, batch, ids, new_log

from insync import errors
from insync.events import ShrinkReason
from insync.replication.isr import Committed, IsrPolicy, PendingShrink, Removal
from insync.replication.leader import FollowerClock, Leader
from insync.replication.messages import AlterPartitionItem, FetchPartitionData
from insync.replication.results import FollowerRead
from insync.storage.log import Log
from insync.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, LeaderEpoch, Offset, PartitionEpoch

ME = BrokerId(1)


def start(log: Log, epoch: int, *, isr: tuple[int, ...] = (1, 2), replicas: tuple[int, ...] = (1, 2, 3),
          now_ms: int = T0, previous: Leader | None = None) -> Leader:
    return Leader.start_epoch(TP, ME, log, LeaderEpoch(epoch), ids(replicas), ids(isr), now_ms, previous=previous,
                              recovering=False)


def fetch(leader: Leader, broker: int, offset: int, now_ms: int, *, high_watermark: int = 0
          ) -> tuple[FetchPartitionData, object]:
    started = leader.begin_fetch(BrokerId(broker), Offset(offset), leader.leader_epoch, LeaderEpoch(-1), Offset(0),
                                 now_ms, high_watermark=Offset(high_watermark), register_pending_read=False,
                                 from_purgatory=False, replica_epoch=UNKNOWN_BROKER_EPOCH)
    assert isinstance(started, FollowerRead), started
    return leader.complete_fetch(started, leader.log.read(offset, 1 << 20), now_ms,
                                 high_watermark=Offset(high_watermark), lag_time_max_ms=LAG_MS)


def test_an_epoch_starts_at_the_log_end_and_resets_the_followers() -> None:
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    leader = start(log, 2, now_ms=T0 + 5)
    assert leader.epoch_start_offset == 3 and log.leader_epoch_cache.epoch_entries == [(1, 0), (2, 3)]
    assert leader.replica_state(ME) is None  # the leader is not its own follower
    member, other = leader.replica_state(BrokerId(2)), leader.replica_state(BrokerId(3))
    assert member is not None and member.last_caught_up_ms == T0 + 5  # an ISR member gets a full lag period
    assert other is not None and other.last_caught_up_ms == 0


def test_a_re_elected_leader_keeps_what_it_knew_a_new_one_forgets() -> None:
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    first = start(log, 1)
    fetch(first, 2, 3, T0 + 1)
    again = start(log, 2, now_ms=T0 + 2, previous=first)
    assert again.replica_state(BrokerId(2)).log_end_offset == 3  # type: ignore[union-attr]
    fresh = start(log, 3, now_ms=T0 + 3)
    assert fresh.replica_state(BrokerId(2)).log_end_offset == -1  # type: ignore[union-attr]


def test_reassignment_keeps_the_states_of_replicas_still_assigned() -> None:
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    leader = start(log, 1)
    fetch(leader, 2, 3, T0 + 1)
    leader.reassign(ids((1, 2, 4)), recovering=True)
    assert leader.replica_state(BrokerId(2)).log_end_offset == 3  # type: ignore[union-attr]
    assert leader.replica_state(BrokerId(3)) is None and leader.replica_state(BrokerId(4)) is not None
    assert not leader.recovering  # recovering only starts with an epoch


def test_a_read_begun_in_an_earlier_epoch_is_fenced_and_updates_nothing() -> None:
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    old = start(log, 1)
    read = old.begin_fetch(BrokerId(2), Offset(3), LeaderEpoch(1), LeaderEpoch(-1), Offset(0), T0 + 1,
                           high_watermark=Offset(0), register_pending_read=False, from_purgatory=False,
                           replica_epoch=UNKNOWN_BROKER_EPOCH)
    assert isinstance(read, FollowerRead)
    new = start(log, 2, now_ms=T0 + 2, previous=old)
    before = new.replica_state(BrokerId(2))
    data, updated = new.complete_fetch(read, log.read(3, 1 << 20), T0 + 3, high_watermark=Offset(0),
                                       lag_time_max_ms=LAG_MS)
    assert data.error == errors.FENCED_LEADER_EPOCH and updated is None
    assert new.replica_state(BrokerId(2)) == before


def test_high_watermark_is_the_least_end_offset_of_the_maximal_isr() -> None:
    log = new_log()
    log.append_as_leader(batch(10), LeaderEpoch(1))
    leader = start(log, 1, isr=(1, 2))
    fetch(leader, 2, 6, T0 + 1)
    advanced = leader.advanced_high_watermark(T0 + 1, Committed(ids((1, 2))), 1, Offset(0), LAG_MS,
                                              lambda _broker: True)
    assert advanced == 6
    assert leader.advanced_high_watermark(T0 + 1, Committed(ids((1, 2))), 1, Offset(6), LAG_MS,
                                          lambda _broker: True) is None  # only forward
    assert leader.advanced_high_watermark(T0 + 1, Committed(ids((1, 2))), 3, Offset(0), LAG_MS,
                                          lambda _broker: True) is None  # below min ISR: stands still
    # While a shrink of broker 2 awaits the controller, the maximal ISR still holds it.
    removal = Removal(BrokerId(2), Offset(6), T0, T0, ShrinkReason.STUCK)
    proposal = AlterPartitionItem(TP, ME, LeaderEpoch(1), PartitionEpoch(1), ids((1,)))
    shrinking = PendingShrink(ids((1, 2)), (removal,), proposal)
    assert leader.advanced_high_watermark(T0 + 1, shrinking, 1, Offset(0), LAG_MS, lambda _broker: True) == 6


def test_out_of_sync_replicas_checks_the_isr_members_but_the_leader() -> None:
    log = new_log()
    log.append_as_leader(batch(10), LeaderEpoch(1))
    leader = start(log, 1, isr=(1, 2, 3))
    check = leader.out_of_sync_replicas(T0 + LAG_MS + 1, ids((1, 2, 3)), IsrPolicy(LAG_MS))
    assert [removal.broker for removal in check.removals] == [2, 3]


def idle(leader: Leader, broker: int, offset: int, *, last_fetched_epoch: int = -1, log_start: int = 0,
         replica_epoch: int = UNKNOWN_BROKER_EPOCH) -> bool:
    return leader.fetch_is_idle(BrokerId(broker), Offset(offset), leader.leader_epoch, LeaderEpoch(last_fetched_epoch),
                                Offset(log_start), BrokerEpoch(replica_epoch))


def test_a_fetch_at_the_log_end_where_the_last_one_left_the_follower_is_idle_and_counts_as_caught_up() -> None:
    """An incremental fetch's quiet partition: no read, and the state a read would have left (the same
    `after_fetch`), so a follower of an idle partition stays in the ISR."""
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    leader, twin = start(log, 1), start(log, 1)
    for each in (leader, twin):
        fetch(each, 2, 3, T0 + 1)
    assert idle(leader, 2, 3) and idle(leader, 2, 3, last_fetched_epoch=1)
    clock = FollowerClock(T0 + LAG_MS * 3)
    leader.note_idle_fetch(BrokerId(2), clock, LAG_MS)
    fetch(twin, 2, 3, T0 + LAG_MS * 3)
    state = leader.replica_state(BrokerId(2))
    assert state == twin.replica_state(BrokerId(2))
    assert state is not None and state.last_caught_up_ms == state.last_fetch_time_ms == T0 + LAG_MS * 3
    # Later fetches of the same follower that leave this partition unvisited count as idle ones too.
    clock.fetch_ms = T0 + LAG_MS * 5
    fetch(twin, 2, 3, T0 + LAG_MS * 5)
    assert leader.replica_state(BrokerId(2)) == twin.replica_state(BrokerId(2))


def test_a_read_ends_the_idle_count_at_the_fetch_before_it() -> None:
    """Once a fetch reads the partition again (records arrived), the follower was caught up at the fetch before
    that one, whatever the clock says later: Kafka's rule, as if every fetch had been read."""
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    leader, twin = start(log, 1), start(log, 1)
    for each in (leader, twin):
        fetch(each, 2, 3, T0 + 1)
    clock = FollowerClock(T0 + 100)
    leader.note_idle_fetch(BrokerId(2), clock, LAG_MS)
    fetch(twin, 2, 3, T0 + 100)
    log.append_as_leader(batch(2), LeaderEpoch(1))
    for each in (leader, twin):
        fetch(each, 2, 3, T0 + 200)  # behind now: caught up last at the fetch at T0 + 100
    clock.fetch_ms = T0 + LAG_MS * 4  # the session's later fetches do not count here any more
    state = leader.replica_state(BrokerId(2))
    assert state == twin.replica_state(BrokerId(2))
    assert state is not None and state.last_caught_up_ms == T0 + 100


def test_a_fetch_that_could_change_anything_is_not_idle() -> None:
    log = new_log()
    log.append_as_leader(batch(3), LeaderEpoch(1))
    leader = start(log, 1)
    assert not idle(leader, 2, 3)  # the follower's end is not known yet: this fetch moves it
    fetch(leader, 2, 3, T0 + 1)
    assert not idle(leader, 2, 2)  # behind the log end: a read
    assert not idle(leader, 2, 3, log_start=1)  # the follower's log start moved
    assert not idle(leader, 2, 3, replica_epoch=7)  # another life of the follower's broker
    assert not idle(leader, 2, 3, last_fetched_epoch=2)  # a last epoch the leader does not have: divergence
    assert not idle(leader, 4, 3)  # not a replica
    assert not leader.fetch_is_idle(BrokerId(2), Offset(3), LeaderEpoch(0), LeaderEpoch(-1), Offset(0),
                                    UNKNOWN_BROKER_EPOCH)  # a fenced leader epoch
    log.append_as_leader(batch(1), LeaderEpoch(1))
    assert not idle(leader, 2, 3)  # records to send
