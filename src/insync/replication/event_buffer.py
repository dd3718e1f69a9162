"""Events collected by the replication cores until their driver drains them.

A broker shares one `EventBuffer` between its partitions and fetcher sessions and drains it after every step
it drives, so events come out in the order they happened. The buffer is bounded: a driver that never drains is
a programmer error, caught by an assertion rather than by memory running out.
"""

from __future__ import annotations

from insync import limits
from insync.events import Event


class EventBuffer:
    __slots__ = ("_events", "_limit")

    def __init__(self, limit: int = limits.EVENTS_BUFFERED_MAX) -> None:
        assert limit > 0
        self._events: list[Event] = []
        self._limit = limit

    def emit(self, event: Event) -> None:
        assert len(self._events) < self._limit, f"{self._limit} events buffered: the driver must drain them"
        self._events.append(event)

    def drain(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def __len__(self) -> int:
        return len(self._events)
