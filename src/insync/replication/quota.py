"""A replication throttle's rate, after Kafka's `ReplicationQuotaManager`: bytes per second over the last
`replication.quota.window.num` samples of `replication.quota.window.size.seconds`, sans-IO (`now_ms` given).

As Kafka's `Rate`, the elapsed time counts at least all but one full sample, so a burst at the start of a
window is measured against the whole window, not the few milliseconds since it began. `is_exceeded` compares
the measured rate with a bound given at each call (the broker's current dynamic config).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    window_num: int = 11
    window_ms: int = 1000

    def __post_init__(self) -> None:
        assert self.window_num >= 1 and self.window_ms >= 1, self


class ReplicationQuota:
    def __init__(self, config: QuotaConfig | None = None) -> None:
        self.config = config or QuotaConfig()
        self._samples: deque[list[int]] = deque(maxlen=self.config.window_num)  # [window start ms, bytes]

    def record(self, size: int, now_ms: int) -> None:
        assert size >= 0
        window_start = now_ms - now_ms % self.config.window_ms
        if self._samples and self._samples[-1][0] == window_start:
            self._samples[-1][1] += size
        else:
            self._samples.append([window_start, size])

    def rate(self, now_ms: int) -> float:
        """Bytes per second over the samples still in the window."""
        span = self.config.window_num * self.config.window_ms
        live = [(start, size) for start, size in self._samples if start > now_ms - span]
        if not live:
            return 0.0
        elapsed = max(now_ms - live[0][0], (self.config.window_num - 1) * self.config.window_ms, 1)
        return sum(size for _, size in live) * 1000 / elapsed

    def is_exceeded(self, bound: int, now_ms: int) -> bool:
        return self.rate(now_ms) > bound
