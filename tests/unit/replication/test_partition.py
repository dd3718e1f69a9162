"""Partition as leader: roles, high watermark, acks and min ISR, follower fetch handling (KAFKA-7104 snapshot,
diverging epochs), and KIP-501 pending reads; its ISR proposals are in test_partition_isr.py. Mirrors Kafka's
PartitionTest, IsrExpirationTest and ReplicaManagerTest where REFERENCE.md 11 names them."""

from __future__ import annotations

import pytest
from repl_helpers import (
    LAG_MS,
    T0,
    batch,
    commit,
    config,
    events_of,
    fail,
    fetch,
    handle_follower_fetch,
    ids,
    leader,
    new_log,
    new_partition,
)

from insync import errors
from insync.config import BrokerConfig
from insync.errors import KafkaException
from insync.events import EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.isr import IsrPolicy
from insync.replication.messages import EpochEndOffset
from insync.replication.partition import Partition, PartitionConfig
from insync.replication.results import AlterOutcome, FollowerFetchResult, FollowerRead
from insync.types import BrokerEpoch, BrokerId, LeaderEpoch, Offset, PartitionEpoch

# --- Roles ------------------------------------------------------------------------------------------------------


def test_make_leader_records_its_epoch_start_and_ignores_stale_metadata() -> None:
    partition = leader(1, epoch=1, partition_epoch=1)
    partition.append_records_as_leader(batch(3), 1, T0)
    assert partition.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((1, 2, 3)), ids((1, 2, 3)), T0)
    assert partition.log.leader_epoch_cache.epoch_entries == [(1, 0), (2, 3)]  # type: ignore[attr-defined]
    assert not partition.make_leader(LeaderEpoch(1), PartitionEpoch(3), ids((1, 2, 3)), ids((1, 2, 3)), T0)
    assert not partition.make_follower(BrokerId(2), LeaderEpoch(2), PartitionEpoch(1), ids((1, 2)), ids((1, 2, 3)),
                                       T0)
    assert not partition.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((1, 2, 3)), ids((1, 2, 3)), T0)
    assert partition.is_leader and partition.leader_epoch == 2


def test_leadership_loss_ends_leader_conditions_and_fails_waiting_produces() -> None:
    events = EventBuffer()
    partition = leader(1, isr=(1,), replicas=(1, 2), cfg=config(min_isr=2), events=events)
    assert [e.type for e in events.drain()] == [EventType.UNDER_REPLICATED_START, EventType.UNDER_MIN_ISR_START]
    wait = partition.append_records_as_leader(batch(1), 1, T0).wait
    assert partition.make_follower(BrokerId(2), LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0 + 1)
    assert [e.type for e in events.drain()] == [EventType.UNDER_REPLICATED_END, EventType.UNDER_MIN_ISR_END]
    assert partition.produce_status(wait) == errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaException) as raised:
        partition.append_records_as_leader(batch(1), 1, T0 + 2)
    assert raised.value.error == errors.NOT_LEADER_OR_FOLLOWER


# --- High watermark, min ISR and acks ---------------------------------------------------------------------------


def test_high_watermark_advance_should_not_advance_when_under_min_isr() -> None:
    partition = leader(1, isr=(1,), replicas=(1, 2), cfg=config(min_isr=2))
    partition.append_records_as_leader(batch(4), 1, T0)
    assert partition.high_watermark == 0 and partition.is_under_min_isr
    item = fetch(partition, 2, 4, T0 + 1).alter_partition
    assert item is not None and partition.high_watermark == 0  # pending: the committed ISR is still too small
    commit(partition, item, T0 + 2)
    assert partition.high_watermark == 4 and not partition.is_under_min_isr


def test_high_watermark_only_moves_forward() -> None:
    log = new_log()
    log.append_as_leader(batch(6), 0)
    partition = leader(1, isr=(1, 2), replicas=(1, 2), epoch=1, log=log, high_watermark=5)
    assert partition.high_watermark == 5
    fetch(partition, 2, 3, T0 + 1)  # an ISR member below the checkpointed high watermark
    assert partition.high_watermark == 5
    fetch(partition, 2, 6, T0 + 2)
    assert partition.high_watermark == 6


def test_caught_up_replica_outside_the_isr_holds_the_high_watermark() -> None:
    partition = leader(1, isr=(1,), replicas=(1, 2))
    partition.append_records_as_leader(batch(4), 1, T0)
    item = fetch(partition, 2, 4, T0 + 1).alter_partition
    assert item is not None
    fail(partition, item, errors.INELIGIBLE_REPLICA, T0 + 2)  # back to ISR (1): broker 2 still caught up
    partition.append_records_as_leader(batch(2), 1, T0 + 3)
    assert partition.high_watermark == 4
    assert partition.replica_state(BrokerId(2)).last_caught_up_ms == T0 + 1  # type: ignore[union-attr]
    partition.append_records_as_leader(batch(1), 1, T0 + 2 + LAG_MS)  # no longer caught up: not waited for
    assert partition.high_watermark == 7


def test_use_checkpoint_to_initialize_high_watermark() -> None:
    log = new_log()
    log.append_as_leader(batch(6), 0)
    assert new_partition(1, log=log, high_watermark=4).high_watermark == 4
    assert new_partition(1, log=log, high_watermark=100).high_watermark == 6  # bounded by the log end


def test_at_min_isr() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2, 3), cfg=config(min_isr=2))
    assert partition.effective_min_isr == 2 and not partition.is_under_min_isr
    partition.append_records_as_leader(batch(1), -1, T0)
    small = leader(1, isr=(1,), replicas=(1,), cfg=config(min_isr=2))  # min ISR capped by replication factor
    assert small.effective_min_isr == 1
    small.append_records_as_leader(batch(1), -1, T0)
    assert small.produce_status(small.append_records_as_leader(batch(1), -1, T0).wait) == errors.NONE


def test_acks_all_is_refused_before_the_append_below_min_isr() -> None:
    partition = leader(1, isr=(1,), replicas=(1, 2, 3), cfg=config(min_isr=2))
    with pytest.raises(KafkaException) as raised:
        partition.append_records_as_leader(batch(1), -1, T0)
    assert raised.value.error == errors.NOT_ENOUGH_REPLICAS
    assert "The size of the current ISR Set(1) is insufficient to satisfy the min.isr requirement of 2" \
        in str(raised.value)
    assert partition.log_end_offset == 0
    assert partition.append_records_as_leader(batch(1), 1, T0).first_offset == 0  # acks=1 still works


def test_acks_all_completes_when_the_high_watermark_passes_it() -> None:
    partition = leader(1, cfg=config(min_isr=2))
    wait = partition.append_records_as_leader(batch(5), -1, T0).wait
    assert wait.required_offset == 5 and partition.produce_status(wait) is None
    fetch(partition, 2, 5, T0 + 1)
    assert partition.produce_status(wait) is None  # broker 3 is in the ISR and has not fetched
    assert fetch(partition, 3, 5, T0 + 2).high_watermark_advanced
    assert partition.produce_status(wait) == errors.NONE


def test_not_enough_replicas_after_append_when_the_isr_shrank_meanwhile() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2), cfg=config(min_isr=2))
    wait = partition.append_records_as_leader(batch(5), -1, T0).wait
    fetch(partition, 2, 5, T0 + 1)
    partition.append_records_as_leader(batch(1), 1, T0 + 2)
    item = partition.maybe_shrink_isr(T0 + 2 + LAG_MS)  # then broker 2 stalls and is removed
    assert item is not None
    commit(partition, item, T0 + 3 + LAG_MS)
    assert partition.produce_status(wait) == errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_invalid_required_acks() -> None:
    with pytest.raises(KafkaException) as raised:
        leader(1).append_records_as_leader(batch(1), 2, T0)
    assert raised.value.error == errors.INVALID_REQUIRED_ACKS


def test_delete_records_never_passes_the_high_watermark() -> None:
    partition = leader(1, isr=(1,), replicas=(1, 2))
    partition.append_records_as_leader(batch(10), 1, T0)
    assert partition.delete_records_on_leader(4) == 4
    with pytest.raises(KafkaException) as raised:
        partition.delete_records_on_leader(11)
    assert raised.value.error == errors.OFFSET_OUT_OF_RANGE
    assert partition.delete_records_on_leader(-1) == 10


# --- Follower fetches on the leader -----------------------------------------------------------------------------


def test_follower_state_not_updated_if_log_read_fails() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    partition.append_records_as_leader(batch(3), 1, T0)
    before = partition.replica_state(BrokerId(2))
    started = partition.begin_follower_fetch(BrokerId(2), Offset(3), LeaderEpoch(1), LeaderEpoch(1), Offset(0),
                                             T0 + 1)
    assert isinstance(started, FollowerRead)
    result = partition.complete_follower_fetch(started, KafkaException(errors.KAFKA_STORAGE_ERROR, "disk"), T0 + 2)
    assert result.data.error == errors.KAFKA_STORAGE_ERROR and not result.data.records
    assert partition.replica_state(BrokerId(2)) == before and partition.high_watermark == 0


def test_fetch_answer_carries_offsets_captured_before_the_read() -> None:
    # KAFKA-7104, leader half: records read, then the log start moves before the answer is built.
    partition = leader(1, isr=(1,), replicas=(1, 2))
    partition.append_records_as_leader(batch(10), 1, T0)
    started = partition.begin_follower_fetch(BrokerId(2), Offset(0), LeaderEpoch(1), LeaderEpoch(-1), Offset(0),
                                             T0 + 1)
    assert isinstance(started, FollowerRead)
    read = partition.log.read(0, 1 << 20)
    partition.append_records_as_leader(batch(5), 1, T0 + 2)
    partition.delete_records_on_leader(12)
    data = partition.complete_follower_fetch(started, read, T0 + 3).data
    assert (data.high_watermark, data.log_start_offset, data.log_end_offset) == (10, 0, 10)
    assert data.records == read.records


def test_diverging_epoch_is_answered_without_records_or_state_change() -> None:
    log = new_log()
    log.append_as_leader(batch(5), 1)
    partition = leader(1, isr=(1, 2), replicas=(1, 2), epoch=3, log=log)
    partition.append_records_as_leader(batch(5), 1, T0)
    before = partition.replica_state(BrokerId(2))
    data = fetch(partition, 2, 8, T0 + 1, last_epoch=2).data  # the follower wrote 5..7 in an epoch 2 we never had
    assert data.error == errors.NONE and data.diverging_epoch == EpochEndOffset(LeaderEpoch(1), Offset(5))
    assert data.records == b"" and partition.replica_state(BrokerId(2)) == before
    assert fetch(partition, 2, 5, T0 + 2, last_epoch=1).data.diverging_epoch is None


@pytest.mark.parametrize(("current_epoch", "error"), [(0, errors.FENCED_LEADER_EPOCH),
                                                      (2, errors.UNKNOWN_LEADER_EPOCH)])
def test_fetch_with_a_wrong_leader_epoch(current_epoch: int, error: errors.KafkaError) -> None:
    assert fetch(leader(1), 2, 0, T0, current_epoch=current_epoch).data.error == error


def test_fetch_from_a_non_replica_or_beyond_the_end() -> None:
    partition = leader(1)
    partition.append_records_as_leader(batch(2), 1, T0)
    assert fetch(partition, 7, 0, T0).data.error == errors.NOT_LEADER_OR_FOLLOWER
    beyond = fetch(partition, 2, 5, T0).data
    assert beyond.error == errors.OFFSET_OUT_OF_RANGE and beyond.log_end_offset == 2 and beyond.log_start_offset == 0
    assert handle_follower_fetch(new_partition(1), BrokerId(2), Offset(0), LeaderEpoch(-1), LeaderEpoch(-1),
                                                  Offset(0), 100, T0).data.error == errors.NOT_LEADER_OR_FOLLOWER


# --- KIP-501 (seed 000) -----------------------------------------------------------------------------------------


def _slow_read_setup(pending_reads: bool) -> tuple[Partition, EventBuffer, list[FollowerRead]]:
    """Followers caught up at T0+100; new data at T0+200; their next fetches (T0+300) take 25 s to read."""
    events = EventBuffer()
    partition = leader(1, cfg=config(min_isr=2, pending_reads=pending_reads), events=events)
    partition.append_records_as_leader(batch(10), -1, T0)
    for follower in (2, 3):
        fetch(partition, follower, 10, T0 + 100)
    partition.append_records_as_leader(batch(5), -1, T0 + 200)
    reads = []
    for follower in (2, 3):
        started = partition.begin_follower_fetch(BrokerId(follower), Offset(10), LeaderEpoch(1), LeaderEpoch(1),
                                                 Offset(0), T0 + 300)
        assert isinstance(started, FollowerRead) and started.was_pending_read == pending_reads
        reads.append(started)
    events.drain()
    return partition, events, reads


def test_slow_leader_reads_drop_followers_without_kip_501() -> None:
    partition, _, reads = _slow_read_setup(pending_reads=False)
    item = partition.maybe_shrink_isr(T0 + 101 + LAG_MS)
    assert item is not None and item.new_isr == (1,)
    commit(partition, item, T0 + 102 + LAG_MS)
    with pytest.raises(KafkaException) as raised:
        partition.append_records_as_leader(batch(1), -1, T0 + 103 + LAG_MS)
    assert raised.value.error == errors.NOT_ENOUGH_REPLICAS


def test_a_shrink_says_which_removed_followers_had_a_fetch_pending_at_the_leader_whatever_the_flag() -> None:
    """The evidence of a slow leader (issue 21): its followers' fetches were still being served when they left."""
    partition, events, reads = _slow_read_setup(pending_reads=False)
    partition.complete_follower_fetch(reads[1], partition.log.read(10, 1 << 20), T0 + 400)  # follower 3's is done
    fetch(partition, 3, 15, T0 + 401)  # and it caught up
    item = partition.maybe_shrink_isr(T0 + 101 + LAG_MS)
    assert item is not None and item.new_isr == (1, 3)
    commit(partition, item, T0 + 102 + LAG_MS)
    [shrink] = events_of(events, EventType.ISR_SHRINK)
    [removed] = shrink.fields["removed"]
    assert (removed["broker"], removed["fetch_pending"], removed["fetch_pending_since_ms"]) == (2, True, T0 + 300)
    # Completed, the read is no longer pending: a later removal of follower 2 says no fetch was.
    partition.complete_follower_fetch(reads[0], partition.log.read(10, 1 << 20), T0 + 200 + LAG_MS)
    partition.append_records_as_leader(batch(1), -1, T0 + 300 + LAG_MS)
    assert partition.maybe_shrink_isr(T0 + 10 * LAG_MS) is not None  # 3, caught up at T0 + 401 only
    [removal] = partition.isr_state.removals  # type: ignore[union-attr]
    assert (removal.broker, removal.fetch_pending_since_ms) == (3, None)
    assert removal.to_dict()["fetch_pending"] is False


def test_a_parked_fetch_read_slowly_when_data_arrives_is_pending_too() -> None:
    """A caught-up follower's fetch waits in the purgatory; the slow leader's read for it starts when data arrives."""
    partition, events, reads = _slow_read_setup(pending_reads=False)
    for started in reads:
        partition.complete_follower_fetch(started, partition.log.read(10, 1 << 20), T0 + 350)
    again = partition.begin_follower_fetch(BrokerId(2), Offset(15), LeaderEpoch(1), LeaderEpoch(1), Offset(0),
                                           T0 + 400, from_purgatory=True)
    assert isinstance(again, FollowerRead)
    item = partition.maybe_shrink_isr(T0 + 101 + LAG_MS)
    assert item is not None and item.new_isr == (1,)
    assert [(r.broker, r.fetch_pending_since_ms) for r in partition.isr_state.removals] == [  # type: ignore[union-attr]
        (2, T0 + 400), (3, None)]


def test_slow_leader_reads_keep_followers_in_sync_with_kip_501() -> None:
    partition, events, reads = _slow_read_setup(pending_reads=True)
    for probe_ms in (T0 + 101 + LAG_MS, T0 + 300 + LAG_MS):
        assert partition.maybe_shrink_isr(probe_ms) is None
        kept = events_of(events, EventType.ISR_KEPT_PENDING_READ)
        assert [(e.fields["replica"], e.fields["pending_since_ms"]) for e in kept] == [(2, T0 + 300), (3, T0 + 300)]
    done_ms = T0 + 300 + LAG_MS
    for started in reads:
        partition.complete_follower_fetch(started, partition.log.read(10, 1 << 20), done_ms)
        state = partition.replica_state(started.replica_id)
        assert state is not None and state.last_caught_up_ms == done_ms and not state.pending_reads
    assert partition.maybe_shrink_isr(done_ms + LAG_MS) is None
    assert partition.append_records_as_leader(batch(1), -1, done_ms + LAG_MS).first_offset == 15


def test_a_follower_cut_off_during_a_120_s_read_leaves_the_isr_with_kip_501() -> None:
    partition, events, reads = _slow_read_setup(pending_reads=True)
    # Follower 3's read ends after 5 s and it fetches on; follower 2's read takes 120 s and it is cut off.
    partition.complete_follower_fetch(reads[1], partition.log.read(10, 1 << 20), T0 + 5_300)
    fetch(partition, 3, 15, T0 + 5_301)
    item = partition.maybe_shrink_isr(T0 + 301 + LAG_MS)
    assert item is not None and item.new_isr == (1, 3)
    assert not events_of(events, EventType.ISR_KEPT_PENDING_READ)
    [removal] = partition.isr_state.removals  # type: ignore[union-attr]
    assert (removal.broker, removal.last_fetch_ms, removal.fetch_pending_since_ms) == (2, T0 + 300, T0 + 300)
    assert commit(partition, item, T0 + 302 + LAG_MS) == AlterOutcome.COMMITTED
    # The read completes long after: it neither counts as a catch-up nor brings the follower back.
    late = partition.complete_follower_fetch(reads[0], partition.log.read(10, 1 << 20), T0 + 120_300)
    assert late.data.error == errors.NONE and late.alter_partition is None
    state = partition.replica_state(BrokerId(2))
    assert state is not None and state.last_caught_up_ms == T0 + 100 and state.log_end_offset == 10


def test_a_stale_read_completing_after_a_newer_fetch_changes_nothing_back() -> None:
    partition, _, reads = _slow_read_setup(pending_reads=True)
    fetch(partition, 2, 15, T0 + 40_000)  # the follower timed out its request and fetched again
    partition.complete_follower_fetch(reads[0], partition.log.read(10, 1 << 20), T0 + 45_000)
    state = partition.replica_state(BrokerId(2))
    assert state is not None and (state.log_end_offset, state.last_fetch_time_ms) == (15, T0 + 40_000)
    assert state.last_caught_up_ms == T0 + 40_000 and state.last_fetch_leader_log_end_offset == 15


def test_a_read_from_the_purgatory_answers_but_updates_nothing() -> None:
    partition, _, reads = _slow_read_setup(pending_reads=True)
    for started in reads:
        partition.complete_follower_fetch(started, partition.log.read(10, 1 << 20), T0 + 400)
    before = partition.replica_state(BrokerId(2))
    again = partition.begin_follower_fetch(BrokerId(2), Offset(15), LeaderEpoch(1), LeaderEpoch(1), Offset(0),
                                           T0 + 900, from_purgatory=True)
    assert isinstance(again, FollowerRead) and not again.was_pending_read
    assert partition.replica_state(BrokerId(2)) == before
    partition.append_records_as_leader(batch(2), -1, T0 + 950)
    result = partition.complete_follower_fetch(again, partition.log.read(15, 1 << 20), T0 + 950)
    assert result.data.records and result.alter_partition is None and not result.high_watermark_advanced
    assert partition.replica_state(BrokerId(2)) == before


def test_pending_reads_vanish_on_failure_and_on_leadership_change() -> None:
    partition, _, reads = _slow_read_setup(pending_reads=True)
    partition.complete_follower_fetch(reads[0], KafkaException(errors.KAFKA_STORAGE_ERROR), T0 + 400)
    assert not partition.replica_state(BrokerId(2)).pending_reads  # type: ignore[union-attr]
    assert partition.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((1, 2, 3)), ids((1, 2, 3)), T0 + 500)
    assert not partition.replica_state(BrokerId(3)).pending_reads  # type: ignore[union-attr]
    late = partition.complete_follower_fetch(reads[1], partition.log.read(10, 1 << 20), T0 + 600)
    assert late.data.error == errors.FENCED_LEADER_EPOCH
    assert partition.replica_state(BrokerId(3)).last_fetch_time_ms == T0 + 500  # type: ignore[union-attr]


# --- KIP-903 broker epochs ---------------------------------------------------------------------------------------


def epoch_fetch(partition: Partition, broker: int, offset: int, at_ms: int, broker_epoch: int) -> FollowerFetchResult:
    return handle_follower_fetch(partition, BrokerId(broker), Offset(offset), partition.leader_epoch,
                                           LeaderEpoch(-1), Offset(0), 1 << 20, at_ms,
                                           replica_epoch=BrokerEpoch(broker_epoch))


def test_a_follower_restarted_with_an_empty_disk_is_not_kept_in_the_isr_by_its_old_life() -> None:
    partition = leader(1, cfg=config(min_isr=2))
    partition.append_records_as_leader(batch(10), -1, T0)
    epoch_fetch(partition, 2, 10, T0 + 100, broker_epoch=5)  # caught up, in its life 5
    epoch_fetch(partition, 3, 10, T0 + 100, broker_epoch=6)
    # Broker 2 restarts with an empty disk (registered again: epoch 9) and fetches from offset 0.
    epoch_fetch(partition, 2, 0, T0 + 200, broker_epoch=9)
    state = partition.replica_state(BrokerId(2))
    assert state is not None and (state.broker_epoch, state.log_end_offset, state.last_caught_up_ms) == (9, 0, 0)
    # Its old life caught up at T0 + 100, but that log is gone: it leaves the ISR at the next check.
    item = partition.maybe_shrink_isr(T0 + 300)
    assert item is not None and item.new_isr == (1, 3)
    assert item.new_isr_broker_epochs == (-1, 6)  # the leader's own is the broker's to fill in
    # A fetch still arriving from the old life is refused, and changes nothing.
    late = epoch_fetch(partition, 2, 10, T0 + 400, broker_epoch=5)
    assert late.data.error == errors.NOT_LEADER_OR_FOLLOWER
    assert partition.replica_state(BrokerId(2)) == state


def test_a_read_of_an_old_life_completing_after_the_restart_updates_nothing() -> None:
    partition = leader(1)
    partition.append_records_as_leader(batch(10), 1, T0)
    old_read = partition.begin_follower_fetch(BrokerId(2), Offset(10), LeaderEpoch(1), LeaderEpoch(1), Offset(0),
                                              T0 + 100, replica_epoch=BrokerEpoch(5))
    assert isinstance(old_read, FollowerRead)
    epoch_fetch(partition, 2, 0, T0 + 200, broker_epoch=9)
    state = partition.replica_state(BrokerId(2))
    done = partition.complete_follower_fetch(old_read, partition.log.read(10, 1 << 20), T0 + 300)
    assert done.data.error == errors.NOT_LEADER_OR_FOLLOWER and done.alter_partition is None
    assert partition.replica_state(BrokerId(2)) == state


def test_partition_config_from_broker_and_topic_settings() -> None:
    broker = BrokerConfig({"replica.lag.time.max.ms": "10000", "replica.lag.max.messages": "4000",
                           "follower.fetch.pending.reads.insync.enable": "true"})
    resolved = PartitionConfig.from_configs(broker, broker.log_config({"min.insync.replicas": "2"}))
    assert resolved == PartitionConfig(IsrPolicy(10_000, 4_000), 2, True)
