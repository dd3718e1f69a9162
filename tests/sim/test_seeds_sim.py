"""Each real-process seed script's claims hold for the simulator's run of its scenario too: one check, two sides
(tests/integration/test_seeds_real.py runs the real side)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from insync.chaos import seed_table, seeds
from insync.chaos.seeds_run import run_sim
from insync.cli.main import main


@pytest.mark.parametrize("name", [s.name for s in seeds.SEEDS])
def test_seed_claims_hold_in_the_simulator(name: str) -> None:
    seed = seeds.seed_named(name)
    run = run_sim(seed)
    assert run.side == "sim"
    assert seed.check(run) == [], seed_table.render([seed_table.figures(name, run, seed.check(run))])


def test_seeds_command_prints_the_simulator_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "seeds", "stuck-follower", "--sim-only", "--markdown", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].startswith("| scenario | side | lag s |") and lines[2].startswith("| stuck-follower | sim | 10 |")
    assert lines[2].endswith("| ok |") and len(lines) == 3
    assert "stuck-follower: a follower paused" in out.err
    assert main(["chaos", "seeds", "stuck-follower", "--sim-only", "--json", "--dir", str(tmp_path)]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["removed (reason: waited / lag)"].startswith("stuck: 1.")


def test_seeds_command_refuses_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "seeds", "nope", "--sim-only"]) == 1
    assert "unknown seed scenario 'nope'" in capsys.readouterr().err
