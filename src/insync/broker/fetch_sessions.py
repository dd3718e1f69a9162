"""The leader's incremental fetch sessions for its followers (KIP-227, Kafka's FetchSessionCache and FetchContext).

A follower's full fetch at epoch INITIAL_EPOCH opens a session holding each partition's fetch state; its later
fetches carry the session id and the next epoch, and list only the partitions whose fetch state changed (and those
to forget). `open` turns such a request into the full one the fetch server serves, so every partition of the
session has its follower state updated on each fetch, as Kafka's IncrementalFetchContext does (one with nothing
new for its follower without a read of its log: `FetchServer.follower_fetch`);
`respond` keeps, of an incremental answer, only the partitions with something new (records, an error, a diverging
epoch, or a changed high watermark or log start). A wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown id (or
one opened by another broker) FETCH_SESSION_ID_NOT_FOUND; the follower then starts over with a full fetch. Sessions
are kept for followers only (a consumer's fetch stays full), one per follower, at most `SESSIONS_MAX`, the least
recently used evicted first.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
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
from insync.types import UNKNOWN_OFFSET, BrokerId, Offset, TopicPartition

SESSIONS_MAX = 1_000  # Kafka's max.incremental.fetch.session.cache.slots default


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


@dataclass(frozen=True, slots=True)
class SessionContext:
    """How one fetch is answered: `request` is the full fetch to serve; an incremental answer is trimmed."""

    request: FetchRequest
    session_id: int = NO_SESSION
    incremental: bool = False


class FetchSessions:
    def __init__(self, capacity: int = SESSIONS_MAX) -> None:
        assert capacity > 0
        self._capacity = capacity
        self._sessions: OrderedDict[int, _Session] = OrderedDict()  # least recently used first
        self._next_id = 1

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def open(self, request: FetchRequest) -> SessionContext | KafkaError:
        """The context of a follower's fetch, or the error that answers it instead."""
        assert request.replica_id >= 0, request
        if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._sessions.pop(request.session_id, None)  # a full fetch closes the session it names
            if request.session_epoch == FINAL_EPOCH:
                return SessionContext(request)
            return SessionContext(request, self._create(request))
        session = self._sessions.get(request.session_id)
        if session is None or session.replica_id != request.replica_id:
            return errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
        if session.epoch != request.session_epoch:
            return errors.BY_NAME["INVALID_FETCH_SESSION_EPOCH"]
        for tp in request.forgotten:
            session.partitions.pop(tp, None)
            session.answered.pop(tp, None)
        for part in request.partitions:
            session.partitions[part.topic_partition] = part
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

    def forget(self, replica_id: BrokerId) -> None:
        """A follower restarted: its sessions will never be continued."""
        for session_id in [s.session_id for s in self._sessions.values() if s.replica_id == replica_id]:
            del self._sessions[session_id]

    def _create(self, request: FetchRequest) -> int:
        self.forget(request.replica_id)  # a follower keeps one session with each leader
        while len(self._sessions) >= self._capacity:
            self._sessions.popitem(last=False)
        session_id = self._next_id
        for _ in range(self._capacity + 1):  # bounded: at most `capacity` ids are in use
            if session_id not in self._sessions:
                break
            session_id = 1 if session_id == SESSION_EPOCH_MAX else session_id + 1
        self._next_id = 1 if session_id == SESSION_EPOCH_MAX else session_id + 1
        self._sessions[session_id] = _Session(session_id, request.replica_id, next_session_epoch(INITIAL_EPOCH),
                                              {p.topic_partition: p for p in request.partitions}, {})
        return session_id
