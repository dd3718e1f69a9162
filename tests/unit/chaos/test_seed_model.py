"""A seed script's steps refuse what they cannot do, naming what they can."""

from __future__ import annotations

import pytest

from insync.chaos.seed_model import SeedStep
from insync.config import ConfigError


def test_bad_steps_are_refused() -> None:
    with pytest.raises(ConfigError, match="action must be one of"):
        SeedStep(1, "explode", "leader")
    with pytest.raises(ConfigError, match="target must be a broker id or one of leader, follower"):
        SeedStep(1, "pause", "controller")
    with pytest.raises(ConfigError, match="a throttle needs a rate"):
        SeedStep(1, "throttle", "follower")
    with pytest.raises(ConfigError, match="only a throttle has one; got pause at 10 kbit/s"):
        SeedStep(1, "pause", "follower", kbit=10)
    with pytest.raises(ConfigError, match="after must be one of isr-full, isr-published, isr-shrunk, leader-alone, got 'soon'"):
        SeedStep(1, "pause", "leader", after="soon")
    with pytest.raises(ConfigError, match="target must be a broker id or one of leader, follower, follower2"):
        SeedStep(1, "isolate", "all")
    with pytest.raises(ConfigError, match="a latency needs 0 < ms and 0 <= jitter_ms <= ms"):
        SeedStep(1, "latency", "follower", ms=3, jitter_ms=4)
    with pytest.raises(ConfigError, match="got latency of 0 \\+/- 0 ms"):
        SeedStep(1, "latency", "follower")
    with pytest.raises(ConfigError, match="only a latency has a jitter; got slow-reads of 300 \\+/- 30 ms"):
        SeedStep(1, "slow-reads", "leader", ms=300, jitter_ms=30)
    assert SeedStep(1, "latency", "follower", ms=10, jitter_ms=3).jitter_ms == 3
