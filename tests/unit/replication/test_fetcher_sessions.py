"""FetcherSession in the leader's incremental fetch session (KIP-227, Kafka's FetchSessionHandlerTest): a full
fetch opens it, later fetches list only the partitions whose fetch state changed and forget those that left or back
off, and a lost session, a wrong epoch or a lost request start over with a full fetch."""

from __future__ import annotations

from repl_helpers import T0, batch, follower_of, handle_follower_fetch, ids, leader, new_partition

from insync import errors
from insync.config import FetcherConfig
from insync.replication.fetcher import FetcherSession
from insync.replication.follower import Follower
from insync.replication.messages import (
    INITIAL_EPOCH,
    NO_SESSION,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from insync.replication.partition import Partition
from insync.types import BrokerId, LeaderEpoch, PartitionEpoch, TopicPartition

TPS = [TopicPartition("events", p) for p in range(3)]
BACKOFF = FetcherConfig().backoff_ms
SESSION = 7


class Pair:
    """Leaders on broker 1, followers on broker 2, one fetcher session between them; the leader's side of the
    fetch session is played by `answer`."""

    def __init__(self) -> None:
        self.leaders = {tp: leader(1, isr=(1, 2), replicas=(1, 2), topic_partition=tp) for tp in TPS}
        self.followers: dict[TopicPartition, Partition] = {}
        for tp in TPS:
            found = new_partition(2, topic_partition=tp)
            found.make_follower(BrokerId(1), LeaderEpoch(1), PartitionEpoch(1), ids((1, 2)), ids((1, 2)), T0)
            self.followers[tp] = found
        self.session = FetcherSession(BrokerId(2), BrokerId(1), self.lookup)
        for tp, found in self.followers.items():
            self.session.add_partition(tp, LeaderEpoch(1), follower_of(found).fetch_position(), T0)

    def lookup(self, tp: TopicPartition) -> Follower | None:
        return self.followers[tp].follower

    def request(self, now_ms: int) -> FetchRequest:
        request = self.session.build_fetch_request(now_ms)
        assert request is not None
        return request

    def answer(self, request: FetchRequest, now_ms: int, tps: list[TopicPartition], session_id: int = SESSION) -> None:
        """The leader's answer for `tps` (read at the follower's fetch offsets) in session `session_id`."""
        offsets = {p.topic_partition: p for p in request.partitions}
        datas = []
        for tp in tps:
            fetch_offset = offsets[tp].fetch_offset if tp in offsets else self.followers[tp].log.log_end_offset
            result = handle_follower_fetch(self.leaders[tp], BrokerId(2), fetch_offset, LeaderEpoch(1),
                                           LeaderEpoch(-1), self.leaders[tp].log.log_start_offset, 1 << 20, now_ms)
            datas.append(result.data)
        self.session.handle_fetch_response(FetchResponse(request.correlation_id, errors.NONE, tuple(datas),
                                                         session_id), now_ms)


def listed(request: FetchRequest) -> list[TopicPartition]:
    return [p.topic_partition for p in request.partitions]


def test_a_full_fetch_opens_the_session_then_fetches_list_only_what_changed() -> None:
    pair = Pair()
    first = pair.request(T0)
    assert (first.session_id, first.session_epoch, listed(first)) == (NO_SESSION, INITIAL_EPOCH, TPS)
    pair.answer(first, T0, TPS)
    second = pair.request(T0 + 1)
    assert (second.session_id, second.session_epoch, listed(second), second.forgotten) == (SESSION, 1, [], ())
    pair.leaders[TPS[1]].append_records_as_leader(batch(3), 1, T0 + 2)
    pair.answer(second, T0 + 2, [TPS[1]])  # only the partition with news comes back
    third = pair.request(T0 + 3)
    assert (third.session_epoch, listed(third)) == (2, [TPS[1]])
    assert third.partitions[0].fetch_offset == 3


def test_a_partition_that_backs_off_or_leaves_is_forgotten_and_listed_again_when_it_returns() -> None:
    pair = Pair()
    first = pair.request(T0)
    pair.answer(first, T0, TPS)
    second = pair.request(T0 + 1)
    pair.session.handle_fetch_response(FetchResponse(second.correlation_id, errors.NONE, (
        FetchPartitionData(TPS[0], errors.NOT_LEADER_OR_FOLLOWER),), SESSION), T0 + 1)
    pair.session.remove_partition(TPS[2], T0 + 1)
    third = pair.request(T0 + 2)
    assert (listed(third), set(third.forgotten)) == ([], {TPS[0], TPS[2]})
    pair.answer(third, T0 + 2, [])
    back = pair.request(T0 + 2 + BACKOFF)
    assert (back.session_epoch, listed(back), back.forgotten) == (3, [TPS[0]], ())


def test_a_session_error_starts_over_with_a_full_fetch_at_once() -> None:
    for error in ("FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"):
        pair = Pair()
        first = pair.request(T0)
        pair.answer(first, T0, TPS)
        second = pair.request(T0 + 1)
        pair.session.handle_fetch_response(FetchResponse(second.correlation_id, errors.BY_NAME[error], ()), T0 + 1)
        again = pair.request(T0 + 1)  # no back-off
        assert (again.session_id, again.session_epoch, listed(again)) == (NO_SESSION, INITIAL_EPOCH, TPS)


def test_a_lost_fetch_ends_the_session() -> None:
    pair = Pair()
    first = pair.request(T0)
    pair.answer(first, T0, TPS)
    second = pair.request(T0 + 1)
    pair.session.handle_fetch_error(second.correlation_id, T0 + 1)
    again = pair.request(T0 + 1 + BACKOFF)
    assert (again.session_id, again.session_epoch, listed(again)) == (NO_SESSION, INITIAL_EPOCH, TPS)


def test_a_leader_that_keeps_no_session_gets_full_fetches() -> None:
    pair = Pair()
    for now_ms in (T0, T0 + 1, T0 + 2):
        request = pair.request(now_ms)
        assert (request.session_epoch, listed(request)) == (INITIAL_EPOCH, TPS)
        pair.answer(request, now_ms, TPS, session_id=NO_SESSION)


def test_an_answer_from_another_session_ends_this_one() -> None:
    pair = Pair()
    first = pair.request(T0)
    pair.answer(first, T0, TPS)
    second = pair.request(T0 + 1)
    pair.answer(second, T0 + 1, [], session_id=SESSION + 1)
    assert pair.request(T0 + 2).session_epoch == INITIAL_EPOCH


def test_a_partition_refused_in_the_opening_fetch_is_forgotten_then_fetched_again() -> None:
    """The only partition of a session, refused by a leader that does not know its topic id yet (its metadata behind
    the follower's), backs off; the next request forgets it even though it fetches nothing (as Kafka's fetcher
    sends one while there is something to forget), so once due it is listed again instead of being left out for
    good as "unchanged" while the leader's session never held it."""
    pair = Pair()
    only = TPS[0]
    for tp in TPS[1:]:
        pair.session.remove_partition(tp, T0)
    first = pair.request(T0)
    assert listed(first) == [only]
    pair.session.handle_fetch_response(FetchResponse(first.correlation_id, errors.NONE, (
        FetchPartitionData(only, errors.UNKNOWN_TOPIC_ID),), SESSION), T0)
    forgets = pair.request(T0 + 1)
    assert (listed(forgets), forgets.forgotten, forgets.session_id) == ([], (only,), SESSION)
    pair.answer(forgets, T0 + 1, [])
    again = pair.request(T0 + 1 + BACKOFF)
    assert (listed(again), again.session_id) == ([only], SESSION)
