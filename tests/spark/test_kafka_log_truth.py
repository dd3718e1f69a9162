"""`insync analyze` on the logs real Kafka left, with the truth known (issue 34 section 2): one run per scenario and
version (tests/spark/fixtures/kafka-runs/VERSION/SCENARIO: each node's server.log, state-change.log and
controller.log, trimmed by tests/kafka_ref/kafka_log_runs.py, and truth.json), each checked against what the
harness did (tests/kafka_truth.py): the fault's cause, broker and partitions, its leader changes, its outages, a
controlled shutdown shown apart, and nothing the run did not make. The runs are analysed together, as one cluster's
history (each has its own topic, and its own minutes): one Spark job, not eight. `make compat` makes new runs and
checks each alone the same way (tests/kafka_ref/test_kafka_log_truth_live.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import kafka_truth

# In make test-slow: make test must stay under 12 minutes on two cores, and these two are its largest Spark jobs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-runs"
RUNS = sorted(str(p.parent.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*/truth.json"))


def test_every_scenario_has_a_run_on_kafka_4_1_and_3_9() -> None:
    scenarios = ["controlled-shutdown", "killed-leader", "paused-follower", "slow-follower"]
    assert [f"{version}/{scenario}" for version in ("3.9", "4.1") for scenario in scenarios] == RUNS


def test_each_run_is_what_its_directory_says() -> None:
    for run in RUNS:
        truth = kafka_truth.load_truth(FIXTURES / run)
        assert f'{truth["version"]}/{truth["scenario"]["name"]}' == run
        assert truth["mode"] == ("kraft" if truth["version"] == "4.1" else "zookeeper")
        assert sum(f.stat().st_size for f in (FIXTURES / run).rglob("*.log")) < 100_000, run  # trimmed


@pytest.fixture(scope="module")
def found(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return kafka_truth.analyse(spark, FIXTURES, tmp_path_factory.mktemp("out"))


@pytest.mark.parametrize("run", RUNS)
def test_the_analysis_tells_the_truth_of_the_run(found: dict[str, list[dict[str, Any]]], run: str) -> None:
    assert kafka_truth.mismatches(kafka_truth.load_truth(FIXTURES / run), found) == []
