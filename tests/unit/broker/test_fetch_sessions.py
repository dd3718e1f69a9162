"""The leader's incremental fetch sessions (KIP-227; Kafka's FetchSessionTest): a full fetch opens one, later fetches
carry only changes and are served as the whole session, answers keep only partitions with news, and the errors a
follower restarts from (an unknown id, a wrong epoch) change nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

from fetch_helpers import T0, A, B, answered, append, follower_request, leaders

from insync import errors
from insync.broker.fetch_serving import FetchServer
from insync.broker.fetch_sessions import FULL_WALK_INTERVAL_MS, FetchSessions, SessionContext
from insync.replication.messages import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    SESSION_EPOCH_MAX,
    AlterPartitionResult,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    next_session_epoch,
)
from insync.replication.partition import Partition
from insync.types import BrokerId, LeaderEpoch, Offset, Outgoing, PartitionEpoch, TopicPartition

FOLLOWER = 2  # the follower broker's address, as the core sees it
NOT_FOUND = errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
BAD_EPOCH = errors.BY_NAME["INVALID_FETCH_SESSION_EPOCH"]


def full(offsets: dict[TopicPartition, int], replica: int = 2, epoch: int = INITIAL_EPOCH) -> FetchRequest:
    request = follower_request(1, replica, offsets)
    return FetchRequest(request.correlation_id, request.replica_id, request.max_wait_ms, request.min_bytes,
                        request.max_bytes, request.partitions, session_epoch=epoch)


def incremental(session_id: int, epoch: int, changed: dict[TopicPartition, int],
                forgotten: tuple[TopicPartition, ...] = (), replica: int = 2) -> FetchRequest:
    request = full(changed, replica)
    return FetchRequest(request.correlation_id, request.replica_id, request.max_wait_ms, request.min_bytes,
                        request.max_bytes, request.partitions, session_id=session_id, session_epoch=epoch,
                        forgotten=forgotten)


def opened(sessions: FetchSessions, request: FetchRequest) -> SessionContext:
    context = sessions.open(request)
    assert isinstance(context, SessionContext), context
    return context


def data(tp: TopicPartition, high_watermark: int, records: bytes = b"",
         error: errors.KafkaError = errors.NONE) -> FetchPartitionData:
    if error is not errors.NONE:
        return FetchPartitionData(tp, error)
    return FetchPartitionData(tp, errors.NONE, Offset(high_watermark), Offset(0), records=records)


def offsets_of(context: SessionContext) -> dict[TopicPartition, int]:
    return {p.topic_partition: p.fetch_offset for p in context.request.partitions}


def test_a_full_fetch_at_the_initial_epoch_opens_a_session_and_gets_every_partition() -> None:
    sessions = FetchSessions()
    context = opened(sessions, full({A: 0, B: 0}))
    assert context.session_id != NO_SESSION and not context.incremental and len(sessions) == 1
    answers = (data(A, 0), data(B, 0))
    assert sessions.respond(context, answers) == answers


def test_a_full_fetch_at_the_final_epoch_stays_outside_any_session() -> None:
    sessions = FetchSessions()
    context = opened(sessions, full({A: 0}, epoch=FINAL_EPOCH))
    assert context.session_id == NO_SESSION and len(sessions) == 0
    assert sessions.respond(context, (data(A, 0),)) == (data(A, 0),)


def test_an_incremental_fetch_is_served_as_the_whole_session_with_its_changes() -> None:
    sessions = FetchSessions()
    first = opened(sessions, full({A: 0, B: 0}))
    sessions.respond(first, (data(A, 0), data(B, 0)))
    second = opened(sessions, incremental(first.session_id, 1, {A: 5}))
    assert second.incremental and offsets_of(second) == {A: 5, B: 0}
    third = opened(sessions, incremental(first.session_id, 2, {}, forgotten=(B,)))
    assert offsets_of(third) == {A: 5} and sessions.partitions_cached == 1


def test_an_incremental_answer_keeps_only_the_partitions_with_news() -> None:
    sessions = FetchSessions()
    first = opened(sessions, full({A: 0, B: 0}))
    sessions.respond(first, (data(A, 0), data(B, 0)))
    second = opened(sessions, incremental(first.session_id, 1, {}))
    assert sessions.respond(second, (data(A, 0), data(B, 0))) == ()  # nothing new: an empty answer
    third = opened(sessions, incremental(first.session_id, 2, {}))
    assert sessions.respond(third, (data(A, 3), data(B, 0, b"batch"))) == (data(A, 3), data(B, 0, b"batch"))
    fourth = opened(sessions, incremental(first.session_id, 3, {}))
    assert sessions.respond(fourth, (data(A, 3), data(B, 0))) == ()


def test_a_partition_in_error_is_always_answered_and_again_once_it_recovers() -> None:
    sessions = FetchSessions()
    first = opened(sessions, full({A: 0}))
    sessions.respond(first, (data(A, 7),))
    failing = data(A, 0, error=errors.NOT_LEADER_OR_FOLLOWER)
    for epoch in (1, 2):
        context = opened(sessions, incremental(first.session_id, epoch, {}))
        assert sessions.respond(context, (failing,)) == (failing,)
    recovered = opened(sessions, incremental(first.session_id, 3, {}))
    assert sessions.respond(recovered, (data(A, 7),)) == (data(A, 7),)  # the same offsets as before the error


def test_an_unknown_session_another_brokers_session_and_a_wrong_epoch_are_refused_and_change_nothing() -> None:
    sessions = FetchSessions()
    first = opened(sessions, full({A: 0}))
    assert sessions.open(incremental(first.session_id + 1, 1, {A: 3})) is NOT_FOUND
    assert sessions.open(incremental(first.session_id, 1, {A: 3}, replica=3)) is NOT_FOUND
    assert sessions.open(incremental(first.session_id, 2, {A: 3})) is BAD_EPOCH
    assert offsets_of(opened(sessions, incremental(first.session_id, 1, {}))) == {A: 0}


def test_a_new_full_fetch_replaces_the_followers_session_and_the_oldest_is_evicted_at_capacity() -> None:
    sessions = FetchSessions(capacity=2)
    first = opened(sessions, full({A: 0}, replica=2))
    again = opened(sessions, full({A: 0}, replica=2))
    assert len(sessions) == 1 and sessions.open(incremental(first.session_id, 1, {})) is NOT_FOUND
    opened(sessions, full({A: 0}, replica=3))
    opened(sessions, full({A: 0}, replica=4))
    assert len(sessions) == 2 and sessions.open(incremental(again.session_id, 1, {})) is NOT_FOUND
    sessions.forget(BrokerId(4))
    assert len(sessions) == 1


def test_session_epochs_wrap_to_one() -> None:
    assert next_session_epoch(INITIAL_EPOCH) == 1
    assert next_session_epoch(SESSION_EPOCH_MAX) == 1


def test_the_fetch_server_answers_a_parked_incremental_fetch_with_only_what_was_appended() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    append(partitions[A], 1, T0)  # so that the full fetch is answered at once
    outcome = server.follower_fetch(T0, FOLLOWER, full({A: 0, B: 0}))
    ((_, response),) = [(c.destination, c.message) for c in outcome.commands if isinstance(c, Outgoing)]
    assert isinstance(response, FetchResponse) and response.session_id != NO_SESSION
    assert [p.topic_partition for p in response.partitions] == [A, B]
    parked = server.follower_fetch(T0 + 1, FOLLOWER, incremental(response.session_id, 1, {A: 1}))
    assert parked.commands == [] and server.purgatory_size == 1
    append(partitions[B], 2, T0 + 2)
    woken = server.wake(T0 + 2, {B: 100})
    assert answered(woken) == [(FOLLOWER, 1)]
    (command,) = woken.commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse)
    assert [(p.topic_partition, bool(p.records)) for p in command.message.partitions] == [(B, True)]


class CountingReads:
    """A log that counts its reads, and is otherwise the log it wraps."""

    def __init__(self, log: Any) -> None:
        self.log, self.reads = log, 0

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return self.log.read(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


def parked_with_a_read_of_a() -> tuple[dict[TopicPartition, Partition], FetchServer, CountingReads]:
    """A session of A and B, then an incremental fetch that read A once and waits in the purgatory."""
    partitions = leaders()
    server = FetchServer(partitions.get)
    append(partitions[A], 1, T0)
    outcome = server.follower_fetch(T0, FOLLOWER, full({A: 0, B: 0}))
    (command,) = outcome.commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse)
    partitions[A].log = counted = CountingReads(partitions[A].log)
    parked = server.follower_fetch(T0 + 1, FOLLOWER, incremental(command.message.session_id, 1, {A: 1}))
    assert parked.commands == [] and counted.reads == 1  # the fetch's own read updates the follower's state
    return partitions, server, counted


def test_a_parked_incremental_fetch_woken_by_one_partition_reads_only_the_partitions_with_news() -> None:
    """Read again to be answered, the fetch leaves unread a partition whose follower is at its end and knows its
    offsets (an incremental answer would leave it out): an idle broker's followers' sessions cost no reads of it."""
    partitions, server, counted = parked_with_a_read_of_a()
    append(partitions[B], 2, T0 + 2)
    woken = server.wake(T0 + 2, {B: 100})
    assert answered(woken) == [(FOLLOWER, 1)] and counted.reads == 1
    (command,) = woken.commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse)
    assert [(p.topic_partition, bool(p.records)) for p in command.message.partitions] == [(B, True)]


def test_a_new_incremental_fetch_leaves_an_idle_partition_unread_and_its_follower_caught_up() -> None:
    """A leader's fetch costs what changed, not what it leads: B, where its follower is at the end and knows the
    offsets, is not read, yet its follower is caught up at the fetch's time, as a read would leave it."""
    partitions, server, _ = parked_with_a_read_of_a()
    partitions[B].log = counted = CountingReads(partitions[B].log)
    later = T0 + 20_000
    append(partitions[A], 1, later)
    (answer,) = server.wake(later, {A: 100}).commands
    assert isinstance(answer, Outgoing) and isinstance(answer.message, FetchResponse)
    assert [(p.topic_partition, bool(p.records)) for p in answer.message.partitions] == [(A, True)]
    assert server.follower_fetch(later, FOLLOWER, incremental(answer.message.session_id, 2, {A: 2})).commands == []
    state = partitions[B].replica_state(BrokerId(FOLLOWER))
    assert counted.reads == 0 and state is not None
    assert state.last_fetch_time_ms == state.last_caught_up_ms == later


def test_a_follower_out_of_the_isr_at_the_log_end_is_read_so_it_joins_the_isr_again() -> None:
    """Caught up but outside the ISR (its expansion refused by the controller): each fetch is a read, and proposes
    the expansion again."""
    partitions = leaders()
    server = FetchServer(partitions.get)
    append(partitions[B], 1, T0)
    shrink = partitions[B].maybe_shrink_isr(T0 + 60_000)  # followers 2 and 3 never fetched
    assert shrink is not None
    shrunk = AlterPartitionResult(B, errors.NONE, BrokerId(1), LeaderEpoch(1), PartitionEpoch(2), (BrokerId(1),))
    partitions[B].on_alter_partition_result(shrink, shrunk, T0 + 60_000)
    outcome = server.follower_fetch(T0 + 60_001, FOLLOWER, dataclasses.replace(full({B: 1}), max_wait_ms=0))
    ((_, result),) = outcome.results
    assert result.alter_partition is not None  # caught up: the expansion goes to the controller, which refuses
    refused = AlterPartitionResult(B, errors.INELIGIBLE_REPLICA)
    partitions[B].on_alter_partition_result(result.alter_partition, refused, T0 + 60_002)
    session_id = next(c.message.session_id for c in outcome.commands
                      if isinstance(c, Outgoing) and isinstance(c.message, FetchResponse))
    partitions[B].log = counted = CountingReads(partitions[B].log)
    outcome = server.follower_fetch(T0 + 60_003, FOLLOWER, incremental(session_id, 1, {}))
    assert counted.reads == 1 and [r.alter_partition is not None for _, r in outcome.results] == [True]


def test_a_woken_fetch_whose_read_is_slow_reads_every_partition_so_each_shows_the_fetch_pending() -> None:
    """Seed 000's evidence: while the leader's slow disk holds a woken fetch, its follower's fetch is pending on
    every partition of the session, so an ISR check blames the leader, not the follower."""
    partitions, server, counted = parked_with_a_read_of_a()
    partitions[B].log.disk.set_slow_reads("/logs/1", 800)
    append(partitions[B], 2, T0 + 2)
    woken = server.wake(T0 + 2, {B: 100})
    assert [type(c).__name__ for c in woken.commands] == ["CompleteAfter"] and counted.reads == 2
    answered_later = server.complete(T0 + 802, 1)
    (command,) = answered_later.commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse)
    assert [(p.topic_partition, bool(p.records)) for p in command.message.partitions] == [(B, True)]


def test_the_fetch_server_answers_a_session_error_at_the_top_level_without_reading() -> None:
    server = FetchServer(leaders().get)
    outcome = server.follower_fetch(T0, FOLLOWER, incremental(41, 3, {A: 0}))
    (command,) = outcome.commands
    assert isinstance(command, Outgoing) and command.message == FetchResponse(1, NOT_FOUND, ())


class CountingLookup:
    """The fetch server's partition lookup, recording what it was asked for (a read looks up its partition twice:
    to begin and to complete)."""

    def __init__(self, partitions: dict[TopicPartition, Partition]) -> None:
        self.partitions, self.looked_up = partitions, list[TopicPartition]()

    def __call__(self, tp: TopicPartition) -> Partition | None:
        self.looked_up.append(tp)
        return self.partitions.get(tp)


def now_answered(server: FetchServer, now_ms: int, request: FetchRequest) -> FetchResponse:
    (command,) = server.follower_fetch(now_ms, FOLLOWER, dataclasses.replace(request, max_wait_ms=0)).commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse), command
    return command.message


def idle_session() -> tuple[dict[TopicPartition, Partition], FetchServer, CountingLookup, int]:
    """A session of A and B whose follower is at both log ends and knows their offsets, found idle by a fetch."""
    partitions = leaders()
    lookup = CountingLookup(partitions)
    server = FetchServer(lookup)
    session_id = now_answered(server, T0, full({A: 0, B: 0})).session_id
    now_answered(server, T0 + 1, incremental(session_id, 1, {}))
    lookup.looked_up.clear()
    return partitions, server, lookup, session_id


def test_a_fetch_with_nothing_changed_visits_no_partition_yet_its_follower_is_caught_up_on_each() -> None:
    """Unlike Kafka's, an idle fetch here costs nothing per partition: each partition's follower state takes the
    fetch's time through the session's clock, as a read would leave it."""
    partitions, server, lookup, session_id = idle_session()
    later = T0 + FULL_WALK_INTERVAL_MS - 1
    assert now_answered(server, later, incremental(session_id, 2, {})).partitions == ()
    assert lookup.looked_up == []
    for tp in (A, B):
        state = partitions[tp].replica_state(BrokerId(FOLLOWER))
        assert state is not None and state.last_fetch_time_ms == state.last_caught_up_ms == later


def test_an_append_marks_its_partition_and_the_next_fetch_visits_only_it() -> None:
    partitions, server, lookup, session_id = idle_session()
    append(partitions[B], 2, T0 + 10)
    assert server.wake(T0 + 10, {B: 100}).commands == []  # nothing parked: the mark waits for the next fetch
    response = now_answered(server, T0 + 20, incremental(session_id, 2, {}))
    assert set(lookup.looked_up) == {B} and [(p.topic_partition, bool(p.records)) for p in response.partitions] == [(B, True)]
    state = partitions[B].replica_state(BrokerId(FOLLOWER))
    assert state is not None and state.last_caught_up_ms == T0 + 1  # the fetch before the append, as in Kafka


def test_a_change_nobody_marked_is_found_by_the_next_full_walk_and_counted() -> None:
    partitions, server, lookup, session_id = idle_session()
    append(partitions[B], 2, T0 + 10)  # and no wake
    assert now_answered(server, T0 + 20, incremental(session_id, 2, {})).partitions == ()
    response = now_answered(server, T0 + 1 + FULL_WALK_INTERVAL_MS, incremental(session_id, 3, {}))
    assert [(p.topic_partition, bool(p.records)) for p in response.partitions] == [(B, True)]
    assert set(lookup.looked_up) == {A, B} and server.sessions.missed_changes == 1


def test_a_follower_named_change_and_a_marked_isr_change_are_visited() -> None:
    """The follower names a partition whose fetch state moved; the leader marks one whose ISR changed (`changed`),
    which an idle fetch would otherwise never look at again."""
    partitions, server, lookup, session_id = idle_session()
    now_answered(server, T0 + 10, incremental(session_id, 2, {A: 0}))
    server.changed([B])
    now_answered(server, T0 + 20, incremental(session_id, 3, {}))
    assert set(lookup.looked_up) == {A, B}


def test_a_parked_session_fetch_is_woken_through_its_session_by_any_of_its_partitions() -> None:
    partitions, server, _, session_id = idle_session()
    assert server.follower_fetch(T0 + 10, FOLLOWER, incremental(session_id, 2, {})).commands == []
    assert server.purgatory_size == 1
    assert server.wake(T0 + 11, {TopicPartition("other", 0): 100}).commands == []  # not the session's
    append(partitions[A], 1, T0 + 12)
    (command,) = server.wake(T0 + 12, {A: 100}).commands
    assert isinstance(command, Outgoing) and isinstance(command.message, FetchResponse)
    assert [p.topic_partition for p in command.message.partitions] == [A] and server.purgatory_size == 0


def test_a_partition_the_follower_forgets_stops_counting_its_later_fetches() -> None:
    """A failed or backing-off partition leaves the follower's session (KIP-461): its state stays at the last fetch
    that held it, so the ISR check can see the follower fall behind there."""
    partitions, server, _, session_id = idle_session()
    now_answered(server, T0 + 10, incremental(session_id, 2, {}, forgotten=(B,)))
    now_answered(server, T0 + 20, incremental(session_id, 3, {}))
    state_a, state_b = (partitions[tp].replica_state(BrokerId(FOLLOWER)) for tp in (A, B))
    assert state_a is not None and state_a.last_caught_up_ms == T0 + 20
    assert state_b is not None and state_b.last_caught_up_ms == T0 + 1


def test_only_a_new_fetch_walks_the_whole_session() -> None:
    """A parked fetch woken after the walk is due reads only what was marked: the walk, whose findings only a new
    fetch's visit records, waits for that fetch."""
    partitions, server, lookup, session_id = idle_session()
    assert server.follower_fetch(T0 + 10, FOLLOWER, incremental(session_id, 2, {})).commands == []
    append(partitions[B], 1, T0 + 10 + FULL_WALK_INTERVAL_MS)
    (command,) = server.wake(T0 + 10 + FULL_WALK_INTERVAL_MS, {B: 100}).commands
    assert isinstance(command, Outgoing) and set(lookup.looked_up) == {B}
    lookup.looked_up.clear()
    now_answered(server, T0 + 20 + FULL_WALK_INTERVAL_MS, incremental(session_id, 3, {B: 1}))
    assert set(lookup.looked_up) == {A, B} and server.sessions.missed_changes == 0
