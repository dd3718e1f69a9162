"""A fetcher session: one follower broker copying many partitions from one leader broker.

Per partition the session keeps where to fetch next (`FetchPosition`), the followed leader epoch, a back-off
deadline and the `FetchRequestPartition` they make, rebuilt only when they change: with the leader's incremental
session (KIP-227) a fetch then costs what changed since the last one (plus what backs off), not every partition.
`build_fetch_request(now_ms)` asks for every partition not backing off (one request in flight, failed after
`replica.socket.timeout.ms`); `handle_fetch_response` applies the answer through the `Follower`s from `lookup`,
except where the partition changed since the request. Per-partition error isolation (KIP-461, seed 002):
- Appending or truncating raised: the partition is marked failed (`partition_failed`, `failed_partitions_count`)
  and leaves the session until `add_partition` brings a newer epoch; the rest of the response is still applied.
  Corrupt records are only backed off, as in Kafka, since a transient truncation on the leader explains them.
- FENCED_LEADER_EPOCH for the followed epoch: failed until new leadership metadata arrives. Other errors back off
  `replica.fetch.backoff.ms` for that partition only; KAFKA-7104 (seed 004) is handled by truncation instead.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from insync import errors, kafkalog, limits
from insync.config import FetcherConfig
from insync.errors import KafkaException
from insync.events import Event, EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.follower import FetchPosition, FollowerReplica
from insync.replication.messages import (
    INITIAL_EPOCH,
    NO_SESSION,
    FetchPartitionData,
    FetchRequest,
    FetchRequestPartition,
    FetchResponse,
    next_session_epoch,
)
from insync.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, LeaderEpoch, Offset, TopicPartition

logger = logging.getLogger(kafkalog.FETCHER_LOGGER)

# Processing errors that a later fetch may not see again (Kafka backs off on corrupt records).
_BACK_OFF_ON_PROCESSING = frozenset({errors.CORRUPT_MESSAGE, errors.BY_NAME["INVALID_RECORD"]})
# The leader lost the session or its epoch moved on: the next fetch is a full one, at once (Kafka's
# FetchSessionHandler answers them with an empty response, not a back-off).
_SESSION_ERRORS = frozenset({errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"],
                             errors.BY_NAME["INVALID_FETCH_SESSION_EPOCH"]})
# The partitions changed since the last fetch are hosted, or were in the view or the fetch in flight when dropped.
_CHANGED_MAX = 3 * limits.FETCHER_PARTITIONS_MAX
# Stale heap entries of back-off deadlines allowed beyond twice the live values before the heap is rebuilt.
_DEADLINE_HEAP_SLACK = 64


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    position: FetchPosition
    leader_epoch: LeaderEpoch
    delayed_until_ms: int = 0
    truncation_rounds: int = 0  # diverging-epoch answers in a row (one per epoch, bounded)
    leader_high_watermark: Offset = Offset(-1)


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """What one response did, partition by partition."""

    appended: tuple[TopicPartition, ...] = ()
    truncated: tuple[TopicPartition, ...] = ()
    backed_off: tuple[TopicPartition, ...] = ()
    failed: tuple[TopicPartition, ...] = ()


@dataclass(slots=True)
class _OutcomeBuilder:
    appended: list[TopicPartition] = field(default_factory=list)
    truncated: list[TopicPartition] = field(default_factory=list)
    backed_off: list[TopicPartition] = field(default_factory=list)
    failed: list[TopicPartition] = field(default_factory=list)

    def build(self) -> FetchOutcome:
        return FetchOutcome(tuple(self.appended), tuple(self.truncated), tuple(self.backed_off),
                            tuple(self.failed))


@dataclass(frozen=True, slots=True)
class _Fetch:
    """A partition's fetch state with the request it makes, and its place in fetch order (served ones move last:
    a larger `order`). A new one is made on every state change; the request is kept while position and epoch are."""

    state: PartitionFetchState
    request: FetchRequestPartition
    order: int


def _fetch_order(fetch: _Fetch) -> int:
    return fetch.order


@dataclass(frozen=True, slots=True)
class _InFlight:
    request: FetchRequest
    sent_ms: int
    fetched: dict[TopicPartition, _Fetch]  # every partition fetched, listed in `request` or not


class _Deadlines:
    """The back-off deadline of every partition (a past one too, so `next_fetch_ms` is the least of all without a
    walk) as a multiset: a count per value, and a heap of the values where one no longer counted is dropped when it
    reaches the top."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._heap: list[int] = []

    def add(self, deadline_ms: int) -> None:
        count = self._counts.get(deadline_ms, 0)
        self._counts[deadline_ms] = count + 1
        if count == 0:
            heapq.heappush(self._heap, deadline_ms)
            if len(self._heap) > 2 * len(self._counts) + _DEADLINE_HEAP_SLACK:  # drop the stale entries
                self._heap = sorted(self._counts)

    def remove(self, deadline_ms: int) -> None:
        count = self._counts[deadline_ms]
        assert count > 0, deadline_ms
        if count == 1:
            del self._counts[deadline_ms]
        else:
            self._counts[deadline_ms] = count - 1

    def least(self) -> int | None:
        assert len(self._heap) >= len(self._counts), "every counted value is in the heap"
        while self._heap and self._heap[0] not in self._counts:  # bounded by the heap's length
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None


class FetcherSession:
    def __init__(self, follower_id: BrokerId, leader_id: BrokerId,
                 lookup: Callable[[TopicPartition], FollowerReplica | None], config: FetcherConfig | None = None,
                 *, events: EventBuffer | None = None) -> None:
        assert follower_id != leader_id
        self.follower_id = follower_id
        self.leader_id = leader_id
        self.config = config or FetcherConfig()
        self.events = events if events is not None else EventBuffer()
        self._lookup = lookup
        self._partitions: dict[TopicPartition, _Fetch] = {}  # in fetch order
        self._orders = itertools.count()
        self._failed: dict[TopicPartition, LeaderEpoch] = {}  # the epoch each failed in
        self._in_flight: _InFlight | None = None
        self._correlation_ids = itertools.count(1)
        # The leader's fetch session (KIP-227) and what it holds of each partition: a fetch lists what differs.
        self._session_id = NO_SESSION
        self._session_epoch = INITIAL_EPOCH
        self._session_view: dict[TopicPartition, _Fetch] = {}
        # What an incremental fetch compares with the view instead of every partition: the partitions changed since
        # the last request was built, those backing off (until a fetch finds them due) and all the deadlines.
        self._changed: set[TopicPartition] = set()
        self._delayed: set[TopicPartition] = set()
        self._deadlines = _Deadlines()

    # --- Partitions -------------------------------------------------------------------------------------------

    @property
    def partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        return {topic_partition: fetch.state for topic_partition, fetch in self._partitions.items()}

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._failed)

    @property
    def failed_partitions_count(self) -> int:
        return len(self._failed)

    @property
    def max_lag(self) -> int:
        """Kafka's MaxLag: the largest (leader high watermark - fetch offset) over the partitions."""
        return max((max(0, f.state.leader_high_watermark - f.state.position.fetch_offset)
                    for f in self._partitions.values()), default=0)

    def add_partition(self, topic_partition: TopicPartition, leader_epoch: LeaderEpoch, position: FetchPosition,
                      now_ms: int) -> bool:
        """Start (or restart, on a newer leader epoch) fetching a partition. A failed partition comes back
        only with a newer epoch than the one it failed in. Returns whether the session changed."""
        failed_epoch = self._failed.get(topic_partition)
        if failed_epoch is not None:
            if leader_epoch <= failed_epoch:
                return False
            del self._failed[topic_partition]
            self._emit(EventType.PARTITION_UNFAILED, topic_partition, now_ms, leader=self.leader_id)
        current = self._partitions.get(topic_partition)
        if current is not None and current.state.leader_epoch >= leader_epoch:
            return False
        assert len(self._partitions) < limits.FETCHER_PARTITIONS_MAX or current is not None
        self._update(topic_partition, PartitionFetchState(position, leader_epoch))
        return True

    def remove_partition(self, topic_partition: TopicPartition, now_ms: int) -> None:
        """Stop fetching (became leader, moved elsewhere, deleted); a failure is cleared with it (KIP-461:
        stopping or deleting the replica, or leading it, clears the failed state), and said so."""
        self._drop(topic_partition)
        if self._failed.pop(topic_partition, None) is not None:
            self._emit(EventType.PARTITION_UNFAILED, topic_partition, now_ms, leader=self.leader_id)

    # --- Requests ---------------------------------------------------------------------------------------------

    @property
    def in_flight(self) -> FetchRequest | None:
        return self._in_flight.request if self._in_flight is not None else None

    def next_fetch_ms(self) -> int | None:
        """When `build_fetch_request` may next return a request: a time at or before now means at once, None
        that there is nothing to fetch."""
        if self._in_flight is not None:
            return self._in_flight.sent_ms + self.config.request_timeout_ms
        return self._deadlines.least()

    def build_fetch_request(self, now_ms: int, replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH,
                            held_back: Callable[[TopicPartition, int], bool] | None = None) -> FetchRequest | None:
        """The next request (None while one is in flight or every partition backs off); `replica_epoch` is this
        broker's epoch from its registration, which ties the leader's view of us to this life (KIP-903).
        `held_back(partition, now_ms)`: the follower's replication throttle, when one is set, holds it back."""
        if self._in_flight is not None:
            if now_ms - self._in_flight.sent_ms < self.config.request_timeout_ms:
                return None
            logger.warning("Fetch request %d to broker %d timed out", self._in_flight.request.correlation_id,
                           self.leader_id)
            self.handle_fetch_error(self._in_flight.request.correlation_id, now_ms)
        had_view = bool(self._session_view)
        forgotten: tuple[TopicPartition, ...] = ()
        if self._session_id != NO_SESSION and held_back is None:
            fetched, (listed, forgotten) = self._session_view, self._diff_view(now_ms)
        else:
            fetched = self._due(now_ms, held_back)
            if self._session_id == NO_SESSION:
                listed = tuple(fetch.request for fetch in fetched.values())
            else:
                listed, forgotten = self._walk_view(fetched)
        self._changed.clear()
        # As Kafka's fetcher: a request goes even with nothing to fetch while the session has partitions to forget.
        # Without it, a partition refused in the fetch that opened the session (its topic id not yet known to the
        # leader) stayed in this side's view only, and every later incremental fetch left it out as unchanged.
        if not fetched and (self._session_id == NO_SESSION or not had_view):
            return None
        # Partitions backing off or held back are forgotten, as Kafka's builder leaves them out of the session.
        request = FetchRequest(next(self._correlation_ids), self.follower_id, self.config.max_wait_ms,
                               self.config.min_bytes, self.config.max_bytes, listed, replica_epoch,
                               session_id=self._session_id, session_epoch=self._session_epoch, forgotten=forgotten)
        self._in_flight = _InFlight(request, now_ms, fetched)
        return request

    def _due(self, now_ms: int, held_back: Callable[[TopicPartition, int], bool] | None
             ) -> dict[TopicPartition, _Fetch]:
        """Every partition to fetch now, in fetch order: a walk over all of them."""
        due = [(tp, fetch) for tp, fetch in self._partitions.items() if fetch.state.delayed_until_ms <= now_ms]
        if held_back is not None:
            held = dict.fromkeys(tp for tp, _ in due if held_back(tp, now_ms))  # in fetch order, whatever the hash
            for tp in held:  # left out of the request as in Kafka, for a backoff rather than a busy loop
                self._back_off(tp, now_ms)
            due = [(tp, fetch) for tp, fetch in due if tp not in held]
        return dict(due)

    def _walk_view(self, fetched: dict[TopicPartition, _Fetch]
                   ) -> tuple[tuple[FetchRequestPartition, ...], tuple[TopicPartition, ...]]:
        """What a fetch lists and forgets, found by comparing every partition fetched with the view."""
        view = self._session_view
        listed = tuple(fetch.request for tp, fetch in fetched.items()
                       if (seen := view.get(tp)) is None or seen.request != fetch.request)
        forgotten = tuple(seen.request.topic_partition for seen in sorted(view.values(), key=_fetch_order)
                          if seen.request.topic_partition not in fetched)
        return listed, forgotten

    def _diff_view(self, now_ms: int) -> tuple[tuple[FetchRequestPartition, ...], tuple[TopicPartition, ...]]:
        """What an incremental fetch lists and forgets, found among the partitions changed or backing off; the
        view becomes what this fetch asks for (kept only if the leader answers, else the session ends)."""
        view = self._session_view
        candidates = self._changed | self._delayed
        assert len(candidates) <= _CHANGED_MAX, "the changed ones are hosted or were in a view"
        listed: list[_Fetch] = []
        forgotten: list[_Fetch] = []
        for tp in candidates:
            fetch = self._partitions.get(tp)
            seen = view.get(tp)
            if fetch is not None and fetch.state.delayed_until_ms <= now_ms:
                self._delayed.discard(tp)
                if seen is None or seen.request != fetch.request:
                    listed.append(fetch)
                view[tp] = fetch
            elif seen is not None:
                forgotten.append(seen)
                del view[tp]
        listed.sort(key=_fetch_order)  # as a walk in fetch order lists them
        forgotten.sort(key=_fetch_order)  # as the view's partitions were ordered when it was sent
        return (tuple(fetch.request for fetch in listed),
                tuple(fetch.request.topic_partition for fetch in forgotten))

    def _end_session(self) -> None:
        """The next fetch is a full one that opens a new session."""
        self._session_id, self._session_epoch, self._session_view = NO_SESSION, INITIAL_EPOCH, {}

    def _session_answered(self, response: FetchResponse, fetched: dict[TopicPartition, _Fetch],
                          sent_epoch: int) -> None:
        """Kafka's FetchSessionHandler.handleResponse: a full fetch's answer names the new session (none when
        the leader keeps no session); an incremental answer must come from the session it continued."""
        if response.session_id == NO_SESSION or (sent_epoch != INITIAL_EPOCH
                                                 and response.session_id != self._session_id):
            self._end_session()
            return
        self._session_id = response.session_id
        self._session_epoch = next_session_epoch(sent_epoch)
        self._session_view = fetched

    def handle_fetch_error(self, correlation_id: int, now_ms: int) -> None:
        """The request got no response (connection lost, timed out): back off all its partitions."""
        if self._in_flight is None or self._in_flight.request.correlation_id != correlation_id:
            return
        fetched, self._in_flight = self._in_flight.fetched, None
        self._end_session()
        for fetch in sorted(fetched.values(), key=_fetch_order):
            self._back_off(fetch.request.topic_partition, now_ms)

    # --- Responses --------------------------------------------------------------------------------------------

    def handle_fetch_response(self, response: FetchResponse, now_ms: int) -> FetchOutcome:
        if self._in_flight is None or self._in_flight.request.correlation_id != response.correlation_id:
            return FetchOutcome()  # a late answer to a request already given up
        request, requested_by_tp, self._in_flight = self._in_flight.request, self._in_flight.fetched, None
        outcome = _OutcomeBuilder()
        if response.error != errors.NONE:
            self._end_session()
            if response.error in _SESSION_ERRORS:
                return outcome.build()
            for fetch in sorted(requested_by_tp.values(), key=_fetch_order):
                if self._back_off(fetch.request.topic_partition, now_ms):
                    outcome.backed_off.append(fetch.request.topic_partition)
            return outcome.build()
        self._session_answered(response, requested_by_tp, request.session_epoch)
        for data in response.partitions:
            requested = requested_by_tp.get(data.topic_partition)
            current = self._partitions.get(data.topic_partition)
            if requested is None or current is None or current.state.leader_epoch != requested.state.leader_epoch \
                    or current.state.position.fetch_offset != requested.state.position.fetch_offset:
                continue  # removed, re-added or moved since the request: this answer is stale
            self._apply(data, requested.request, current.state, now_ms, outcome)
        return outcome.build()

    def _apply(self, data: FetchPartitionData, requested: FetchRequestPartition, state: PartitionFetchState,
               now_ms: int, outcome: _OutcomeBuilder) -> None:
        topic_partition = data.topic_partition
        if data.error == errors.FENCED_LEADER_EPOCH:
            # The request carried the epoch this session still follows: wait for new leadership metadata.
            self._fail(topic_partition, state, data.error.name, now_ms)
            outcome.failed.append(topic_partition)
            return
        if data.error not in (errors.NONE, errors.OFFSET_OUT_OF_RANGE):
            self._back_off(topic_partition, now_ms)
            outcome.backed_off.append(topic_partition)
            return
        replica = self._lookup(topic_partition)
        if replica is None:
            self._drop(topic_partition)  # no longer hosted here
            return
        try:
            self._apply_to_replica(replica, data, requested, state, now_ms, outcome)
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - KIP-461: whatever one partition raises stays with it
            if isinstance(exc, KafkaException) and exc.error in _BACK_OFF_ON_PROCESSING:
                logger.warning("Found invalid messages during fetch for partition %s offset %d: %s",
                               topic_partition, requested.fetch_offset, exc)
                self._back_off(topic_partition, now_ms)
                outcome.backed_off.append(topic_partition)
                return
            logger.error("Unexpected error occurred while processing data for partition %s at offset %d: %s",
                         topic_partition, requested.fetch_offset, exc)
            error = str(exc) if isinstance(exc, KafkaException) else f"{type(exc).__name__}: {exc}"
            self._fail(topic_partition, state, error, now_ms)
            outcome.failed.append(topic_partition)

    def _apply_to_replica(self, replica: FollowerReplica, data: FetchPartitionData,
                          requested: FetchRequestPartition, state: PartitionFetchState, now_ms: int,
                          outcome: _OutcomeBuilder) -> None:
        topic_partition = data.topic_partition
        if data.error == errors.OFFSET_OUT_OF_RANGE:
            position = replica.truncate_on_out_of_range(data.log_start_offset, data.log_end_offset,
                                                        data.high_watermark, now_ms)
            if position == state.position:  # nothing explained the error: retry later
                self._back_off(topic_partition, now_ms)
                outcome.backed_off.append(topic_partition)
            else:
                self._update(topic_partition, replace(state, position=position, truncation_rounds=0))
                outcome.truncated.append(topic_partition)
        elif data.diverging_epoch is not None:
            rounds = state.truncation_rounds + 1
            if rounds > limits.TRUNCATION_ROUNDS_MAX:
                raise KafkaException(errors.UNKNOWN_SERVER_ERROR, f"{rounds} truncation rounds in a row")
            position = replica.truncate_on_divergence(data.diverging_epoch, now_ms)
            self._update(topic_partition, replace(state, position=position, truncation_rounds=rounds))
            outcome.truncated.append(topic_partition)
        else:
            position = replica.append_fetched_records(requested.fetch_offset, data.records, data.high_watermark,
                                                      data.log_start_offset, now_ms)
            self._update(topic_partition, replace(state, position=position, truncation_rounds=0,
                                                  leader_high_watermark=data.high_watermark))
            outcome.appended.append(topic_partition)

    def _update(self, topic_partition: TopicPartition, state: PartitionFetchState) -> None:
        """The one place a partition's fetch state is set. It moves to the end so the next request serves the
        others first (Kafka's updateAndMoveToEnd); its request is made again only if what feeds it moved."""
        previous = self._partitions.pop(topic_partition, None)
        if previous is not None and previous.state.position == state.position \
                and previous.state.leader_epoch == state.leader_epoch:
            request = previous.request
        else:
            request = FetchRequestPartition(topic_partition, state.position.fetch_offset, state.leader_epoch,
                                            state.position.last_fetched_epoch, state.position.log_start_offset,
                                            self.config.partition_max_bytes)
        if previous is not None:
            self._deadlines.remove(previous.state.delayed_until_ms)
        self._deadlines.add(state.delayed_until_ms)
        self._partitions[topic_partition] = _Fetch(state, request, next(self._orders))
        self._changed.add(topic_partition)
        assert len(self._changed) <= _CHANGED_MAX

    def _drop(self, topic_partition: TopicPartition) -> None:
        previous = self._partitions.pop(topic_partition, None)
        if previous is None:
            return
        self._deadlines.remove(previous.state.delayed_until_ms)
        self._delayed.discard(topic_partition)
        # Only a partition the next incremental fetch compares with (its view) needs forgetting.
        if topic_partition in self._session_view or (self._in_flight is not None
                                                     and topic_partition in self._in_flight.fetched):
            self._changed.add(topic_partition)
        else:
            self._changed.discard(topic_partition)
        assert len(self._changed) <= _CHANGED_MAX

    def _back_off(self, topic_partition: TopicPartition, now_ms: int) -> bool:
        current = self._partitions.get(topic_partition)
        if current is None:
            return False
        self._update(topic_partition, replace(current.state, delayed_until_ms=now_ms + self.config.backoff_ms))
        self._delayed.add(topic_partition)
        return True

    def _fail(self, topic_partition: TopicPartition, state: PartitionFetchState, error: str, now_ms: int) -> None:
        self._drop(topic_partition)
        self._failed[topic_partition] = state.leader_epoch
        logger.warning("[ReplicaFetcher replicaId=%d, leaderId=%d, fetcherId=0] %s", self.follower_id, self.leader_id,
                       kafkalog.failed_message(topic_partition.topic, topic_partition.partition))
        self._emit(EventType.PARTITION_FAILED, topic_partition, now_ms, leader=self.leader_id, error=error)

    def _emit(self, event_type: EventType, topic_partition: TopicPartition, now_ms: int, **fields: object) -> None:
        self.events.emit(Event(now_ms, self.follower_id, event_type, topic_partition.topic,
                               topic_partition.partition, fields))
