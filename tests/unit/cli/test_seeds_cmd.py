"""`insync chaos seeds`: one engine's failed run costs its row only (cli/seeds_cmd.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from insync.chaos import kafka_cluster, seeds, seeds_run
from insync.chaos.seed_model import SeedRun
from insync.cli import seeds_cmd
from insync.config import ConfigError


def test_a_failed_or_refused_run_is_named_and_the_other_engines_rows_stand(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seed = seeds.seed_named("stuck-follower")
    good = SeedRun("real", seed.lag_ms, (), 10, 0, 0, 0, 0.0, 0.0, 0.0)

    def run_real(_seed: object, _where: Path, engine: str) -> SeedRun:
        if engine == "kafka:4.1.2":
            raise TimeoutError()
        if engine == "kafka:3.9.1":
            raise ConfigError("log.segment.bytes too small")
        return good

    monkeypatch.setattr(seeds_run, "run_real", run_real)
    # No Kafka jars needed: the engines' releases are not looked at beyond their mode.
    monkeypatch.setattr(kafka_cluster, "dist_for", lambda engine: SimpleNamespace(kraft_only=engine >= "kafka:4"))
    failed: list[str] = []
    runs = seeds_cmd._real_runs(seed, ["kafka:4.1.2", "kafka:3.9.1", "insync"], tmp_path, failed)
    assert runs == [good]
    assert failed == ["stuck-follower on kafka:4.1.2"]  # a refused setting is no failure: the engine cannot
    err = capsys.readouterr().err
    assert "the run on kafka:4.1.2 failed: TimeoutError" in err
    assert "no run on kafka:3.9.1, log.segment.bytes too small" in err
