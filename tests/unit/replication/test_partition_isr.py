"""The ISR of a leading partition (`PartitionIsr`, driven through its `Partition`): expansion after a caught-up
follower's fetch, shrink on the isr-expiration check, one change in flight, and what each answer of the
controller does to it. Mirrors Kafka's PartitionTest and IsrExpirationTest where REFERENCE.md 11 names them."""

from __future__ import annotations

from repl_helpers import LAG_MS, T0, TP, batch, commit, fail, fetch, ids, leader, new_log

from insync import errors
from insync.events import EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.isr import Committed, PendingExpand, PendingShrink
from insync.replication.messages import AlterPartitionItem, AlterPartitionResult
from insync.replication.results import AlterOutcome
from insync.types import BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch

NETWORK_EXCEPTION = errors.BY_NAME["NETWORK_EXCEPTION"]


# --- Expansion --------------------------------------------------------------------------------------------------


def test_isr_expansion() -> None:
    events = EventBuffer()
    partition = leader(1, isr=(1,), replicas=(1, 2), events=events)
    partition.append_records_as_leader(batch(10), 1, T0)
    assert partition.high_watermark == 10  # the ISR is the leader alone
    assert fetch(partition, 2, 5, T0 + 1).alter_partition is None  # below the high watermark
    item = fetch(partition, 2, 10, T0 + 2).alter_partition
    assert item == AlterPartitionItem(TP, BrokerId(1), LeaderEpoch(1), PartitionEpoch(1), ids((1, 2)),
                                      (BrokerEpoch(-1), BrokerEpoch(-1)))  # no epochs in these fetches
    assert isinstance(partition.isr_state, PendingExpand)
    assert partition.isr == (1,) and partition.maximal_isr == (1, 2)
    events.drain()
    assert commit(partition, item, T0 + 3) == AlterOutcome.COMMITTED
    assert partition.isr_state.is_inflight is False and partition.partition_epoch == 2
    assert list(partition.isr) == [1, 2]
    expand, urp_end = events.drain()
    assert expand.type == EventType.ISR_EXPAND and urp_end.type == EventType.UNDER_REPLICATED_END
    assert expand.fields == {"isr_before": [1], "isr_after": [1, 2], "added": [{"broker": 2, "leo": 10}]}


def test_follower_does_not_join_isr_until_caught_up_to_offset_within_current_leader_epoch() -> None:
    log = new_log()
    log.append_as_leader(batch(4), 0)  # written under an older leader
    partition = leader(1, isr=(1, 3), replicas=(1, 2, 3), epoch=8, log=log)
    partition.append_records_as_leader(batch(2), 0, T0)
    partition.append_records_as_leader(batch(3), 0, T0)
    fetch(partition, 3, 0, T0 + 1)
    fetch(partition, 3, 2, T0 + 2)
    assert partition.high_watermark == 2
    assert fetch(partition, 2, 2, T0 + 3).alter_partition is None  # at the HW, but before epoch 8 started (4)
    fetch(partition, 3, 4, T0 + 4)
    assert partition.high_watermark == 4
    item = fetch(partition, 2, 4, T0 + 5).alter_partition
    assert item is not None and item.new_isr == (1, 3, 2)


def test_isr_not_expanded_if_update_fails() -> None:
    events = EventBuffer()
    partition = leader(1, isr=(1,), replicas=(1, 2), events=events)
    item = fetch(partition, 2, 0, T0 + 1).alter_partition
    assert item is not None
    assert fail(partition, item, errors.INVALID_UPDATE_VERSION, T0 + 2) == AlterOutcome.AWAITING_METADATA
    # The request may have been applied by an earlier attempt: stay pending, keep the safe maximal ISR, no retry.
    assert partition.isr == (1,) and partition.maximal_isr == (1, 2)
    assert fetch(partition, 2, 0, T0 + 3).alter_partition is None
    # Metadata with a newer partition epoch resolves it; it is the change proposed, so it is reported.
    events.drain()
    assert partition.make_leader(LeaderEpoch(1), PartitionEpoch(2), ids((1, 2)), ids((1, 2)), T0 + 4)
    assert partition.isr_state == Committed(ids((1, 2)))
    assert [e.type for e in events.drain()] == [EventType.ISR_EXPAND, EventType.UNDER_REPLICATED_END]


def test_ineligible_replica_rolls_back_and_the_next_fetch_proposes_again() -> None:
    partition = leader(1, isr=(1,), replicas=(1, 2))
    item = fetch(partition, 2, 0, T0 + 1).alter_partition
    assert item is not None
    assert fail(partition, item, errors.INELIGIBLE_REPLICA, T0 + 2) == AlterOutcome.ROLLED_BACK
    assert partition.isr_state == Committed(ids((1,)))
    assert fetch(partition, 2, 0, T0 + 3).alter_partition == item


def test_fenced_or_shutting_down_replica_is_not_added() -> None:
    fenced = {BrokerId(2)}
    partition = leader(1, isr=(1,), replicas=(1, 2), eligible=lambda broker: broker not in fenced)
    assert fetch(partition, 2, 0, T0 + 1).alter_partition is None
    fenced.clear()
    assert fetch(partition, 2, 0, T0 + 2).alter_partition is not None


# --- Shrink -----------------------------------------------------------------------------------------------------


def test_maybe_shrink_isr() -> None:
    events = EventBuffer()
    partition = leader(1, events=events)
    partition.append_records_as_leader(batch(5), 1, T0)
    fetch(partition, 2, 5, T0 + 100)  # broker 3 never fetches
    assert partition.maybe_shrink_isr(T0 + LAG_MS) is None  # a full lag period from the election
    item = partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert item is not None and item.new_isr == (1, 2)
    assert isinstance(partition.isr_state, PendingShrink)
    assert partition.isr == (1, 2, 3) and partition.maximal_isr == (1, 2, 3)
    assert partition.high_watermark == 0  # broker 3 still counts until the controller agrees
    events.drain()
    result = partition.on_alter_partition_result(item, AlterPartitionResult(TP, errors.NONE, BrokerId(1),
                                                 LeaderEpoch(1), PartitionEpoch(2), ids((1, 2))), T0 + LAG_MS + 2)
    assert result.outcome == AlterOutcome.COMMITTED and result.high_watermark_advanced
    assert list(partition.isr) == [1, 2] and partition.high_watermark == 5
    shrink, urp = events.drain()
    assert urp.type == EventType.UNDER_REPLICATED_START
    assert shrink.type == EventType.ISR_SHRINK and shrink.fields["isr_after"] == [1, 2]
    assert shrink.fields["removed"] == [{"broker": 3, "leo": -1, "last_caught_up_ms": T0, "last_fetch_ms": 0,
                                         "reason": "stuck", "fetch_pending": False, "fetch_pending_since_ms": None}]
    assert (shrink.fields["leader_epoch"], shrink.fields["leo"]) == (1, 5)


def test_should_not_shrink_isr_if_previous_fetch_is_caught_up() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    partition.append_records_as_leader(batch(10), 1, T0)
    fetch(partition, 2, 5, T0 + 500)
    partition.append_records_as_leader(batch(5), 1, T0 + 600)
    fetch(partition, 2, 10, T0 + 1_000)  # reached the leader's end as of the previous fetch (T0 + 500)
    assert partition.replica_state(BrokerId(2)).last_caught_up_ms == T0 + 500  # type: ignore[union-attr]
    assert partition.maybe_shrink_isr(T0 + 500 + LAG_MS) is None
    item = partition.maybe_shrink_isr(T0 + 501 + LAG_MS)
    assert item is not None and item.new_isr == (1,)
    assert partition.isr_state.removals[0].reason == "slow"  # type: ignore[union-attr]


def test_should_not_shrink_isr_if_follower_caught_up_to_log_end() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    partition.append_records_as_leader(batch(10), 1, T0)
    fetch(partition, 2, 10, T0 + 1)
    assert partition.maybe_shrink_isr(T0 + 100 * LAG_MS) is None


def test_isr_not_shrunk_if_update_fails() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    partition.append_records_as_leader(batch(3), 1, T0)
    item = partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert item is not None
    assert fail(partition, item, errors.INVALID_UPDATE_VERSION, T0 + LAG_MS + 2) == AlterOutcome.AWAITING_METADATA
    assert isinstance(partition.isr_state, PendingShrink) and partition.isr == (1, 2)
    assert partition.high_watermark == 0
    assert partition.maybe_shrink_isr(T0 + 2 * LAG_MS) is None  # one change in flight


def test_retry_shrink_isr() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    partition.append_records_as_leader(batch(3), 1, T0)
    item = partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert item is not None
    assert fail(partition, item, NETWORK_EXCEPTION, T0 + LAG_MS + 2) == AlterOutcome.RETRY
    assert isinstance(partition.isr_state, PendingShrink)
    assert commit(partition, item, T0 + LAG_MS + 3) == AlterOutcome.COMMITTED
    assert partition.isr == (1,) and partition.high_watermark == 3


def test_single_in_flight_alter_isr() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2, 3))
    expand = fetch(partition, 3, 0, T0 + 1).alter_partition
    assert expand is not None
    assert partition.maybe_shrink_isr(T0 + 2 * LAG_MS) is None  # broker 2 is stuck, but a change is in flight
    assert fetch(partition, 3, 0, T0 + 2 * LAG_MS).alter_partition is None
    assert commit(partition, expand, T0 + 2 * LAG_MS) == AlterOutcome.COMMITTED
    shrink = partition.maybe_shrink_isr(T0 + 2 * LAG_MS + 1)
    assert shrink is not None and shrink.new_isr == (1, 3) and shrink.partition_epoch == 2


def test_stale_or_foreign_alter_partition_answers_are_ignored() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    item = partition.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert item is not None
    other = AlterPartitionItem(TP, BrokerId(1), LeaderEpoch(1), PartitionEpoch(1), ids((1, 2)))
    assert commit(partition, other, T0 + LAG_MS + 2) == AlterOutcome.IGNORED
    newer_leader = AlterPartitionResult(TP, errors.NONE, BrokerId(2), LeaderEpoch(2), PartitionEpoch(3), ids((2,)))
    assert partition.on_alter_partition_result(item, newer_leader, T0).outcome == AlterOutcome.IGNORED
    assert isinstance(partition.isr_state, PendingShrink)
