"""Kafka's `Throttler`: callers report bytes moved; past the desired rate over a check interval, the caller sleeps
until the average is back at the rate. Each log cleaner worker process has one, at its share of
`log.cleaner.io.max.bytes.per.second`; it runs only there, never on the event loop."""

from __future__ import annotations

import time
from collections.abc import Callable

CHECK_INTERVAL_S = 0.3  # Kafka's default checkIntervalMs


class Throttler:
    def __init__(self, bytes_per_second: float, *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        assert bytes_per_second > 0
        self.bytes_per_second = bytes_per_second
        self._monotonic, self._sleep = monotonic, sleep
        self._period_start = monotonic()
        self._observed = 0
        self.slept_s = 0.0

    def maybe_throttle(self, observed_bytes: int) -> None:
        assert observed_bytes >= 0
        self._observed += observed_bytes
        elapsed = self._monotonic() - self._period_start
        if elapsed < CHECK_INTERVAL_S:
            return
        pause_s = self._observed / self.bytes_per_second - elapsed
        self._period_start, self._observed = self._monotonic(), 0
        if pause_s > 0:
            self.slept_s += pause_s
            self._sleep(pause_s)
            self._period_start = self._monotonic()
