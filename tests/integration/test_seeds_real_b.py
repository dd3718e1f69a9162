"""The other half of the seed scenarios on real processes (see test_seeds_real.py, which runs the first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from seed_checks import NAMES, check_seed

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.mark.parametrize("name", NAMES[1::2])
def test_seed_scenario_on_real_processes_b(name: str, tmp_path: Path) -> None:
    check_seed(name, tmp_path)
