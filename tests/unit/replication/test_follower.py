"""The follower role (`Follower`): applying fetched data, KAFKA-7104's follower half, truncation by leader epoch (logs end
identical, over several rounds when needed), and OFFSET_OUT_OF_RANGE (AbstractFetcherThreadTest: testTruncation,
testDivergingEpochs, testFollowerFetchOutOfRangeHigh/Low; EpochDrivenReplicationProtocolAcceptanceTest:
shouldNotAllowDivergentLogs)."""

from __future__ import annotations

from repl_helpers import (
    T0,
    TP,
    batch,
    events_of,
    fetch_round,
    follower_of,
    ids,
    leader,
    log_bytes,
    new_partition,
)

from insync import errors
from insync.events import EventType
from insync.protocol.records import build_batch
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetcherSession
from insync.replication.follower import FetchPosition
from insync.replication.partition import Partition
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch


def follower(broker: int = 2, *, leader_id: int = 1, epoch: int = 1, events: EventBuffer | None = None,
             partition: Partition | None = None) -> Partition:
    found = partition or new_partition(broker, events=events)
    found.make_follower(BrokerId(leader_id), LeaderEpoch(epoch), PartitionEpoch(epoch), ids((1, 2, 3)),
                        ids((1, 2, 3)), T0)
    return found


def replicate(source: Partition, target: Partition, now_ms: int, rounds: int = 20) -> FetcherSession:
    """Fetch from `source` into `target` until `target` reaches its end (bounded)."""
    session = FetcherSession(target.broker_id, source.broker_id, lambda _tp: target.follower, events=target.events)
    session.add_partition(TP, source.leader_epoch, follower_of(target).fetch_position(), now_ms)
    for _ in range(rounds):
        fetch_round(session, {TP: source}, now_ms)
        if target.log_end_offset == source.log_end_offset:
            fetch_round(session, {TP: source}, now_ms)  # once more, for the high watermark
            return session
    raise AssertionError(f"no convergence: {follower_of(target).fetch_position()} vs {source.log_end_offset}")


def records_from(partition: Partition, offset: int) -> bytes:
    return partition.log.read(offset, 1 << 20).records


def test_high_watermark_is_the_leaders_bounded_by_the_local_end() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(5), 1, T0)
    target = follower()
    replica = follower_of(target)
    position = replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(8), Offset(0), T0)
    assert position == FetchPosition(Offset(5), LeaderEpoch(1), Offset(0)) and target.high_watermark == 5
    replica.append_fetched_records(Offset(5), b"", Offset(3), Offset(0), T0)
    assert target.high_watermark == 3  # a follower follows its leader's high watermark, down as well


def test_the_high_watermark_passes_from_role_to_role() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(5), 1, T0)
    target = follower()
    follower_of(target).append_fetched_records(Offset(0), records_from(source, 0), Offset(4), Offset(0), T0)
    assert target.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((2, 3)), ids((1, 2, 3)), T0 + 1)
    assert target.follower is None and target.high_watermark == 4  # broker 3's end is unknown: it stays
    assert target.make_follower(BrokerId(3), LeaderEpoch(3), PartitionEpoch(3), ids((2, 3)), ids((1, 2, 3)), T0 + 2)
    assert follower_of(target).high_watermark == target.high_watermark == 4


def test_kafka_7104_leader_log_start_beyond_the_local_end_is_bounded_not_fatal() -> None:
    # The answer holds offsets 0..4 while the leader's log start already moved to 7 (seed 004).
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(5), 1, T0)
    events = EventBuffer()
    target = follower(events=events)
    position = follower_of(target).append_fetched_records(Offset(0), records_from(source, 0), Offset(10), Offset(7),
                                                          T0 + 1)
    assert position.fetch_offset == 7 and position.log_start_offset == 7
    assert target.high_watermark == 7
    bounded, truncate = events.drain()
    assert bounded.type == EventType.LOG_START_BOUNDED
    assert bounded.fields == {"leader_log_start": 7, "local_leo": 5}
    assert truncate.fields == {"from_offset": 5, "to_offset": 7, "reason": "leader_log_start"}


def test_leader_log_start_inside_the_local_log_moves_the_log_start() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    for _ in range(5):
        source.append_records_as_leader(batch(1), 1, T0)
    target = follower()
    replica = follower_of(target)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(5), Offset(3), T0)
    assert replica.fetch_position() == FetchPosition(Offset(5), LeaderEpoch(1), Offset(3))


def test_leader_log_start_above_the_local_high_watermark_moves_the_log_start_only_to_it() -> None:
    """Issue 16: a follower's log start never passes its own HW (Kafka's maybeIncrementLogStartOffset)."""
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    for _ in range(5):
        source.append_records_as_leader(batch(1), 1, T0)
    target = follower()
    replica = follower_of(target)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(2), Offset(4), T0)
    assert target.high_watermark == 2
    assert replica.fetch_position() == FetchPosition(Offset(5), LeaderEpoch(1), Offset(2))


def test_restart_inside_a_batch_when_the_leader_deleted_records_mid_batch() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(10), 1, T0)  # one batch, offsets 0..9
    source.delete_records_on_leader(4)
    events = EventBuffer()
    target = follower(events=events)
    session = replicate(source, target, T0 + 1)
    assert session.failed_partitions_count == 0
    assert follower_of(target).fetch_position() == FetchPosition(Offset(10), LeaderEpoch(1), Offset(4))
    assert [e.fields["reason"] for e in events_of(events, EventType.TRUNCATE)] == ["offset_out_of_range"]


def test_diverging_epochs_truncate_to_identical_logs() -> None:
    broker_a = leader(1, isr=(1, 2), replicas=(1, 2), epoch=1)
    broker_a.append_records_as_leader(batch(5, value=b"a"), 1, T0)
    broker_b = follower(2, epoch=1)
    replicate(broker_a, broker_b, T0 + 1)
    broker_a.append_records_as_leader(batch(3, value=b"lost"), 1, T0 + 2)  # never replicated
    # A fails; B leads epoch 2 and takes new writes; A comes back as its follower.
    assert broker_b.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0 + 3)
    broker_b.append_records_as_leader(batch(4, value=b"b"), 1, T0 + 3)
    events = broker_a.events
    events.drain()
    assert broker_a.make_follower(BrokerId(2), LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0 + 4)
    session = replicate(broker_b, broker_a, T0 + 5)
    (truncate,) = events_of(events, EventType.TRUNCATE)
    assert truncate.fields == {"from_offset": 8, "to_offset": 5, "reason": "diverging_epoch"}
    assert log_bytes(broker_a.log) == log_bytes(broker_b.log)  # type: ignore[arg-type]
    assert session.failed_partitions_count == 0 and broker_a.high_watermark == broker_b.high_watermark == 9


def test_truncation_over_several_rounds_when_epochs_are_unknown_to_each_other() -> None:
    # A: epochs 1 (0..4) and 3 (5..7). B: epochs 1 (0..4), 2 (5..8) and 4 (9..10). A must end as B.
    broker_a = leader(1, isr=(1, 2), replicas=(1, 2), epoch=1)
    broker_a.append_records_as_leader(batch(5), 1, T0)
    broker_b = follower(2, epoch=1)
    replicate(broker_a, broker_b, T0 + 1)
    assert broker_b.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0 + 2)
    broker_b.append_records_as_leader(batch(4, value=b"b2"), 1, T0 + 2)
    assert broker_a.make_leader(LeaderEpoch(3), PartitionEpoch(3), ids((1,)), ids((1, 2)), T0 + 3)
    broker_a.append_records_as_leader(batch(3, value=b"a3"), 1, T0 + 3)
    assert broker_b.make_leader(LeaderEpoch(4), PartitionEpoch(4), ids((2,)), ids((1, 2)), T0 + 4)
    broker_b.append_records_as_leader(batch(2, value=b"b4"), 1, T0 + 4)
    broker_a.events.drain()
    assert broker_a.make_follower(BrokerId(2), LeaderEpoch(4), PartitionEpoch(4), ids((2,)), ids((1, 2)), T0 + 5)
    replicate(broker_b, broker_a, T0 + 6)
    assert [e.fields["to_offset"] for e in events_of(broker_a.events, EventType.TRUNCATE)] == [5]
    assert log_bytes(broker_a.log) == log_bytes(broker_b.log)  # type: ignore[arg-type]
    assert broker_a.log.leader_epoch_cache.epoch_entries == [(1, 0), (2, 5), (4, 9)]  # type: ignore[attr-defined]


def test_follower_fetch_out_of_range_high() -> None:
    events = EventBuffer()
    target = follower(events=events)
    replica = follower_of(target)
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(8), 1, T0)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(8), Offset(0), T0)
    position = replica.truncate_on_out_of_range(Offset(0), Offset(5), Offset(5), T0 + 1)
    assert position.fetch_offset == 0  # the batch 0..7 cannot be split: the whole batch goes
    (truncate,) = events_of(events, EventType.TRUNCATE)
    assert truncate.fields["reason"] == "offset_out_of_range" and target.high_watermark == 0


def test_follower_fetch_out_of_range_high_without_the_leader_end_uses_its_high_watermark() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    for _ in range(6):
        source.append_records_as_leader(batch(1), 1, T0)
    target = follower()
    replica = follower_of(target)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(6), Offset(0), T0)
    assert replica.truncate_on_out_of_range(Offset(0), Offset(-1), Offset(4), T0 + 1).fetch_offset == 4


def test_follower_fetch_out_of_range_low() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    for _ in range(3):
        source.append_records_as_leader(batch(1), 1, T0)
    target = follower()
    replica = follower_of(target)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(3), Offset(0), T0)
    position = replica.truncate_on_out_of_range(Offset(10), Offset(20), Offset(20), T0 + 1)
    assert position == FetchPosition(Offset(10), LeaderEpoch(-1), Offset(10)) and target.high_watermark == 10


def test_follower_restarted_at_the_leader_log_start_forgets_the_producers_before_it() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    for sequence in range(3):
        source.append_records_as_leader(build_batch([(None, b"v")], producer_id=7, producer_epoch=0,
                                                    base_sequence=sequence, base_timestamp=T0), 1, T0)
    target = follower()
    replica = follower_of(target)
    replica.append_fetched_records(Offset(0), records_from(source, 0), Offset(3), Offset(0), T0)
    assert target.producer_state.entry(7) is not None
    replica.truncate_on_out_of_range(Offset(10), Offset(20), Offset(20), T0 + 1)
    assert target.log.log_start_offset == 10 and target.producer_state.entry(7) is None


def test_out_of_range_inside_the_leader_log_changes_nothing() -> None:
    target = follower()
    replica = follower_of(target)
    before = replica.fetch_position()
    assert replica.truncate_on_out_of_range(Offset(0), Offset(10), Offset(10), T0) == before


def test_offset_mismatch_is_an_error_not_a_silent_gap() -> None:
    source = leader(1, isr=(1,), replicas=(1, 2, 3))
    source.append_records_as_leader(batch(3), 1, T0)
    target = follower()
    try:
        follower_of(target).append_fetched_records(Offset(2), records_from(source, 0), Offset(3), Offset(0), T0)
    except errors.KafkaException as exc:
        assert "offset mismatch" in str(exc)
    else:
        raise AssertionError("expected an offset mismatch")
