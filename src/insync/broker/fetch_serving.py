"""Serving fetches on the leader: follower fetches (replication) and consumer fetches (committed data only).

A follower fetch is served in Kafka's shape, split where time passes (KIP-501): `Partition.begin_follower_fetch`
captures the leader's offsets and registers a pending read, the log is read, and `complete_follower_fetch`
updates the follower's state. When the disk says the reads are slow (seed 000's slow disk), the whole response
waits for its slowest read, as one Kafka request handler would: `CompleteAfter(latency, token)`, then
`complete(token)`. A fetch that finds nothing waits up to `max_wait_ms` in the fetch purgatory (Kafka's
DelayedFetch); the read that answers it updates nothing (`readFromPurgatory`): the follower's fetch time stays.
`wake` passes what changed to the fetches watching those partitions and serves, in parking order, those now due:
followers once `replica.fetch.min.bytes` were appended, consumers once a high watermark advanced, any whose
partition's leadership moved or wait expired. A full purgatory answers at once.
A follower's incremental fetch is served as its whole session, answered with what is new (`broker.fetch_sessions`);
a throttled out-of-sync one reads nothing; a consumer's that may read a follower (KIP-392) stays below its HW.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass

from insync import errors
from insync.broker.fetch_sessions import FetchSessions, SessionContext, SessionKey
from insync.broker.messages import (
    READ_COMMITTED,
    CompleteAfter,
    ConsumerFetchPartition,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
)
from insync.broker.throttles import ReplicationThrottles
from insync.errors import KafkaError, KafkaException
from insync.limits import PURGATORY_ENTRIES_MAX
from insync.protocol.control_records import AbortedTxn
from insync.replication.log_view import ReadResultView
from insync.replication.messages import FetchPartitionData, FetchRequest, FetchRequestPartition, FetchResponse
from insync.replication.partition import Partition
from insync.replication.purgatory import DelayedFetch, Purgatory, PurgatoryFullError
from insync.replication.results import FollowerFetchResult, FollowerRead
from insync.types import UNDEFINED_EPOCH, UNKNOWN_OFFSET, Address, Offset, Outgoing, TopicPartition

Request = FetchRequest | ConsumerFetchRequest


_Read = tuple[TopicPartition, FollowerRead, ReadResultView | KafkaException]


@dataclass(slots=True)
class _SlowFollowerFetch:
    source: Address
    context: SessionContext
    answers: list[FetchPartitionData | _Read]


@dataclass(frozen=True, slots=True)
class _Waiting:
    """Who a parked fetch answers, and its request to serve again."""

    source: Address
    request: Request
    context: SessionContext | None = None  # a follower's: the session its answer goes through


@dataclass(slots=True)
class FetchOutcome:
    commands: list[Outgoing | CompleteAfter]
    results: list[tuple[Partition, FollowerFetchResult]]  # ISR expansions and HW moves for the core to act on


class FetchServer:
    def __init__(self, partitions: Callable[[TopicPartition], Partition | None],
                 throttles: ReplicationThrottles | None = None,
                 hosted: Callable[[TopicPartition], Partition | None] | None = None) -> None:
        """`partitions` finds the partitions this broker leads, `hosted` any replica it has (followers too)."""
        self._partitions = partitions
        self._hosted = hosted or partitions
        self._throttles = throttles  # the leader's replication throttle (`broker.throttles`), if any
        self._slow: dict[int, _SlowFollowerFetch] = {}
        self._purgatory: Purgatory[DelayedFetch[_Waiting]] = Purgatory("fetch", PURGATORY_ENTRIES_MAX)
        self.sessions = FetchSessions()
        self._next_token = 0

    # Follower fetches ---------------------------------------------------------------------------------

    def follower_fetch(self, now_ms: int, source: Address, request: FetchRequest, may_park: bool = True,
                       from_purgatory: bool = False, context: SessionContext | None = None) -> FetchOutcome:
        """Serve a follower fetch: read every partition of its session, answer (after the slowest read) or park
        it. `from_purgatory`: a parked fetch read again to be answered (with its `context`), which updates no
        follower state."""
        if context is None:
            opened = self.sessions.open(request)
            if isinstance(opened, KafkaError):
                return FetchOutcome([Outgoing(source, FetchResponse(request.correlation_id, opened, ()))], [])
            context = opened
            for tp in request.forgotten:  # no later fetch of this follower counts for these
                if (forgotten := self._partitions(tp)) is not None:
                    forgotten.end_idle_follower_fetches(request.replica_id)
        request = context.request
        answers: list[FetchPartitionData | _Read] = []
        latency_ms = 0
        # An incremental fetch visits only the partitions changed since its session found them idle
        # (`FetchSessions.visit`), and of those leaves out, unread, every one with nothing new for its follower: its
        # answer would leave them out anyway. A parked fetch read again updates no state; a new fetch updates only
        # the follower's fetch time (`Partition.follower_fetch_is_idle`, through the session's clock), so that a
        # leader's fetch costs what changed, not what it leads. Unless a read turns out slow: then every partition
        # is read, so each shows its follower's fetch pending at this leader while it waits (the evidence that the
        # leader is slow).
        parts, walked = self.sessions.visit(context, now_ms, from_purgatory)
        unchanged = self.sessions.unchanged if context.incremental else None
        skipped: list[tuple[FetchRequestPartition, Partition]] = []
        throttled = self._throttles is not None and self._throttles.is_set(leader=True)
        for part in parts:
            partition = self._partitions(part.topic_partition)
            if unchanged is not None and partition is not None and partition.is_leader \
                    and part.fetch_offset == partition.log.log_end_offset \
                    and part.current_leader_epoch in (UNDEFINED_EPOCH, partition.leader_epoch) \
                    and unchanged(context.session_id, part.topic_partition, partition.high_watermark,
                                  Offset(partition.log.log_start_offset)) \
                    and (from_purgatory or partition.follower_fetch_is_idle(
                        request.replica_id, part.fetch_offset, part.current_leader_epoch, part.last_fetched_epoch,
                        part.log_start_offset, request.replica_epoch)):
                skipped.append((part, partition))
                continue
            latency_ms = max(latency_ms, self._read_for_follower(now_ms, request, part, partition, from_purgatory,
                                                                 throttled, answers))
        clock = self.sessions.clock(context)
        if latency_ms > 0:
            visited = {part.topic_partition for part in parts}
            unread = [] if walked else [(part, self._partitions(part.topic_partition)) for part in request.partitions
                                        if part.topic_partition not in visited]
            for part, maybe_partition in [*skipped, *unread]:
                self._read_for_follower(now_ms, request, part, maybe_partition, from_purgatory, throttled, answers)
            self.sessions.mark_session(context)
        else:
            self.sessions.settle(context, [part.topic_partition for part, _ in skipped], walked=walked,
                                 from_purgatory=from_purgatory)
        if not from_purgatory and clock is not None:
            clock.fetch_ms = now_ms  # after the visits: a partition read above was caught up at the fetch before
            if latency_ms == 0:
                for _, partition in skipped:
                    partition.note_idle_follower_fetch(request.replica_id, clock)
        slow = _SlowFollowerFetch(source, context, answers)
        if latency_ms > 0:
            self._next_token += 1
            assert len(self._slow) < PURGATORY_ENTRIES_MAX
            self._slow[self._next_token] = slow
            return FetchOutcome([CompleteAfter(latency_ms, self._next_token)], [])
        return self._finish(now_ms, slow, may_park)

    def _read_for_follower(self, now_ms: int, request: FetchRequest, part: FetchRequestPartition,
                           partition: Partition | None, from_purgatory: bool, throttled: bool,
                           answers: list[FetchPartitionData | _Read]) -> int:
        """Begin `part`'s fetch and read its log into `answers`; the read's latency (0 unless the disk is slow)."""
        if partition is None:
            answers.append(FetchPartitionData(part.topic_partition, errors.NOT_LEADER_OR_FOLLOWER))
            return 0
        started = partition.begin_follower_fetch(request.replica_id, part.fetch_offset, part.current_leader_epoch,
                                                 part.last_fetched_epoch, part.log_start_offset, now_ms,
                                                 from_purgatory=from_purgatory, replica_epoch=request.replica_epoch)
        if isinstance(started, FetchPartitionData):
            answers.append(started)
            return 0
        outcome: ReadResultView | KafkaException
        held_back = throttled and self._throttles is not None and self._throttles.holds_back(
            part.topic_partition, request.replica_id in partition.isr, now_ms, leader=True)
        latency_ms = 0
        try:
            outcome = partition.log.read(part.fetch_offset, 0 if held_back else max(0, part.partition_max_bytes),
                                         min_one_batch=not held_back)
            latency_ms = getattr(outcome, "read_latency_ms", 0)
        except KafkaException as exc:
            outcome = exc
        answers.append((part.topic_partition, started, outcome))
        return latency_ms

    def complete(self, now_ms: int, token: int) -> FetchOutcome:
        slow = self._slow.pop(token, None)
        if slow is None:
            return FetchOutcome([], [])
        return self._finish(now_ms, slow, may_park=False)

    def _finish(self, now_ms: int, slow: _SlowFollowerFetch, may_park: bool) -> FetchOutcome:
        datas: list[FetchPartitionData] = []
        results: list[tuple[Partition, FollowerFetchResult]] = []
        for answer in slow.answers:
            if isinstance(answer, FetchPartitionData):
                datas.append(answer)
                continue
            tp, read, outcome = answer
            partition = self._partitions(tp)
            if partition is None:
                datas.append(FetchPartitionData(tp, errors.NOT_LEADER_OR_FOLLOWER))
                continue
            result = partition.complete_follower_fetch(read, outcome, now_ms)
            results.append((partition, result))
            datas.append(result.data)
        if self._throttles is not None and self._throttles.is_set(leader=True):
            for data in datas:
                self._throttles.record(data.topic_partition, len(data.records), now_ms, leader=True)
        quiet = all(data.error is errors.NONE and data.diverging_epoch is None for data in datas)
        size = sum(len(data.records) for data in datas)
        request = slow.context.request
        if (may_park and quiet and (size == 0 or size < request.min_bytes) and request.max_wait_ms > 0
                and request.partitions and self._park(now_ms, slow.source, request, slow.context)):
            return FetchOutcome([], results)
        response = FetchResponse(request.correlation_id, errors.NONE,
                                 self.sessions.respond(slow.context, tuple(datas)), slow.context.session_id)
        return FetchOutcome([Outgoing(slow.source, response)], results)

    # Consumer fetches ---------------------------------------------------------------------------------

    def consumer_fetch(self, now_ms: int, source: Address, request: ConsumerFetchRequest, may_park: bool = True
                       ) -> FetchOutcome:
        parts: list[ConsumerFetchPartition] = []
        limits = request.partition_max_bytes or (request.max_bytes,) * len(request.partitions)
        assert len(limits) == len(request.partitions), request
        budget = request.max_bytes
        for (tp, offset), limit in zip(request.partitions, limits, strict=True):
            # Kafka's ReplicaManager.readFromLog: each partition up to its own limit and what is left of the
            # response's; one whole batch past both only while the response has no data yet (KIP-74).
            part = self._consumer_read(tp, offset, max(0, min(limit, budget)),
                                       min_one_batch=budget == request.max_bytes, leader_only=request.leader_only,
                                       read_committed=request.isolation_level == READ_COMMITTED)
            budget -= len(part.records)
            parts.append(part)
        empty = all(not p.records and p.error is errors.NONE for p in parts)
        if may_park and empty and request.max_wait_ms > 0 and self._park(now_ms, source, request):
            return FetchOutcome([], [])
        return FetchOutcome([Outgoing(source, ConsumerFetchResponse(request.correlation_id, tuple(parts)))], [])

    def _consumer_read(self, tp: TopicPartition, offset: Offset, max_bytes: int, min_one_batch: bool,
                       leader_only: bool = True, read_committed: bool = False) -> ConsumerFetchPartition:
        """Read committed data: below the high watermark, or for read_committed below the last stable offset and
        with the aborted transactions the read may meet (Kafka's `collectAbortedTransactions`)."""
        # Any replica may answer when the request allows it, a follower below its own high watermark (KIP-392).
        partition = self._partitions(tp) if leader_only else self._hosted(tp)
        if partition is None or (leader_only and not partition.is_leader) or partition.recovering:  # KIP-704
            return ConsumerFetchPartition(tp, errors.NOT_LEADER_OR_FOLLOWER, UNKNOWN_OFFSET, UNKNOWN_OFFSET, b"")
        hw, lso = partition.high_watermark, partition.last_stable_offset
        log_start = Offset(partition.log.log_start_offset)
        if offset < log_start or offset > partition.log.log_end_offset:
            return ConsumerFetchPartition(tp, errors.OFFSET_OUT_OF_RANGE, hw, log_start, b"")
        limit = lso if read_committed else hw
        aborted: tuple[AbortedTxn, ...] | None = () if read_committed else None
        if offset >= limit:
            # Past the high watermark but inside the log: nothing committed to read yet, and no error, as in
            # Kafka's UnifiedLog.read. A leader that just took over (or restarted) can have a high watermark below
            # what consumers already read from the previous leader; OFFSET_OUT_OF_RANGE here would make librdkafka
            # reset their position (to the end, skipping records, or to the start, reading them twice).
            return ConsumerFetchPartition(tp, errors.NONE, hw, log_start, b"", lso, aborted)
        try:
            result = partition.log.read(offset, max_bytes, limit, min_one_batch=min_one_batch)
        except KafkaException as exc:
            return ConsumerFetchPartition(tp, exc.error, hw, log_start, b"")
        if read_committed and result.records:
            aborted = tuple(partition.producer_state.transactions.aborted_in(offset, result.next_offset))
        return ConsumerFetchPartition(tp, errors.NONE, hw, log_start, bytes(result.records), lso, aborted)

    # Parked fetches -----------------------------------------------------------------------------------

    def _park(self, now_ms: int, source: Address, request: Request, context: SessionContext | None = None) -> bool:
        """Park `request` in the purgatory; False when it is full (the caller answers at once)."""
        keys: tuple[Hashable, ...]
        if isinstance(request, FetchRequest):
            # A session's fetch waits on its session, which `wake` finds from the partitions (`FetchSessions.mark`):
            # parking it under each of thousands of partitions would cost what the visit saved.
            in_session = context is not None and self.sessions.clock(context) is not None
            delayed = DelayedFetch(_Waiting(source, request, context),
                                   () if in_session else (part.topic_partition for part in request.partitions),
                                   request.min_bytes, follower=True)
            keys = (SessionKey(context.session_id),) if in_session and context is not None else delayed.keys
        else:
            delayed = DelayedFetch(_Waiting(source, request), (tp for tp, _ in request.partitions), 1,
                                   follower=False)
            keys = delayed.keys
        try:
            self._purgatory.add(delayed, now_ms + request.max_wait_ms, keys)
        except PurgatoryFullError:
            return False
        return True

    def wake(self, now_ms: int, appended: Mapping[TopicPartition, int] | None = None,
             hw_advanced: Collection[TopicPartition] = (), forced: Collection[TopicPartition] = ()
             ) -> FetchOutcome:
        """Serve, in the order they were parked, the parked fetches now due (Kafka's DelayedFetch.tryComplete):
        - a follower fetch once `min_bytes` were appended to its partitions since it was parked,
        - a consumer fetch once the high watermark of one of its partitions advanced,
        - any fetch for a partition in `forced` (leadership moved: it gets an error now),
        - any fetch whose wait expired.
        Only the fetches watching a partition named here (or a session holding one) are looked at, besides the
        expired ones; each fetch session holding one visits it on its next fetch (`FetchSessions.mark`)."""
        appended = appended or {}
        keys: dict[Hashable, None] = {}
        for tp, size in appended.items():
            for key in (tp, *self.sessions.mark((tp,))):
                keys[key] = None
                for delayed in self._purgatory.watchers(key):
                    delayed.on_append(size)
        for tp in hw_advanced:
            for key in (tp, *self.sessions.mark((tp,))):
                keys[key] = None
                for delayed in self._purgatory.watchers(key):
                    delayed.on_high_watermark_advanced()
        for tp in forced:
            for key in (tp, *self.sessions.mark((tp,))):
                keys[key] = None
                for delayed in self._purgatory.watchers(key):
                    delayed.force()
        outcome = FetchOutcome([], [])
        for delayed in self._purgatory.poll(now_ms, keys):
            waiting = delayed.context
            if isinstance(waiting.request, FetchRequest):
                served = self.follower_fetch(now_ms, waiting.source, waiting.request, may_park=not delayed.expired,
                                             from_purgatory=True, context=waiting.context)
            else:
                served = self.consumer_fetch(now_ms, waiting.source, waiting.request, may_park=not delayed.expired)
            outcome.commands.extend(served.commands)
            outcome.results.extend(served.results)
        return outcome

    def changed(self, tps: Iterable[TopicPartition]) -> None:
        """Something a follower's next fetch must see changed in these partitions, that completes no parked fetch
        (an ISR change proposed or decided, their log start, their log directory)."""
        self.sessions.mark(tps)

    def forget(self, source: Address) -> None:
        """A peer restarted: its parked fetches will never be read."""
        self._purgatory.remove_where(lambda delayed: delayed.context.source == source)

    def next_deadline_ms(self) -> int | None:
        return self._purgatory.next_deadline_ms()

    @property
    def purgatory_size(self) -> int:
        return len(self._purgatory)
