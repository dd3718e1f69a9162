"""One seed scenario on real processes and its claims, for test_seeds_real.py and test_seeds_real_b.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.chaos import netns, seed_table, seeds
from insync.chaos.seeds_run import run_real

# Half the scenarios in test_seeds_real.py, the other half in test_seeds_real_b.py: `make test` hands out whole files
# to its xdist workers, and all 13 in one file (about 4.5 minutes) were the tail of the run.
NAMES = [s.name for s in seeds.SEEDS]


def check_seed(name: str, tmp_path: Path) -> None:
    seed = seeds.seed_named(name)
    unavailable = netns.unavailable() if seed.namespaces else None
    if unavailable:
        pytest.skip(f"needs network namespaces: {unavailable}")
    run = run_real(seed, tmp_path)
    assert seed.check(run) == [], seed_table.render([seed_table.figures(name, run, seed.check(run))])
    # The idempotent producer's retries through the faults wrote nothing twice (a power loss under the Kafka 3.x
    # election truncates its acknowledged writes away, and its retries of the lost ones are no duplicates).
    assert run.duplicated == 0
