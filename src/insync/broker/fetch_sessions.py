"""The leader's incremental fetch sessions for its followers (KIP-227, Kafka's FetchSessionCache and FetchContext).

A follower's full fetch at epoch INITIAL_EPOCH opens a session holding each partition's fetch state; its later
fetches carry the session id and the next epoch, and list only the partitions whose fetch state changed (and those
to forget). Every partition of the session has its follower state updated on each fetch, as in Kafka's
IncrementalFetchContext; but where Kafka walks them all, a fetch here visits only those changed since the session
last found them idle (`visit`: named by the follower, or `mark`ed on the leader's appends and its high-watermark,
leadership, ISR and log-start changes), the rest taking the fetch's time lazily through the session's
`FollowerClock`. A full walk every `FULL_WALK_INTERVAL_MS` bounds what an unmarked change costs (`missed_changes`).
`respond` keeps, of an incremental answer, only the partitions with something new (records, an error, a diverging
epoch, a changed high watermark or log start). A wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown id (or one
opened by another broker) FETCH_SESSION_ID_NOT_FOUND: the follower starts over with a full fetch. Sessions are kept
for followers only, one per follower, at most `SESSIONS_MAX`, the least recently used evicted first.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.replication.leader import FollowerClock
from insync.replication.messages import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    SESSION_EPOCH_MAX,
    FetchPartitionData,
    FetchRequest,
    FetchRequestPartition,
    next_session_epoch,
)
from insync.types import UNKNOWN_BROKER_EPOCH, UNKNOWN_OFFSET, BrokerEpoch, BrokerId, Offset, TopicPartition

SESSIONS_MAX = 1_000  # Kafka's max.incremental.fetch.session.cache.slots default
# How often an incremental fetch still walks its whole session: far below any replica.lag.time.max.ms, so a change
# that was not marked costs a follower little, and rare enough to cost a leader of thousands of partitions little.
FULL_WALK_INTERVAL_MS = 2_000


@dataclass(frozen=True, slots=True)
class _Answered:
    """What the follower last heard of a partition: an incremental answer leaves it out while this holds."""

    high_watermark: Offset = UNKNOWN_OFFSET
    log_start_offset: Offset = UNKNOWN_OFFSET


@dataclass(slots=True)
class _Session:
    session_id: int
    replica_id: BrokerId
    epoch: int  # the epoch the follower's next fetch must carry
    partitions: dict[TopicPartition, FetchRequestPartition]
    answered: dict[TopicPartition, _Answered]
    clock: FollowerClock  # when this session's follower last fetched (for the partitions it did not visit)
    replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH
    # The partitions the next fetch visits (an insertion-ordered set: deterministic answers in the simulator).
    dirty: dict[TopicPartition, None] = dataclasses.field(default_factory=dict)
    full_walk_due_ms: int = 0  # the first fetch after this walks the whole session


@dataclass(frozen=True, slots=True)
class SessionContext:
    """How one fetch is answered: `request` is the full fetch to serve; an incremental answer is trimmed."""

    request: FetchRequest
    session_id: int = NO_SESSION
    incremental: bool = False


@dataclass(frozen=True, slots=True)
class SessionKey:
    """What a parked session fetch waits on in the purgatory, instead of each of its partitions."""

    session_id: int


class FetchSessions:
    def __init__(self, capacity: int = SESSIONS_MAX) -> None:
        assert capacity > 0
        self._capacity = capacity
        self._sessions: OrderedDict[int, _Session] = OrderedDict()  # least recently used first
        self._holders: dict[TopicPartition, dict[int, None]] = {}  # which sessions hold each partition
        self._next_id = 1
        self.missed_changes = 0  # partitions a full walk found changed that no `mark` had named

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def open(self, request: FetchRequest) -> SessionContext | KafkaError:
        """The context of a follower's fetch, or the error that answers it instead."""
        assert request.replica_id >= 0, request
        if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._close(request.session_id)  # a full fetch closes the session it names
            if request.session_epoch == FINAL_EPOCH:
                return SessionContext(request)
            return SessionContext(request, self._create(request))
        session = self._sessions.get(request.session_id)
        if session is None or session.replica_id != request.replica_id:
            return errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
        if session.epoch != request.session_epoch:
            return errors.BY_NAME["INVALID_FETCH_SESSION_EPOCH"]
        for tp in request.forgotten:
            if session.partitions.pop(tp, None) is not None:
                self._release(tp, session.session_id)
            session.answered.pop(tp, None)
            session.dirty.pop(tp, None)
        for part in request.partitions:
            if part.topic_partition not in session.partitions:
                self._holders.setdefault(part.topic_partition, {})[session.session_id] = None
            session.partitions[part.topic_partition] = part
            session.dirty[part.topic_partition] = None
        if request.replica_epoch != session.replica_epoch:  # the follower's life changed: every state with it
            session.replica_epoch, session.full_walk_due_ms = request.replica_epoch, 0
        session.epoch = next_session_epoch(session.epoch)
        self._sessions.move_to_end(session.session_id)
        full = dataclasses.replace(request, partitions=tuple(session.partitions.values()), forgotten=())
        return SessionContext(full, session.session_id, incremental=True)

    def respond(self, context: SessionContext, datas: tuple[FetchPartitionData, ...]
                ) -> tuple[FetchPartitionData, ...]:
        """The partitions to send: all of a full fetch's, those with news in an incremental one. Either way the
        session remembers what its follower now knows."""
        session = self._sessions.get(context.session_id)
        if session is None:
            return datas  # sessionless, or evicted while the fetch waited: the follower gets everything
        sent = []
        for data in datas:
            now_known = _Answered(data.high_watermark, data.log_start_offset) if data.error is errors.NONE \
                else _Answered()  # after an error, the partition is sent again once it is answered
            news = (bool(data.records) or data.error is not errors.NONE or data.diverging_epoch is not None
                    or session.answered.get(data.topic_partition) != now_known)
            if data.topic_partition in session.partitions:
                session.answered[data.topic_partition] = now_known
            if news or not context.incremental:
                sent.append(data)
        return tuple(sent)

    def unchanged(self, session_id: int, tp: TopicPartition, high_watermark: Offset, log_start_offset: Offset
                  ) -> bool:
        """Whether session `session_id`'s follower last heard these offsets of `tp`, without an error since."""
        session = self._sessions.get(session_id)
        answered = None if session is None else session.answered.get(tp)
        return answered is not None and answered.high_watermark == high_watermark \
            and answered.log_start_offset == log_start_offset

    def visit(self, context: SessionContext, now_ms: int, from_purgatory: bool = False
              ) -> tuple[tuple[FetchRequestPartition, ...], bool]:
        """The partitions this fetch must look at, and whether that is all of them: an incremental fetch's
        changed ones, until its session's next full walk (which only a new fetch makes: a read from the purgatory
        settles nothing of what it would find). The caller `settle`s what the visit found."""
        session = self._sessions.get(context.session_id)
        if session is None or not context.incremental or (not from_purgatory and now_ms >= session.full_walk_due_ms):
            if session is not None:
                session.full_walk_due_ms = now_ms + FULL_WALK_INTERVAL_MS
            return context.request.partitions, True
        parts = tuple(session.partitions[tp] for tp in session.dirty if tp in session.partitions)
        return parts, False

    def settle(self, context: SessionContext, idle: Collection[TopicPartition], *, walked: bool,
               from_purgatory: bool) -> None:
        """After a visit (`walked`: of the whole session): the partitions found `idle` leave the session's changed
        set, the rest visited stay in it. A read from the purgatory checked nothing of its follower's state, so it
        settles nothing. A whole walk also counts the changes no `mark` named (`missed_changes`)."""
        session = self._sessions.get(context.session_id)
        if session is None or from_purgatory:
            return
        if walked:
            idle = set(idle)
            if context.incremental:
                self.missed_changes += sum(1 for tp in session.partitions
                                           if tp not in idle and tp not in session.dirty)
            session.dirty = {tp: None for tp in session.partitions if tp not in idle}
        else:
            for tp in idle:
                session.dirty.pop(tp, None)

    def mark_session(self, context: SessionContext) -> None:
        """Every partition of this fetch's session was read: its next fetch visits them all."""
        session = self._sessions.get(context.session_id)
        if session is not None:
            session.dirty = dict.fromkeys(session.partitions)

    def clock(self, context: SessionContext) -> FollowerClock | None:
        session = self._sessions.get(context.session_id)
        return None if session is None else session.clock

    def mark(self, tps: Iterable[TopicPartition]) -> list[SessionKey]:
        """Something changed in these partitions: each session holding one visits it on its next fetch. Returns
        the keys of those sessions, whose parked fetches may now be due."""
        keys: dict[SessionKey, None] = {}
        for tp in tps:
            for session_id in self._holders.get(tp, ()):
                self._sessions[session_id].dirty[tp] = None
                keys[SessionKey(session_id)] = None
        return list(keys)

    def mark_all(self) -> None:
        """Something changed that is too wide to name partition by partition: every session's next fetch visits
        all its partitions."""
        for session in self._sessions.values():
            session.dirty = dict.fromkeys(session.partitions)

    def forget(self, replica_id: BrokerId) -> None:
        """A follower restarted: its sessions will never be continued."""
        for session_id in [s.session_id for s in self._sessions.values() if s.replica_id == replica_id]:
            self._close(session_id)

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for tp in session.partitions:
                self._release(tp, session_id)

    def _release(self, tp: TopicPartition, session_id: int) -> None:
        holders = self._holders.get(tp)
        if holders is not None:
            holders.pop(session_id, None)
            if not holders:
                del self._holders[tp]

    def _create(self, request: FetchRequest) -> int:
        self.forget(request.replica_id)  # a follower keeps one session with each leader
        while len(self._sessions) >= self._capacity:
            self._close(next(iter(self._sessions)))
        session_id = self._next_id
        for _ in range(self._capacity + 1):  # bounded: at most `capacity` ids are in use
            if session_id not in self._sessions:
                break
            session_id = 1 if session_id == SESSION_EPOCH_MAX else session_id + 1
        self._next_id = 1 if session_id == SESSION_EPOCH_MAX else session_id + 1
        partitions = {p.topic_partition: p for p in request.partitions}
        self._sessions[session_id] = _Session(session_id, request.replica_id, next_session_epoch(INITIAL_EPOCH),
                                              partitions, {}, FollowerClock(), request.replica_epoch,
                                              dict.fromkeys(partitions))
        for tp in partitions:
            self._holders.setdefault(tp, {})[session_id] = None
        return session_id
