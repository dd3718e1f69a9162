"""The replication throttle's rate (Kafka's ReplicationQuotaManager): bytes per second over the sampled window,
the elapsed time counting at least all but one sample, and samples older than the window forgotten."""

from __future__ import annotations

import pytest

from insync.replication.quota import QuotaConfig, ReplicationQuota


def test_the_rate_is_measured_over_at_least_all_but_one_sample() -> None:
    quota = ReplicationQuota(QuotaConfig(window_num=11, window_ms=1000))
    assert quota.rate(0) == 0.0 and not quota.is_exceeded(0, 0)
    quota.record(10_000, 500)
    assert quota.rate(600) == 1000.0  # 10,000 bytes over 10 s, not over the 100 ms since
    assert quota.is_exceeded(999, 600) and not quota.is_exceeded(1000, 600)


def test_samples_older_than_the_window_are_forgotten() -> None:
    quota = ReplicationQuota(QuotaConfig(window_num=2, window_ms=1000))
    quota.record(4000, 0)
    quota.record(1000, 1500)
    assert quota.rate(1500) == pytest.approx(5000 / 1.5)  # since the first sample began
    assert quota.rate(2500) == pytest.approx(1000 / 1.5)  # the first sample left the 2 s window
    assert quota.rate(5000) == 0.0
