"""Time as a value passed in, never read by the cores.

The cores (`replication/`, `controller/`, `broker/`, `protocol/`) take `now_ms` or a `Clock`. The server gives
them `SystemClock`; the simulator and the tests give them `ManualClock`, whose time moves only when told to.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...


class SystemClock:
    """Wall time for timestamps, monotonic time for timers and lag (so a clock step never shrinks an ISR)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that only moves forward, and only when `advance` or `set` is called."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        assert start_ms >= 0
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> int:
        assert delta_ms >= 0, f"time cannot go backwards: {delta_ms}"
        self._now_ms += delta_ms
        return self._now_ms

    def set(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time cannot go backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms
