"""FetcherSession's requests in the leader's incremental fetch session: the same as a builder that walks every
partition on each fetch (`fetcher_reference.py`) under seeded random adds, removes, answers, errors, back-offs,
timeouts and throttles, while an incremental fetch looks only at the partitions that changed or back off."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from fetcher_reference import ReferenceFetcherSession

from insync import errors
from insync.config import FetcherConfig
from insync.errors import KafkaException
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetcherSession
from insync.replication.follower import FetchPosition
from insync.replication.messages import (
    INITIAL_EPOCH,
    NO_SESSION,
    EpochEndOffset,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from insync.types import BrokerId, LeaderEpoch, Offset, TopicPartition

CORRUPT = b"corrupt"  # records the stand-in replica refuses as corrupt (backed off)
BROKEN = b"broken"  # records whose append raises an unexpected error (the partition fails)
SESSION_IDS = (7, 8)
SEEDS = range(60)
STEPS = 400


class StandInReplica:
    """A follower whose answers depend only on what it is given, so two sessions driven alike see the same."""

    def __init__(self) -> None:
        self.position = FetchPosition(Offset(0), LeaderEpoch(-1), Offset(0))

    def fetch_position(self) -> FetchPosition:
        return self.position

    def append_fetched_records(self, fetch_offset: Offset, records: bytes, leader_high_watermark: Offset,
                               leader_log_start_offset: Offset, now_ms: int) -> FetchPosition:
        if records == CORRUPT:
            raise KafkaException(errors.CORRUPT_MESSAGE, "the CRC does not match")
        if records == BROKEN:
            raise OSError("no space left on device")
        epoch = LeaderEpoch(len(records) % 3) if records else self.position.last_fetched_epoch
        self.position = FetchPosition(Offset(fetch_offset + len(records)), epoch,
                                      Offset(max(self.position.log_start_offset, leader_log_start_offset)))
        return self.position

    def truncate_on_divergence(self, diverging_epoch: EpochEndOffset, now_ms: int) -> FetchPosition:
        self.position = FetchPosition(Offset(min(self.position.fetch_offset, diverging_epoch.end_offset)),
                                      diverging_epoch.epoch, self.position.log_start_offset)
        return self.position

    def truncate_on_out_of_range(self, leader_log_start_offset: Offset, leader_log_end_offset: Offset,
                                 leader_high_watermark: Offset, now_ms: int) -> FetchPosition:
        if leader_log_end_offset >= 0:  # a negative one leaves the position as it is: the session backs off
            self.position = FetchPosition(leader_log_end_offset, LeaderEpoch(-1), leader_log_start_offset)
        return self.position


@dataclass
class World:
    """Both sessions, each with its own stand-in replicas, and what they share: which partitions are hosted and
    whether the follower's replication throttle is set."""

    rng: random.Random
    tps: list[TopicPartition]
    config: FetcherConfig
    now_ms: int = 1_000
    throttled: bool = False
    hosted: set[TopicPartition] = field(default_factory=set)
    epochs: dict[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.hosted = set(self.tps)
        self.replicas = {tp: StandInReplica() for tp in self.tps}
        self.reference_replicas = {tp: StandInReplica() for tp in self.tps}
        self.session = FetcherSession(BrokerId(2), BrokerId(1), self._lookup(self.replicas), self.config,
                                      events=EventBuffer())
        self.reference = ReferenceFetcherSession(BrokerId(2), BrokerId(1), self._lookup(self.reference_replicas),
                                                 self.config, events=EventBuffer(), held_back=self._reference_held)

    def _lookup(self, replicas: dict[TopicPartition, StandInReplica]
                ) -> Callable[[TopicPartition], StandInReplica | None]:
        return lambda tp: replicas[tp] if tp in self.hosted else None

    def _held(self, tp: TopicPartition, now_ms: int) -> bool:
        return (tp.partition * 7 + now_ms) % 5 == 0

    def _reference_held(self, tp: TopicPartition, now_ms: int) -> bool:
        return self.throttled and self._held(tp, now_ms)  # as ReplicaFetchers: nothing is held back unthrottled

    # --- Steps ------------------------------------------------------------------------------------------------

    def add(self) -> str:
        tp = self.rng.choice(self.tps)
        epoch = LeaderEpoch(self.epochs.get(tp, 0) + self.rng.choice((0, 1, 1)))
        self.epochs[tp] = epoch
        position = self.replicas[tp].fetch_position()
        assert position == self.reference_replicas[tp].fetch_position()
        changed = self.session.add_partition(tp, epoch, position, self.now_ms)
        assert changed == self.reference.add_partition(tp, epoch, position, self.now_ms)
        return f"add {tp} at epoch {epoch}"

    def remove(self) -> str:
        tp = self.rng.choice(self.tps)
        self.session.remove_partition(tp, self.now_ms)
        self.reference.remove_partition(tp, self.now_ms)
        return f"remove {tp}"

    def build(self) -> str:
        if self.rng.random() < 0.1:
            self.throttled = not self.throttled
        request = self.session.build_fetch_request(self.now_ms, held_back=self._held if self.throttled else None)
        assert request == self.reference.build_fetch_request(self.now_ms)
        return f"build at {self.now_ms} (throttled: {self.throttled}): {request}"

    def answer(self) -> str:
        request = self.reference.in_flight
        if request is None:
            return "no answer: nothing in flight"
        response = self._response(request)
        outcome = self.session.handle_fetch_response(response, self.now_ms)
        assert outcome == self.reference.handle_fetch_response(response, self.now_ms)
        return f"answer {response}"

    def lose(self) -> str:
        request = self.reference.in_flight
        correlation_id = request.correlation_id if request is not None and self.rng.random() < 0.8 else 10**6
        self.session.handle_fetch_error(correlation_id, self.now_ms)
        self.reference.handle_fetch_error(correlation_id, self.now_ms)
        return f"lose {correlation_id}"

    def wait(self) -> str:
        self.now_ms += self.rng.choice((0, 1, 7, 50, self.config.backoff_ms, self.config.request_timeout_ms))
        if self.rng.random() < 0.05:
            self.hosted ^= {self.rng.choice(self.tps)}
        return f"wait until {self.now_ms}"

    def _response(self, request: FetchRequest) -> FetchResponse:
        roll = self.rng.random()
        if roll < 0.04:
            return FetchResponse(request.correlation_id, errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"], ())
        if roll < 0.08:
            return FetchResponse(request.correlation_id, errors.BY_NAME["NETWORK_EXCEPTION"], ())
        if request.session_epoch == INITIAL_EPOCH:
            session_id = NO_SESSION if self.rng.random() < 0.1 else self.rng.choice(SESSION_IDS)
        else:
            session_id = request.session_id if self.rng.random() < 0.95 else NO_SESSION
        answered = self.rng.sample(self.tps, self.rng.randint(0, len(self.tps) // 2))
        return FetchResponse(request.correlation_id, errors.NONE, tuple(self._data(tp) for tp in answered),
                             session_id)

    def _data(self, tp: TopicPartition) -> FetchPartitionData:
        roll = self.rng.random()
        offset = Offset(self.rng.randint(0, 20))
        if roll < 0.05:
            return FetchPartitionData(tp, errors.FENCED_LEADER_EPOCH)
        if roll < 0.12:
            return FetchPartitionData(tp, errors.NOT_LEADER_OR_FOLLOWER)
        if roll < 0.2:
            end = Offset(self.rng.choice((-1, 3, 9)))
            return FetchPartitionData(tp, errors.OFFSET_OUT_OF_RANGE, offset, Offset(0), end)
        if roll < 0.27:
            diverging = EpochEndOffset(LeaderEpoch(self.rng.randint(0, 3)), offset)
            return FetchPartitionData(tp, errors.NONE, offset, Offset(0), diverging_epoch=diverging)
        records = self.rng.choice((CORRUPT, BROKEN, b"", b"", b"a", b"abcd")) if roll < 0.35 else b""
        return FetchPartitionData(tp, errors.NONE, offset, Offset(self.rng.randint(0, 2)), records=records)

    def check(self) -> None:
        """Everything the sessions show outside: states in fetch order, failures, events, when to fetch next."""
        assert list(self.session.partitions.items()) == list(self.reference.partitions.items())
        assert self.session.failed_partitions == self.reference.failed_partitions
        assert self.session.next_fetch_ms() == self.reference.next_fetch_ms()
        assert self.session.in_flight == self.reference.in_flight
        assert self.session.max_lag == self.reference.max_lag
        assert self.session.events.drain() == self.reference.events.drain()


@pytest.mark.parametrize("seed", SEEDS)
def test_requests_are_those_of_a_builder_that_walks_every_partition(seed: int) -> None:
    rng = random.Random(seed)
    config = FetcherConfig(backoff_ms=rng.choice((0, 100, 1_000)), request_timeout_ms=5_000, max_wait_ms=500)
    world = World(rng, [TopicPartition(topic, p) for topic in ("a", "b") for p in range(rng.randint(1, 8))],
                  config)
    steps = (world.add, world.add, world.remove, world.build, world.build, world.build, world.answer,
             world.answer, world.answer, world.lose, world.wait, world.wait, world.wait)
    history: list[str] = []
    for tp in world.tps:
        history.append(world.add() if rng.random() < 0.8 else f"{tp} left out")
    for _ in range(STEPS):
        try:
            history.append(rng.choice(steps)())
            world.check()
        except AssertionError:
            print(f"seed {seed}, steps so far:\n" + "\n".join(history[-20:]))
            raise


class CountingDict(dict[TopicPartition, object]):
    """A session's mapping that counts the entries read: how much of the session a step looks at."""

    reads = 0

    def get(self, key: TopicPartition, default: object = None) -> object:
        CountingDict.reads += 1
        return super().get(key, default)

    def __getitem__(self, key: TopicPartition) -> object:
        CountingDict.reads += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        CountingDict.reads += 1
        return super().__contains__(key)

    def __iter__(self) -> Iterator[TopicPartition]:
        for key in super().__iter__():
            CountingDict.reads += 1
            yield key

    def items(self) -> Iterator[tuple[TopicPartition, object]]:  # type: ignore[override]
        for item in super().items():
            CountingDict.reads += 1
            yield item

    def values(self) -> Iterator[object]:  # type: ignore[override]
        for value in super().values():
            CountingDict.reads += 1
            yield value


def _established(session: FetcherSession | ReferenceFetcherSession, count: int) -> int:
    """`count` partitions in an open incremental session with nothing in flight; the time it is at."""
    replica = StandInReplica()
    for p in range(count):
        session.add_partition(TopicPartition("idle", p), LeaderEpoch(1), replica.fetch_position(), 0)
    opening = session.build_fetch_request(0)
    assert opening is not None and len(opening.partitions) == count
    session.handle_fetch_response(FetchResponse(opening.correlation_id, errors.NONE, (), SESSION_IDS[0]), 0)
    return 1


def _reads_of_one_changed_fetch(session: FetcherSession | ReferenceFetcherSession) -> tuple[int, FetchRequest]:
    now_ms = _established(session, 3_000)
    changed = TopicPartition("idle", 1_234)
    idle = session.build_fetch_request(now_ms)
    assert idle is not None and idle.partitions == () and idle.forgotten == ()
    data = FetchPartitionData(changed, errors.NONE, Offset(3), Offset(0), records=b"abc")
    session.handle_fetch_response(FetchResponse(idle.correlation_id, errors.NONE, (data,), SESSION_IDS[0]), now_ms)
    session._partitions = CountingDict(session._partitions)  # type: ignore[assignment]
    session._session_view = CountingDict(session._session_view)  # type: ignore[assignment]
    CountingDict.reads = 0
    assert session.next_fetch_ms() is not None
    request = session.build_fetch_request(now_ms)
    assert request is not None
    return CountingDict.reads, request


def test_an_incremental_fetch_reads_only_the_changed_partition_of_three_thousand() -> None:
    reads, request = _reads_of_one_changed_fetch(FetcherSession(BrokerId(2), BrokerId(1), lambda tp: StandInReplica()))
    assert [p.topic_partition for p in request.partitions] == [TopicPartition("idle", 1_234)]
    assert request.partitions[0].fetch_offset == 3 and request.forgotten == ()
    assert reads <= 4, reads  # the changed partition's state and its entry in the view
    walked, same = _reads_of_one_changed_fetch(ReferenceFetcherSession(BrokerId(2), BrokerId(1),
                                                                       lambda tp: StandInReplica()))
    assert same == request and walked >= 3 * 3_000  # the counting sees a walk: every state, view entry, check
