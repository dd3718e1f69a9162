"""Each scenario of kafka_log_runs on a new Kafka 4.1 (KRaft) and 3.9 (ZooKeeper) cluster, its logs analysed by
`insync analyze` and checked against what the harness did (tests/kafka_truth.py), as the fixtures of
tests/spark/test_kafka_log_truth.py are in `make test`. A failing run's logs stay in pytest's tmp_path; a passing
one can become the fixture (`python tests/kafka_ref/kafka_log_runs.py VERSION SCENARIO OUT --fixture DIR`).
`make compat` runs one scenario of 4.1 (`COMPAT_RUNS`: the eight take half an hour of both cores, over CI's budget,
and every scenario's recorded logs of both versions are analysed in `make test`; a 3.9 cluster starts in make
compat's test_kafka_engine.py); `make compat-kafka-runs` runs all eight.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kafka_log_runs import SCENARIOS, VERSIONS, run

import kafka_truth
from insync.chaos import netns

pytestmark = pytest.mark.timeout(900)
COMPAT_RUNS = {("4.1", "killed-leader")}
ALL_RUNS = os.environ.get("INSYNC_KAFKA_RUNS") == "all"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_a_kafka_run_is_analysed_to_its_truth(spark: Any, tmp_path: Path, version: str, scenario: str) -> None:
    if not ALL_RUNS and (version, scenario) not in COMPAT_RUNS:
        pytest.skip("one live run in make compat; its recorded logs are analysed in make test "
                    "(tests/spark/test_kafka_log_truth.py); make compat-kafka-runs runs it")
    if SCENARIOS[scenario].netns and netns.unavailable() is not None:
        pytest.skip(f"network namespaces: {netns.unavailable()}")
    truth = run(version, SCENARIOS[scenario], tmp_path / "logs", tmp_path / "cluster")
    found = kafka_truth.analyse(spark, tmp_path / "logs", tmp_path / "out")
    assert kafka_truth.mismatches(truth, found) == []
