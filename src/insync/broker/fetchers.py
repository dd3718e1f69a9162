"""The follower side of a broker: one `FetcherSession` per leader broker, carrying all partitions it leads.

`assign` moves a partition to the session of its current leader (a newer leader epoch restarts it there, and
un-fails it if KIP-461 had failed it); `remove` takes it out when this broker leads it or stops hosting it.
After every response and at every tick each idle session sends its next request (the leader long-polls it up
to `replica.fetch.wait.max.ms`), unless its partitions are backing off. Each request carries this broker's
current broker epoch (`broker_epoch`, from its registration), so leaders tie their view of it to this life. A
partition the follower's replication throttle holds back (`broker.throttles`) waits out of the requests. `failed_partitions_count` is Kafka's
`FailedPartitionsCount` over all sessions.
"""

from __future__ import annotations

from collections.abc import Callable

from insync.broker.throttles import ReplicationThrottles
from insync.config import FetcherConfig
from insync.limits import BROKERS_MAX
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetcherSession
from insync.replication.follower import FollowerReplica
from insync.replication.messages import FetchResponse
from insync.replication.partition import Partition
from insync.types import (
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Outgoing,
    TopicPartition,
)

NEVER = 2**62


class ReplicaFetchers:
    def __init__(self, broker_id: BrokerId, config: FetcherConfig, partitions: dict[TopicPartition, Partition],
                 events: EventBuffer, broker_epoch: Callable[[], BrokerEpoch] = lambda: UNKNOWN_BROKER_EPOCH,
                 throttles: ReplicationThrottles | None = None) -> None:
        self.broker_id = broker_id
        self._throttles = throttles  # the follower's replication throttle (`broker.throttles`), if any
        self._broker_epoch = broker_epoch
        self._config = config
        self._partitions = partitions
        self._events = events
        self.sessions: dict[BrokerId, FetcherSession] = {}
        self._leader_of: dict[TopicPartition, BrokerId] = {}

    def _lookup(self, tp: TopicPartition) -> FollowerReplica | None:
        partition = self._partitions.get(tp)
        return partition.follower if partition is not None else None

    @property
    def failed_partitions_count(self) -> int:
        return sum(session.failed_partitions_count for session in self.sessions.values())

    def assign(self, now_ms: int, tp: TopicPartition, leader: BrokerId, leader_epoch: LeaderEpoch) -> None:
        """Fetch `tp` from `leader` at `leader_epoch` (no leader: stop fetching it)."""
        previous = self._leader_of.get(tp)
        if previous is not None and previous != leader:
            self.sessions[previous].remove_partition(tp, now_ms)
            del self._leader_of[tp]
        if leader == NO_LEADER:
            return
        follower = self._partitions[tp].follower
        assert follower is not None, f"{tp}: this broker leads it"
        session = self.sessions.get(leader)
        if session is None:
            assert len(self.sessions) < BROKERS_MAX
            session = FetcherSession(self.broker_id, leader, self._lookup, self._config, events=self._events)
            self.sessions[leader] = session
        session.add_partition(tp, leader_epoch, follower.fetch_position(), now_ms)
        self._leader_of[tp] = leader

    def remove(self, now_ms: int, tp: TopicPartition) -> None:
        leader = self._leader_of.pop(tp, None)
        if leader is not None:
            self.sessions[leader].remove_partition(tp, now_ms)

    def on_response(self, now_ms: int, leader: BrokerId, response: FetchResponse) -> list[Outgoing]:
        session = self.sessions.get(leader)
        if session is None:
            return []
        if self._throttles is not None and self._throttles.is_set(leader=False):
            for data in response.partitions:
                self._throttles.record(data.topic_partition, len(data.records), now_ms, leader=False)
        session.handle_fetch_response(response, now_ms)
        return self._send(now_ms, session)

    def _held_back(self, tp: TopicPartition, now_ms: int) -> bool:
        assert self._throttles is not None and self._throttles.is_set(leader=False)
        partition = self._partitions.get(tp)
        in_sync = partition is not None and self.broker_id in partition.isr
        return self._throttles.holds_back(tp, in_sync, now_ms, leader=False)

    def on_error(self, now_ms: int, leader: BrokerId, correlation_id: int) -> list[Outgoing]:
        """The fetch got no answer (connection lost or timed out): its partitions back off, then retry."""
        session = self.sessions.get(leader)
        if session is None:
            return []
        session.handle_fetch_error(correlation_id, now_ms)
        return self._send(now_ms, session)

    def tick(self, now_ms: int) -> list[Outgoing]:
        commands: list[Outgoing] = []
        for session in self.sessions.values():
            commands.extend(self._send(now_ms, session))
        return commands

    def _send(self, now_ms: int, session: FetcherSession) -> list[Outgoing]:
        # Asked of every partition fetched only while a follower rate is set: otherwise none is held back, and a
        # fetch in the leader's session looks at the changed partitions alone.
        throttled = self._throttles is not None and self._throttles.is_set(leader=False)
        request = session.build_fetch_request(now_ms, self._broker_epoch(), self._held_back if throttled else None)
        return [] if request is None else [Outgoing(session.leader_id, request)]

    def next_deadline_ms(self) -> int:
        deadlines = [session.next_fetch_ms() for session in self.sessions.values()]
        return min((d for d in deadlines if d is not None), default=NEVER)
