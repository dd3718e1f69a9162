"""Delayed operations: requests that wait for a condition or a deadline, as Kafka's purgatories.

A `Purgatory[T]` holds operations, each with a deadline and the watch keys (topic-partitions) whose changes may
complete it. The driver calls `check(key)` after something moved for that key (a high watermark advanced, data
was appended) and `expire(now_ms)` when the clock passes `next_deadline_ms()`; both return the operations that
left, and the driver answers their requests. An operation knows how to try completion (`try_complete`) and what
expiry means to it (`on_expire`). The purgatory is bounded: beyond its capacity `add` refuses with
`PurgatoryFullError` and the driver answers at once instead of parking the request.

Two operations are provided:
- `DelayedProduce`: an acks=all produce, complete when every partition's `produce_status` is decided (the
  high watermark passed the batch, or leadership moved); at expiry the undecided ones get REQUEST_TIMED_OUT.
- `DelayedFetch`: a fetch waiting for `min_bytes` across its partitions, complete when enough bytes are
  available or a partition must be answered now (its `probe` says None); at `max_wait_ms` it is answered
  with whatever there is.
Both carry an opaque `context` for the driver (its request, for instance).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from insync import errors, limits
from insync.errors import KafkaError
from insync.replication.results import ProduceWait
from insync.types import Offset, TopicPartition


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
        tries completion first: an operation that can complete now should not be parked."""
        watch_keys = tuple(dict.fromkeys(keys))
        assert watch_keys, "an operation nothing can complete would only ever expire"
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

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._entries:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def watched(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def watched_keys(self) -> list[Hashable]:
        return list(self._watchers)

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
    """A fetch waiting for `min_bytes` (Kafka's DelayedFetch). `probe(tp, fetch_offset)` gives the bytes
    available to this fetch from `fetch_offset`, or None when the partition must be answered now (leadership
    moved, the offset left the log)."""

    def __init__(self, context: C, partitions: Sequence[tuple[TopicPartition, Offset]], min_bytes: int,
                 probe: Callable[[TopicPartition, Offset], int | None]) -> None:
        assert partitions and min_bytes >= 1
        self.context = context
        self.partitions = tuple(partitions)
        self.min_bytes = min_bytes
        self._probe = probe
        self.expired = False

    @property
    def keys(self) -> tuple[TopicPartition, ...]:
        return tuple(topic_partition for topic_partition, _ in self.partitions)

    def try_complete(self) -> bool:
        available = 0
        for topic_partition, fetch_offset in self.partitions:
            found = self._probe(topic_partition, fetch_offset)
            if found is None:
                return True
            available += found
            if available >= self.min_bytes:
                return True
        return False

    def on_expire(self) -> None:
        self.expired = True
