"""Delayed operations: requests that wait for a condition or a deadline, as Kafka's purgatories.

A `Purgatory[T]` holds operations, each with a deadline and the watch keys (topic-partitions) whose changes may
complete it, indexed by key and by deadline (a heap), so that nothing scans every operation. `check(key)` tries
the operations watching `key`, `expire(now_ms)` removes those past their deadline, and `poll(now_ms, keys)` does
both and returns what left in the order it was added. The purgatory is bounded: beyond its capacity `add` raises
`PurgatoryFullError` and the driver answers at once instead of parking the request.
- `DelayedProduce`: an acks=all produce, complete when every partition's `produce_status` is decided; at expiry
  the undecided ones get REQUEST_TIMED_OUT.
- `DelayedFetch`: a fetch that found nothing to send. A follower's completes once `min_bytes` were appended to
  its partitions, a consumer's once a high watermark advanced, either at once when leadership moved; at its
  deadline it is answered with what there is. The driver reports changes to `Purgatory.watchers` before `poll`.
Both carry an opaque `context` for the driver (its request, for instance).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from insync import errors, limits
from insync.errors import KafkaError
from insync.replication.results import ProduceWait
from insync.types import TopicPartition


class DelayedOperation(Protocol):
    def try_complete(self) -> bool:
        """Whether the operation is now complete (it records its own outcome)."""
        ...

    def on_expire(self) -> None:
        """The deadline passed before completion."""
        ...


class PurgatoryFullError(Exception):
    """The purgatory holds its maximum number of operations; answer the request without delaying it."""


T = TypeVar("T", bound=DelayedOperation)
C = TypeVar("C")


@dataclass(slots=True)
class _Entry(Generic[T]):
    operation: T
    deadline_ms: int
    keys: tuple[Hashable, ...]


class Purgatory(Generic[T]):
    def __init__(self, name: str, capacity: int = limits.PURGATORY_ENTRIES_MAX) -> None:
        assert 0 < capacity <= limits.PURGATORY_ENTRIES_MAX
        self.name = name
        self._capacity = capacity
        self._ids = itertools.count()
        self._entries: dict[int, _Entry[T]] = {}
        self._watchers: dict[Hashable, dict[int, None]] = {}  # insertion-ordered sets: deterministic checks
        self._deadlines: list[tuple[int, int]] = []  # (deadline_ms, id); entries already gone are skipped

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, operation: T, deadline_ms: int, keys: Iterable[Hashable]) -> None:
        """Park `operation` until `check` of one of `keys` completes it or `deadline_ms` passes. The caller
        tries completion first: an operation that can complete now should not be parked. An operation with no
        key waits for its deadline only."""
        watch_keys = tuple(dict.fromkeys(keys))
        if len(self._entries) >= self._capacity:
            raise PurgatoryFullError(f"{self.name} purgatory holds {self._capacity} operations")
        op_id = next(self._ids)
        self._entries[op_id] = _Entry(operation, deadline_ms, watch_keys)
        for key in watch_keys:
            self._watchers.setdefault(key, {})[op_id] = None
        heapq.heappush(self._deadlines, (deadline_ms, op_id))
        self._compact_deadlines()

    def check(self, key: Hashable) -> list[T]:
        """Try to complete every operation watching `key`; return (and remove) those that completed."""
        completed: list[T] = []
        for op_id in list(self._watchers.get(key, ())):
            entry = self._entries[op_id]
            if entry.operation.try_complete():
                self._remove(op_id)
                completed.append(entry.operation)
        return completed

    def expire(self, now_ms: int) -> list[T]:
        """Remove the operations whose deadline is at or before `now_ms`, after telling each it expired."""
        expired: list[T] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, op_id = heapq.heappop(self._deadlines)
            entry = self._entries.get(op_id)
            if entry is None:
                continue  # completed earlier
            self._remove(op_id)
            entry.operation.on_expire()
            expired.append(entry.operation)
        return expired

    def poll(self, now_ms: int, keys: Iterable[Hashable]) -> list[T]:
        """Remove and return, in the order they were added, the operations watching one of `keys` that complete
        now and every operation whose deadline is at or before `now_ms` (told first that it expired)."""
        candidates = {op_id for key in keys for op_id in self._watchers.get(key, ())}
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, op_id = heapq.heappop(self._deadlines)
            if op_id in self._entries:  # else completed earlier
                candidates.add(op_id)
        done: list[T] = []
        for op_id in sorted(candidates):
            entry = self._entries[op_id]
            if entry.deadline_ms <= now_ms:
                entry.operation.on_expire()
            elif not entry.operation.try_complete():
                continue
            self._remove(op_id)
            done.append(entry.operation)
        return done

    def remove_where(self, doomed: Callable[[T], bool]) -> int:
        """Drop, without completing them, the operations `doomed` selects (their requester is gone); a scan of
        every operation, for rare events. Returns how many were dropped."""
        gone = [op_id for op_id, entry in self._entries.items() if doomed(entry.operation)]
        for op_id in gone:
            self._remove(op_id)
        self._compact_deadlines()
        return len(gone)

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._entries:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def watched(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def watched_keys(self) -> list[Hashable]:
        return list(self._watchers)

    def watchers(self, key: Hashable) -> list[T]:
        """The operations watching `key`, in the order they were added."""
        return [self._entries[op_id].operation for op_id in self._watchers.get(key, ())]

    def _remove(self, op_id: int) -> None:
        entry = self._entries.pop(op_id)
        for key in entry.keys:
            watchers = self._watchers[key]
            del watchers[op_id]
            if not watchers:
                del self._watchers[key]

    def _compact_deadlines(self) -> None:
        # Completed operations leave their heap entries behind; rebuild before they outnumber the live ones.
        if len(self._deadlines) > 2 * len(self._entries) + 64:
            self._deadlines = [(entry.deadline_ms, op_id) for op_id, entry in self._entries.items()]
            heapq.heapify(self._deadlines)


class ProduceStatusSource(Protocol):
    def produce_status(self, wait: ProduceWait) -> KafkaError | None: ...


class DelayedProduce(Generic[C]):
    """An acks=all produce waiting for its partitions (Kafka's DelayedProduce)."""

    def __init__(self, context: C, waits: Mapping[TopicPartition, tuple[ProduceStatusSource, ProduceWait]]) -> None:
        assert waits, "a produce with no partition to wait for completes at once"
        self.context = context
        self._waits = dict(waits)
        self._results: dict[TopicPartition, KafkaError] = {}
        self.expired = False

    @property
    def keys(self) -> tuple[TopicPartition, ...]:
        return tuple(self._waits)

    def try_complete(self) -> bool:
        for topic_partition, (source, wait) in self._waits.items():
            if topic_partition not in self._results:
                status = source.produce_status(wait)
                if status is not None:
                    self._results[topic_partition] = status
        return len(self._results) == len(self._waits)

    def on_expire(self) -> None:
        self.try_complete()  # last look: what is decided counts
        self.expired = True
        for topic_partition in self._waits:
            self._results.setdefault(topic_partition, errors.REQUEST_TIMED_OUT)

    def results(self) -> dict[TopicPartition, KafkaError]:
        assert len(self._results) == len(self._waits), "results are read once the produce is complete"
        return dict(self._results)


class DelayedFetch(Generic[C]):
    """A fetch that found nothing to send, parked until it may be answered (Kafka's DelayedFetch.tryComplete): a
    follower's once `min_bytes` were appended to its partitions since it was parked (`replica.fetch.min.bytes`;
    a follower asking for 0 bytes still waits for one, as it was parked only because it had nothing), a
    consumer's once the high watermark of one of them advanced (it reads committed data only), either at once
    when one of its partitions must be answered now (`force`: leadership moved)."""

    def __init__(self, context: C, partitions: Iterable[TopicPartition], min_bytes: int, follower: bool) -> None:
        self.context = context
        self.partitions = tuple(dict.fromkeys(partitions))
        self.min_bytes = max(min_bytes, 1)
        self.follower = follower
        self.bytes_appended = 0  # to `partitions` since parked; only a follower's fetch counts them
        self.expired = False
        self._answer_now = False

    @property
    def keys(self) -> tuple[TopicPartition, ...]:
        return self.partitions

    def on_append(self, size: int) -> None:
        """`size` bytes were appended to one of the partitions."""
        if self.follower:
            self.bytes_appended += size

    def on_high_watermark_advanced(self) -> None:
        """The high watermark of one of the partitions advanced: a consumer may have something to read."""
        if not self.follower:
            self._answer_now = True

    def force(self) -> None:
        """One of the partitions must be answered now (leadership moved: it gets an error)."""
        self._answer_now = True

    def try_complete(self) -> bool:
        return self._answer_now or (self.follower and self.bytes_appended >= self.min_bytes)

    def on_expire(self) -> None:
        self.expired = True
