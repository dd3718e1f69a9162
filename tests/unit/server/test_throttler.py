"""Kafka's Throttler: sleeps only when the rate over a check interval passes the desired one, long enough to bring
the average back."""

from __future__ import annotations

from insync.server.throttler import CHECK_INTERVAL_S, Throttler


def test_sleeps_back_to_the_desired_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, monotonic=lambda: now[0], sleep=sleep)
    throttler.maybe_throttle(100)  # within the check interval: no decision yet
    now[0] += CHECK_INTERVAL_S
    throttler.maybe_throttle(900)  # 1000 bytes in 0.3 s at 1000 B/s: 0.7 s owed
    assert slept == [1.0 - CHECK_INTERVAL_S]
    now[0] += 1.0
    throttler.maybe_throttle(10)  # well under the rate
    assert len(slept) == 1
