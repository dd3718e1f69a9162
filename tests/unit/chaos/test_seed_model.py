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
