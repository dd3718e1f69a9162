"""The crash fault refuses a node whose disk does not journal what it fsynced."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.chaos import cluster, power
from insync.config import ConfigError


def test_crash_is_refused_without_the_power_loss_setting(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, 1, 0)
    with pytest.raises(ConfigError, match="node 1 was not started with fault.injection.power.loss.enable=true"):
        power.crash(spec, 1)
