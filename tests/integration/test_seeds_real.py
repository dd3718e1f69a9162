"""The seed scenarios on real processes (issue 20): each `insync.chaos.seeds.SEEDS` script on a fresh 3-process
cluster, its faults in lag times of 1.5 s, satisfying the same claims as the simulator's run of the scenario
(tests/sim/test_seeds_sim.py). About 15-35 s each; the ones that need network namespaces skip without root."""

from __future__ import annotations

from pathlib import Path

import pytest
from seed_checks import NAMES, check_seed

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.mark.parametrize("name", NAMES[::2])
def test_seed_scenario_on_real_processes(name: str, tmp_path: Path) -> None:
    check_seed(name, tmp_path)
