"""FetcherSession: request building, per-partition error isolation (KIP-461, seed 002), back-off, retries on a
new leader epoch, and the log start race of seed 004 handled by truncation (AbstractFetcherThreadTest:
testFetcherThreadHandlingPartitionFailureDuringAppending/Truncation, testFencedFetch, testCorruptMessage;
AbstractFetcherManagerTest: testMetricFailedPartitionCount)."""

from __future__ import annotations

from repl_helpers import (
    T0,
    batch,
    events_of,
    fetch_round,
    follower_of,
    handle_follower_fetch,
    ids,
    leader,
    new_partition,
)

from insync import errors
from insync.config import BrokerConfig, FetcherConfig
from insync.events import EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetcherSession
from insync.replication.follower import FetchPosition, Follower, FollowerReplica
from insync.replication.messages import (
    AlterPartitionItem,
    AlterPartitionResult,
    EpochEndOffset,
    FetchPartitionData,
    FetchResponse,
)
from insync.replication.partition import Partition
from insync.storage.log import Log
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch, TopicPartition

TPS = [TopicPartition("events", p) for p in range(3)]
BACKOFF = FetcherConfig().backoff_ms


class Cluster:
    """Leaders on broker 1, followers on broker 2, one fetcher session between them."""

    def __init__(self, partitions: list[TopicPartition] = TPS) -> None:
        self.events = EventBuffer()
        self.leaders = {tp: leader(1, isr=(1, 2), replicas=(1, 2), topic_partition=tp) for tp in partitions}
        self.followers: dict[TopicPartition, Partition] = {}
        for tp in partitions:
            found = new_partition(2, topic_partition=tp, events=self.events)
            found.make_follower(BrokerId(1), LeaderEpoch(1), PartitionEpoch(1), ids((1, 2)), ids((1, 2)), T0)
            self.followers[tp] = found
        self.session = FetcherSession(BrokerId(2), BrokerId(1), self.lookup, events=self.events)
        for tp, found in self.followers.items():
            self.session.add_partition(tp, LeaderEpoch(1), follower_of(found).fetch_position(), T0)

    def lookup(self, tp: TopicPartition) -> Follower | None:
        found = self.followers.get(tp)
        return None if found is None else found.follower

    def produce(self, count: int = 3, now_ms: int = T0) -> None:
        for found in self.leaders.values():
            found.append_records_as_leader(batch(count), 1, now_ms)

    def requested(self, now_ms: int) -> set[TopicPartition]:
        """The partitions a request at `now_ms` asks for (the request is then given up, without back-off)."""
        request = self.session.build_fetch_request(now_ms)
        assert request is not None
        self.session.handle_fetch_error(request.correlation_id, now_ms - BACKOFF)
        return {p.topic_partition for p in request.partitions}


def _fail_writes(log: Log) -> None:
    log.disk.set_io_error(log.directory, on_read=False, on_write=True)  # type: ignore[attr-defined]


def test_request_carries_fetch_state_of_every_partition() -> None:
    cluster = Cluster()
    request = cluster.session.build_fetch_request(T0)
    assert request is not None and request.replica_id == 2 and request.min_bytes == 1
    assert [(p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch) for p in request.partitions] == \
        [(0, 1, -1)] * 3
    assert cluster.session.build_fetch_request(T0) is None  # one request in flight


def test_fetcher_handles_partition_failure_during_appending() -> None:
    cluster = Cluster()
    cluster.produce()
    broken = TPS[1]
    _fail_writes(cluster.followers[broken].log)  # type: ignore[arg-type]
    outcome = fetch_round(cluster.session, cluster.leaders, T0 + 1)
    assert outcome is not None and outcome.failed == (broken,) and set(outcome.appended) == {TPS[0], TPS[2]}
    assert [cluster.followers[tp].log_end_offset for tp in TPS] == [3, 0, 3]
    assert cluster.session.failed_partitions_count == 1
    (failed,) = events_of(cluster.events, EventType.PARTITION_FAILED)
    assert failed.partition == 1 and failed.fields["leader"] == 1 and failed.broker == 2
    assert cluster.requested(T0 + 2) == {TPS[0], TPS[2]}
    # The same epoch again does not revive it; the next leader epoch does.
    position = follower_of(cluster.followers[broken]).fetch_position()
    assert not cluster.session.add_partition(broken, LeaderEpoch(1), position, T0)
    # Storage takes a log offline after an I/O error; the broker brings the replica back on a fresh log.
    replacement = new_partition(2, topic_partition=broken, events=cluster.events)
    cluster.followers[broken] = replacement
    cluster.leaders[broken].make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((1, 2)), ids((1, 2)), T0 + 3)
    replacement.make_follower(BrokerId(1), LeaderEpoch(2), PartitionEpoch(2), ids((1, 2)), ids((1, 2)), T0 + 3)
    assert cluster.session.add_partition(broken, LeaderEpoch(2), follower_of(replacement).fetch_position(), T0 + 3)
    assert [e.type for e in cluster.events.drain()] == [EventType.PARTITION_UNFAILED]
    assert cluster.session.failed_partitions_count == 0
    for _ in range(3):
        fetch_round(cluster.session, cluster.leaders, T0 + 4)
    assert [cluster.followers[tp].log_end_offset for tp in TPS] == [3, 3, 3]


class _TruncationFails:
    """A follower whose truncation raises, as a broken disk would."""

    def __init__(self, wrapped: Follower) -> None:
        self.wrapped = wrapped

    def fetch_position(self) -> FetchPosition:
        return self.wrapped.fetch_position()

    def append_fetched_records(self, fetch_offset: Offset, records: bytes, leader_high_watermark: Offset,
                               leader_log_start_offset: Offset, now_ms: int) -> FetchPosition:
        return self.wrapped.append_fetched_records(fetch_offset, records, leader_high_watermark,
                                                   leader_log_start_offset, now_ms)

    def truncate_on_divergence(self, diverging_epoch: EpochEndOffset, now_ms: int) -> FetchPosition:
        raise OSError(5, "Input/output error")

    def truncate_on_out_of_range(self, leader_log_start_offset: Offset, leader_log_end_offset: Offset,
                                 leader_high_watermark: Offset, now_ms: int) -> FetchPosition:
        raise OSError(5, "Input/output error")


def test_fetcher_handles_partition_failure_during_truncation() -> None:
    cluster = Cluster(TPS[:2])
    cluster.produce()
    wrapped: dict[TopicPartition, FollowerReplica] = {TPS[0]: follower_of(cluster.followers[TPS[0]]),
                                                      TPS[1]: _TruncationFails(follower_of(cluster.followers[TPS[1]]))}
    session = FetcherSession(BrokerId(2), BrokerId(1), wrapped.get, events=cluster.events)
    for tp in TPS[:2]:
        session.add_partition(tp, LeaderEpoch(1), FetchPosition(Offset(3), LeaderEpoch(0), Offset(0)), T0)
    request = session.build_fetch_request(T0)
    assert request is not None
    diverging = tuple(FetchPartitionData(tp, errors.NONE, Offset(3), Offset(0), Offset(3),
                                         EpochEndOffset(LeaderEpoch(0), Offset(0))) for tp in TPS[:2])
    outcome = session.handle_fetch_response(FetchResponse(request.correlation_id, errors.NONE, diverging), T0)
    assert outcome.truncated == (TPS[0],) and outcome.failed == (TPS[1],)
    (failed,) = events_of(cluster.events, EventType.PARTITION_FAILED)
    assert "OSError" in failed.fields["error"]


def test_fenced_fetch_fails_the_partition_until_a_new_epoch() -> None:
    cluster = Cluster(TPS[:2])
    fenced = cluster.leaders[TPS[0]]
    fenced.make_leader(LeaderEpoch(3), PartitionEpoch(3), ids((1, 2)), ids((1, 2)), T0)  # the follower lags behind
    outcome = fetch_round(cluster.session, cluster.leaders, T0 + 1)
    assert outcome is not None and outcome.failed == (TPS[0],) and outcome.appended == (TPS[1],)
    assert cluster.session.failed_partitions == {TPS[0]}
    (failed,) = events_of(cluster.events, EventType.PARTITION_FAILED)
    assert failed.fields["error"] == "FENCED_LEADER_EPOCH"


def test_unknown_leader_epoch_and_other_errors_back_off_that_partition_only() -> None:
    cluster = Cluster()
    ahead = cluster.followers[TPS[2]]
    ahead.make_follower(BrokerId(1), LeaderEpoch(5), PartitionEpoch(5), ids((1, 2)), ids((1, 2)), T0)
    position = follower_of(ahead).fetch_position()
    cluster.session.add_partition(TPS[2], LeaderEpoch(5), position, T0)  # the leader has not heard
    outcome = fetch_round(cluster.session, cluster.leaders, T0)
    assert outcome is not None and outcome.backed_off == (TPS[2],) and outcome.failed == ()
    assert cluster.session.next_fetch_ms() == 0  # the two healthy partitions are due at once
    assert cluster.requested(T0 + BACKOFF - 1) == {TPS[0], TPS[1]}
    assert cluster.requested(T0 + BACKOFF) == set(TPS)


def test_corrupt_message_backs_off_and_is_not_a_failure() -> None:
    cluster = Cluster(TPS[:1])
    cluster.produce()
    request = cluster.session.build_fetch_request(T0)
    assert request is not None
    good = cluster.leaders[TPS[0]].log.read(0, 1 << 20).records
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])  # the CRC no longer matches
    data = FetchPartitionData(TPS[0], errors.NONE, Offset(0), Offset(0), Offset(3), None, corrupt)
    outcome = cluster.session.handle_fetch_response(FetchResponse(request.correlation_id, errors.NONE, (data,)), T0)
    assert outcome.backed_off == (TPS[0],) and cluster.session.failed_partitions_count == 0
    assert cluster.session.build_fetch_request(T0 + 1) is None
    retried = fetch_round(cluster.session, cluster.leaders, T0 + BACKOFF)
    assert retried is not None and retried.appended == (TPS[0],)


def test_stale_responses_are_ignored_and_a_lost_request_times_out() -> None:
    config = FetcherConfig(request_timeout_ms=30_000, backoff_ms=1_000)
    cluster = Cluster(TPS[:1])
    session = FetcherSession(BrokerId(2), BrokerId(1), cluster.lookup, config)
    session.add_partition(TPS[0], LeaderEpoch(1), follower_of(cluster.followers[TPS[0]]).fetch_position(), T0)
    request = session.build_fetch_request(T0)
    assert request is not None and session.next_fetch_ms() == T0 + 30_000
    stray = FetchResponse(request.correlation_id + 1, errors.NONE, ())
    assert session.handle_fetch_response(stray, T0 + 1).appended == () and session.in_flight == request
    assert session.build_fetch_request(T0 + 29_999) is None
    assert session.build_fetch_request(T0 + 30_000) is None  # timed out: the partition backs off first
    retry = session.build_fetch_request(T0 + 31_000)
    assert retry is not None and retry.correlation_id == request.correlation_id + 1
    late = FetchResponse(request.correlation_id, errors.NONE, ())
    assert session.handle_fetch_response(late, T0 + 31_001).appended == ()


def test_top_level_error_backs_off_every_partition() -> None:
    cluster = Cluster()
    request = cluster.session.build_fetch_request(T0)
    assert request is not None
    response = FetchResponse(request.correlation_id, errors.BY_NAME["NETWORK_EXCEPTION"], ())
    assert set(cluster.session.handle_fetch_response(response, T0).backed_off) == set(TPS)
    assert cluster.session.next_fetch_ms() == T0 + BACKOFF


def test_answers_for_partitions_changed_since_the_request_are_dropped() -> None:
    cluster = Cluster(TPS[:2])
    cluster.produce()
    request = cluster.session.build_fetch_request(T0)
    assert request is not None
    answers = tuple(handle_follower_fetch(cluster.leaders[p.topic_partition],
        BrokerId(2), p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset, 1 << 20,
        T0).data for p in request.partitions)
    cluster.session.remove_partition(TPS[0], T0)
    cluster.session.add_partition(TPS[1], LeaderEpoch(2), follower_of(cluster.followers[TPS[1]]).fetch_position(),
                                  T0)
    outcome = cluster.session.handle_fetch_response(FetchResponse(request.correlation_id, errors.NONE, answers), T0)
    assert outcome.appended == () and [cluster.followers[tp].log_end_offset for tp in TPS[:2]] == [0, 0]


def test_log_start_race_is_handled_by_truncation_never_failure() -> None:
    # Seed 004: a lagging follower (out of the ISR) fetches while the leader deletes records past its offset.
    cluster = Cluster(TPS[:1])
    tp, source, target = TPS[0], cluster.leaders[TPS[0]], cluster.followers[TPS[0]]
    items: list[AlterPartitionItem] = []
    shrink = source.maybe_shrink_isr(T0 + 20_000)
    assert shrink is not None
    source.on_alter_partition_result(shrink, AlterPartitionResult(tp, errors.NONE, BrokerId(1), LeaderEpoch(1),
                                                                  PartitionEpoch(2), ids((1,))), T0 + 20_000)
    for _ in range(5):
        source.append_records_as_leader(batch(2), 1, T0 + 20_001)
    fetch_round(cluster.session, cluster.leaders, T0 + 20_002, max_bytes=1, alter_items=items)  # one batch
    assert target.log_end_offset == 2
    source.delete_records_on_leader(6)  # retention or DeleteRecords moves past the follower's offset
    for round_ms in range(T0 + 20_003, T0 + 20_013):
        fetch_round(cluster.session, cluster.leaders, round_ms, alter_items=items)
    assert cluster.session.failed_partitions_count == 0
    assert follower_of(target).fetch_position() == FetchPosition(Offset(10), LeaderEpoch(1), Offset(6))
    (item,) = items  # caught up: the follower rejoins
    assert item.new_isr == (1, 2)
    assert [e.fields["reason"] for e in events_of(cluster.events, EventType.TRUNCATE)] == ["offset_out_of_range"]


def test_max_lag_and_config_from_broker_settings() -> None:
    cluster = Cluster(TPS[:1])
    cluster.produce(5)
    fetch_round(cluster.session, cluster.leaders, T0 + 1)
    cluster.produce(4, T0 + 2)
    fetch_round(cluster.session, cluster.leaders, T0 + 3, max_bytes=1)
    assert cluster.session.max_lag == 0  # the single-member ISR moved the HW with the leader's appends
    config = BrokerConfig({"replica.fetch.backoff.ms": "250"}).replication.fetch
    assert config.backoff_ms == 250 and config.max_wait_ms == 500 and config.partition_max_bytes == 1_048_576


def test_one_failing_partition_leaves_the_other_nine_in_sync_and_rejoins_on_a_new_epoch() -> None:
    # Seed 002 at unit scale: ten partitions from one leader through one session, one whose appends fail.
    partitions = [TopicPartition("events", p) for p in range(10)]
    cluster = Cluster(partitions)
    broken = partitions[3]
    _fail_writes(cluster.followers[broken].log)  # type: ignore[arg-type]

    def run(start_ms: int, seconds: int) -> None:
        for tick in range(seconds * 2):
            now = start_ms + tick * 500
            cluster.produce(1, now)
            items: list[AlterPartitionItem] = []
            fetch_round(cluster.session, cluster.leaders, now, alter_items=items)
            if tick % 10 == 0:
                items += [item for p in cluster.leaders.values() if (item := p.maybe_shrink_isr(now)) is not None]
            for item in items:  # the controller accepts every proposal
                cluster.leaders[item.topic_partition].on_alter_partition_result(item, AlterPartitionResult(
                    item.topic_partition, errors.NONE, item.leader_id, item.leader_epoch,
                    PartitionEpoch(item.partition_epoch + 1), item.new_isr), now)
            assert cluster.session.failed_partitions_count <= 1

    run(T0, 30)
    assert {tp: tuple(p.isr) for tp, p in cluster.leaders.items() if p.isr != (1, 2)} == {broken: (1,)}
    assert cluster.session.failed_partitions_count == 1
    replacement = new_partition(2, topic_partition=broken, events=cluster.events)
    cluster.followers[broken] = replacement
    source = cluster.leaders[broken]
    source.make_leader(LeaderEpoch(2), PartitionEpoch(source.partition_epoch + 1), ids((1,)), ids((1, 2)), T0 + 30_000)
    replacement.make_follower(BrokerId(1), LeaderEpoch(2), PartitionEpoch(source.partition_epoch), ids((1,)),
                              ids((1, 2)), T0 + 30_000)
    position = follower_of(replacement).fetch_position()
    assert cluster.session.add_partition(broken, LeaderEpoch(2), position, T0 + 30_000)
    run(T0 + 30_000, 10)
    assert all(p.isr == (1, 2) for p in cluster.leaders.values())
    assert cluster.session.failed_partitions_count == 0
    assert replacement.log_end_offset == source.log_end_offset
