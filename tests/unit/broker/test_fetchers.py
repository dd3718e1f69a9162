"""KIP-461 through the broker's fetcher manager: a failing partition is isolated, and a new leader epoch
re-adds it; the other partitions of the same session keep fetching."""

from __future__ import annotations

from typing import Any

from insync import errors
from insync.broker.fetchers import ReplicaFetchers
from insync.config import BrokerConfig
from insync.replication.event_buffer import EventBuffer
from insync.replication.follower import FetchPosition
from insync.replication.messages import FetchPartitionData, FetchRequest, FetchResponse
from insync.types import BrokerEpoch, BrokerId, LeaderEpoch, Offset, Outgoing, TopicPartition


class FakeFollower:
    """Stands in for a follower Partition and its follower role; `fail` makes its next append raise like a
    broken disk."""

    def __init__(self) -> None:
        self.leo = 0
        self.fail = False

    @property
    def follower(self) -> FakeFollower:
        return self

    def fetch_position(self) -> FetchPosition:
        return FetchPosition(Offset(self.leo), LeaderEpoch(-1), Offset(0))

    def append_fetched_records(self, fetch_offset: Offset, records: bytes, hw: Offset, log_start: Offset,
                               now_ms: int) -> FetchPosition:
        if self.fail:
            raise OSError(5, "injected")
        self.leo += 1
        return self.fetch_position()


def _request(commands: list[Outgoing]) -> FetchRequest:
    [out] = commands
    assert out.destination == 2 and isinstance(out.message, FetchRequest)
    return out.message


def test_failed_partition_is_isolated_and_unfailed_by_a_new_leader_epoch() -> None:
    tps = [TopicPartition("t", p) for p in range(3)]
    followers: dict[TopicPartition, Any] = {tp: FakeFollower() for tp in tps}
    events = EventBuffer()
    fetchers = ReplicaFetchers(BrokerId(1), BrokerConfig().replication.fetch, followers, events)
    for tp in tps:
        fetchers.assign(0, tp, BrokerId(2), LeaderEpoch(5))
    request = _request(fetchers.tick(0))
    assert {p.topic_partition for p in request.partitions} == set(tps)
    followers[tps[0]].fail = True
    response = FetchResponse(request.correlation_id, errors.NONE,
                             tuple(FetchPartitionData(tp, errors.NONE, Offset(1), Offset(0), Offset(1)) for tp in tps))
    next_request = _request(fetchers.on_response(10, BrokerId(2), response))
    assert fetchers.failed_partitions_count == 1
    assert {p.topic_partition for p in next_request.partitions} == set(tps[1:])
    assert [e.type.value for e in events.drain()] == ["partition_failed"]
    # The same epoch does not bring it back; the next one does.
    fetchers.assign(20, tps[0], BrokerId(2), LeaderEpoch(5))
    assert fetchers.failed_partitions_count == 1
    followers[tps[0]].fail = False
    fetchers.assign(30, tps[0], BrokerId(2), LeaderEpoch(6))
    assert fetchers.failed_partitions_count == 0
    assert [e.type.value for e in events.drain()] == ["partition_unfailed"]


def test_moving_a_partition_to_another_leader_and_stopping() -> None:
    tp = TopicPartition("t", 0)
    followers: dict[TopicPartition, Any] = {tp: FakeFollower()}
    fetchers = ReplicaFetchers(BrokerId(1), BrokerConfig().replication.fetch, followers, EventBuffer())
    fetchers.assign(0, tp, BrokerId(2), LeaderEpoch(1))
    fetchers.assign(0, tp, BrokerId(3), LeaderEpoch(2))
    out = fetchers.tick(0)
    assert [o.destination for o in out] == [3]
    fetchers.remove(0, tp)
    assert fetchers.tick(100_000) == []


def test_stopping_a_failed_partition_clears_the_failure_and_says_so() -> None:
    tps = [TopicPartition("t", p) for p in range(2)]
    followers: dict[TopicPartition, Any] = {tp: FakeFollower() for tp in tps}
    events = EventBuffer()
    fetchers = ReplicaFetchers(BrokerId(1), BrokerConfig().replication.fetch, followers, events)
    for tp in tps:
        fetchers.assign(0, tp, BrokerId(2), LeaderEpoch(5))
    request = _request(fetchers.tick(0))
    followers[tps[0]].fail = True
    response = FetchResponse(request.correlation_id, errors.NONE,
                             tuple(FetchPartitionData(tp, errors.NONE, Offset(1), Offset(0), Offset(1)) for tp in tps))
    fetchers.on_response(10, BrokerId(2), response)
    assert fetchers.failed_partitions_count == 1
    fetchers.remove(20, tps[0])  # e.g. this broker became its leader, or the topic was deleted
    assert fetchers.failed_partitions_count == 0
    assert [(e.type.value, e.ts_ms) for e in events.drain()] == [("partition_failed", 10), ("partition_unfailed", 20)]


def test_every_fetch_carries_the_broker_epoch_of_this_life() -> None:
    tp = TopicPartition("t", 0)
    followers: dict[TopicPartition, Any] = {tp: FakeFollower()}
    epoch = [BrokerEpoch(-1)]  # not registered yet
    fetchers = ReplicaFetchers(BrokerId(1), BrokerConfig().replication.fetch, followers, EventBuffer(), lambda: epoch[0])
    fetchers.assign(0, tp, BrokerId(2), LeaderEpoch(1))
    request = _request(fetchers.tick(0))
    assert request.replica_epoch == -1
    epoch[0] = BrokerEpoch(12)  # registered (again): KIP-903 ties the leader's view of us to this life
    response = FetchResponse(request.correlation_id, errors.NONE,
                             (FetchPartitionData(tp, errors.NONE, Offset(1), Offset(0), Offset(1)),))
    assert _request(fetchers.on_response(10, BrokerId(2), response)).replica_epoch == 12
