"""Each scenario of kafka_log_runs on a new Kafka 4.1 (KRaft) and 3.9 (ZooKeeper) cluster, its logs analysed by
`insync analyze` and checked against what the harness did (tests/kafka_truth.py), as the fixtures of
tests/spark/test_kafka_log_truth.py are in `make test`. A failing run's logs stay in pytest's tmp_path; a passing
one can become the fixture (`python tests/kafka_ref/kafka_log_runs.py VERSION SCENARIO OUT --fixture DIR`).
`make compat-kafka-runs` runs all eight (half an hour of both cores); `make compat` runs none (since 2026-12-02, for
CI's 45 minutes): every scenario's recorded logs of both versions are analysed in `make test`, and a 3.9 and a 4.1
cluster start in make compat's other files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kafka_log_runs import SCENARIOS, VERSIONS, run

import kafka_truth
from insync.chaos import netns

ALL_RUNS = os.environ.get("INSYNC_KAFKA_RUNS") == "all"
# A mark, not a skip in the test, so that make compat starts no Spark session for them.
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(not ALL_RUNS, reason="make compat-kafka-runs runs it; its recorded logs are analysed "
                                                      "in make test (tests/spark/test_kafka_log_truth.py)")]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_a_kafka_run_is_analysed_to_its_truth(spark: Any, tmp_path: Path, version: str, scenario: str) -> None:
    if SCENARIOS[scenario].netns and netns.unavailable() is not None:
        pytest.skip(f"network namespaces: {netns.unavailable()}")
    truth = run(version, SCENARIOS[scenario], tmp_path / "logs", tmp_path / "cluster")
    found = kafka_truth.analyse(spark, tmp_path / "logs", tmp_path / "out")
    assert kafka_truth.mismatches(truth, found) == []
