from __future__ import annotations

import argparse
import json

import pytest

from insync.cli import sim_cmd


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="insync")
    sim_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    assert isinstance(code, int)
    return code


def test_run_prints_json_with_the_contract_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["sim", "run", "stuck-follower", "--seed", "3", "--json", "--set", "duration_s=30"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    for name in ("scenario", "seed", "config", "virtual_s", "wall_s", "speedup", "acked", "lost_acked",
                 "duplicates", "isr_shrinks", "isr_expands", "urp_ms", "under_min_isr_ms", "offline_ms",
                 "produce_errors", "failed_partitions_max", "metadata_propagations", "invariant_violations",
                 "unclean_elections", "events"):
        assert name in data, name
    assert data["seed"] == 3 and data["config"]["duration_s"] == 30
    assert data["events"] and all("type" in e and "ts_ms" in e for e in data["events"])


def test_run_prints_a_table_and_a_failure_prints_the_reproducer(capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["sim", "run", "stuck-follower", "--set", "duration_s=30", "--set", "expect.isr_shrinks=5"])
    captured = capsys.readouterr()
    assert code == 1
    assert "ISR shrinks / expands" in captured.out
    assert "insync sim run stuck-follower --seed 1 --set duration_s=30 --set expect.isr_shrinks=5" in captured.err


def test_sweep_runs_seeds_in_processes(capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["sim", "sweep", "stuck-follower", "--seeds", "2", "--jobs", "2", "--set", "duration_s=25",
                  "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["seeds"] == 2 and data["failed_seeds"] == []


def test_unknown_scenario_and_bad_override_are_clear_errors() -> None:
    from insync.config import ConfigError

    with pytest.raises(ConfigError, match="unknown scenario"):
        _main(["sim", "run", "no-such-scenario"])
    with pytest.raises(ConfigError, match="unknown broker config key"):
        _main(["sim", "run", "stuck-follower", "--set", "broker.no.such.key=1"])
