"""The follower's fetch request builder as it was before it kept requests per partition: it walks every partition
on each fetch. Tests drive it beside `insync.replication.fetcher.FetcherSession` and compare what both send."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from insync import errors, kafkalog, limits
from insync.config import FetcherConfig
from insync.errors import KafkaException
from insync.events import Event, EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.fetcher import FetchOutcome, PartitionFetchState
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
from insync.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, LeaderEpoch, TopicPartition

logger = logging.getLogger(kafkalog.FETCHER_LOGGER)

# Processing errors that a later fetch may not see again (Kafka backs off on corrupt records).
_BACK_OFF_ON_PROCESSING = frozenset({errors.CORRUPT_MESSAGE, errors.BY_NAME["INVALID_RECORD"]})
# The leader lost the session or its epoch moved on: the next fetch is a full one, at once (Kafka's
# FetchSessionHandler answers them with an empty response, not a back-off).
_SESSION_ERRORS = frozenset({errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"],
                             errors.BY_NAME["INVALID_FETCH_SESSION_EPOCH"]})


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
class _InFlight:
    request: FetchRequest
    sent_ms: int
    fetched: dict[TopicPartition, FetchRequestPartition]  # every partition fetched, listed in `request` or not


class ReferenceFetcherSession:
    def __init__(self, follower_id: BrokerId, leader_id: BrokerId,
                 lookup: Callable[[TopicPartition], FollowerReplica | None], config: FetcherConfig | None = None,
                 *, events: EventBuffer | None = None,
                 held_back: Callable[[TopicPartition, int], bool] | None = None) -> None:
        assert follower_id != leader_id
        self.follower_id = follower_id
        self.leader_id = leader_id
        self.config = config or FetcherConfig()
        self.events = events if events is not None else EventBuffer()
        self._lookup = lookup
        self._held_back = held_back  # (partition, now) -> the follower's replication throttle holds it back
        self._partitions: dict[TopicPartition, PartitionFetchState] = {}  # fetch order: served ones move last
        self._failed: dict[TopicPartition, LeaderEpoch] = {}  # the epoch each failed in
        self._in_flight: _InFlight | None = None
        self._correlation_ids = itertools.count(1)
        # The leader's fetch session (KIP-227) and what it holds of each partition: a fetch lists what differs.
        self._session_id = NO_SESSION
        self._session_epoch = INITIAL_EPOCH
        self._session_view: dict[TopicPartition, FetchRequestPartition] = {}

    # --- Partitions -------------------------------------------------------------------------------------------

    @property
    def partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        return dict(self._partitions)

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._failed)

    @property
    def failed_partitions_count(self) -> int:
        return len(self._failed)

    @property
    def max_lag(self) -> int:
        """Kafka's MaxLag: the largest (leader high watermark - fetch offset) over the partitions."""
        return max((max(0, s.leader_high_watermark - s.position.fetch_offset) for s in self._partitions.values()),
                   default=0)

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
        if current is not None and current.leader_epoch >= leader_epoch:
            return False
        assert len(self._partitions) < limits.FETCHER_PARTITIONS_MAX or current is not None
        self._partitions.pop(topic_partition, None)
        self._partitions[topic_partition] = PartitionFetchState(position, leader_epoch)
        return True

    def remove_partition(self, topic_partition: TopicPartition, now_ms: int) -> None:
        """Stop fetching (became leader, moved elsewhere, deleted); a failure is cleared with it (KIP-461:
        stopping or deleting the replica, or leading it, clears the failed state), and said so."""
        self._partitions.pop(topic_partition, None)
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
        return min((state.delayed_until_ms for state in self._partitions.values()), default=None)

    def build_fetch_request(self, now_ms: int, replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH
                            ) -> FetchRequest | None:
        """The next request (None while one is in flight or every partition backs off); `replica_epoch` is this
        broker's epoch from its registration, which ties the leader's view of us to this life (KIP-903)."""
        if self._in_flight is not None:
            if now_ms - self._in_flight.sent_ms < self.config.request_timeout_ms:
                return None
            logger.warning("Fetch request %d to broker %d timed out", self._in_flight.request.correlation_id,
                           self.leader_id)
            self.handle_fetch_error(self._in_flight.request.correlation_id, now_ms)
        due = [(tp, state) for tp, state in self._partitions.items() if state.delayed_until_ms <= now_ms]
        if self._held_back is not None:
            held = dict.fromkeys(tp for tp, _ in due if self._held_back(tp, now_ms))  # in fetch order (fixed in both)
            for tp in held:  # left out of the request as in Kafka, for a backoff rather than a busy loop
                self._back_off(tp, now_ms)
            due = [(tp, state) for tp, state in due if tp not in held]
        fetched = {topic_partition: FetchRequestPartition(
            topic_partition, state.position.fetch_offset, state.leader_epoch, state.position.last_fetched_epoch,
            state.position.log_start_offset, self.config.partition_max_bytes) for topic_partition, state in due}
        # As Kafka's fetcher: a request goes even with nothing to fetch while the session has partitions to forget.
        # Without it, a partition refused in the fetch that opened the session (its topic id not yet known to the
        # leader) stayed in this side's view only, and every later incremental fetch left it out as unchanged.
        if not fetched and (self._session_id == NO_SESSION or not self._session_view):
            return None
        request = FetchRequest(next(self._correlation_ids), self.follower_id, self.config.max_wait_ms,
                               self.config.min_bytes, self.config.max_bytes, tuple(fetched.values()), replica_epoch,
                               session_id=NO_SESSION, session_epoch=INITIAL_EPOCH)
        if self._session_id != NO_SESSION:
            # Partitions backing off or held back are forgotten, as Kafka's builder leaves them out of the session.
            request = replace(request, partitions=tuple(p for tp, p in fetched.items()
                                                        if self._session_view.get(tp) != p),
                              session_id=self._session_id, session_epoch=self._session_epoch,
                              forgotten=tuple(tp for tp in self._session_view if tp not in fetched))
        self._in_flight = _InFlight(request, now_ms, fetched)
        return request

    def _end_session(self) -> None:
        """The next fetch is a full one that opens a new session."""
        self._session_id, self._session_epoch, self._session_view = NO_SESSION, INITIAL_EPOCH, {}

    def _session_answered(self, response: FetchResponse, fetched: dict[TopicPartition, FetchRequestPartition],
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
        for topic_partition in fetched:
            self._back_off(topic_partition, now_ms)

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
            for topic_partition in requested_by_tp:
                if self._back_off(topic_partition, now_ms):
                    outcome.backed_off.append(topic_partition)
            return outcome.build()
        self._session_answered(response, requested_by_tp, request.session_epoch)
        for data in response.partitions:
            requested = requested_by_tp.get(data.topic_partition)
            state = self._partitions.get(data.topic_partition)
            if requested is None or state is None or state.leader_epoch != requested.current_leader_epoch \
                    or state.position.fetch_offset != requested.fetch_offset:
                continue  # removed, re-added or moved since the request: this answer is stale
            self._apply(data, requested, state, now_ms, outcome)
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
            self._partitions.pop(topic_partition)  # no longer hosted here
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
        # Move to the end so the next request serves the others first (Kafka's updateAndMoveToEnd).
        del self._partitions[topic_partition]
        self._partitions[topic_partition] = state

    def _back_off(self, topic_partition: TopicPartition, now_ms: int) -> bool:
        state = self._partitions.get(topic_partition)
        if state is None:
            return False
        self._update(topic_partition, replace(state, delayed_until_ms=now_ms + self.config.backoff_ms))
        return True

    def _fail(self, topic_partition: TopicPartition, state: PartitionFetchState, error: str, now_ms: int) -> None:
        del self._partitions[topic_partition]
        self._failed[topic_partition] = state.leader_epoch
        logger.warning("[ReplicaFetcher replicaId=%d, leaderId=%d, fetcherId=0] %s", self.follower_id, self.leader_id,
                       kafkalog.failed_message(topic_partition.topic, topic_partition.partition))
        self._emit(EventType.PARTITION_FAILED, topic_partition, now_ms, leader=self.leader_id, error=error)

    def _emit(self, event_type: EventType, topic_partition: TopicPartition, now_ms: int, **fields: object) -> None:
        self.events.emit(Event(now_ms, self.follower_id, event_type, topic_partition.topic,
                               topic_partition.partition, fields))
