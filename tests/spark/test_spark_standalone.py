"""`insync analyze --master spark://...` on a real Spark standalone cluster (a master and two one-core workers,
processes of their own: standalone_spark.py) against `--master local[*]` on the same logs: insync events.jsonl and
Kafka 2.x / 3.x server.log lines with a known truth (spark_scenario.py), and the logs real Kafka 3.9 and 4.1 left
(fixtures/kafka-runs). Both runs are the command itself, each in its own process, from the same directory with
relative paths (an executor's working directory is its own, so a relative path must be resolved by the driver).
Every table, summary.json, report.html and the printed summary must be the same; the one line that differs is the
printed path of the report, which names each run's --out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import spark_scenario
import standalone_spark

# Two Spark drivers, a master and two workers with an executor each: minutes of both cores.
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

KAFKA_RUNS = Path(__file__).parent / "fixtures" / "kafka-runs"
TABLES = ("events", "malformed", "isr_changes", "intervals", "flapping_episodes", "episodes", "per_broker",
          "data_at_risk")
ANALYZE_TIMEOUT_S = 360.0
APP_NAME = "insync-analyze"
# Other than local[*]'s, so rows are split differently (what found the results that hung on Spark's row order), and
# fewer than Spark's 200, which would take the cluster run minutes more of CI's two cores.
CLUSTER_SHUFFLE = "spark.sql.shuffle.partitions=24"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The analysis's outputs on both masters, in one directory: out-local/ and out-cluster/, with what each run
    printed, and the cluster master's state after its run."""
    work = tmp_path_factory.mktemp("analyze")
    spark_scenario.write(work / "scenario")
    inputs = ["scenario", str(KAFKA_RUNS)]
    with standalone_spark.running(tmp_path_factory.mktemp("standalone")) as cluster, ThreadPoolExecutor(2) as pool:
        # Both at once: most of each run is a JVM starting and Spark's scheduling, which overlap well.
        runs = {"local": pool.submit(standalone_spark.analyze, [*inputs, "--out", "out-local", "--master", "local[*]"],
                                     work, "local", ANALYZE_TIMEOUT_S),
                "cluster": pool.submit(standalone_spark.analyze, [*inputs, "--out", "out-cluster", "--master",
                                                                  cluster.master_url, "--conf", CLUSTER_SHUFFLE],
                                       work, "cluster", ANALYZE_TIMEOUT_S)}
        printed = {master: run.result() for master, run in runs.items()}
        yield work, {"printed": printed, "master": standalone_spark.master_state(cluster.ui_url)}


def rows(table: Path) -> list[str]:
    """A parquet table's rows, each as text, in sorted order: the files' order and count may differ by master."""
    return sorted(repr(row) for row in pq.read_table(table).to_pylist())


def test_the_analysis_ran_on_the_clusters_executors(runs: tuple[Path, dict[str, Any]]) -> None:
    _, seen = runs
    apps = [app for app in seen["master"]["completedapps"] if app["name"] == APP_NAME]
    assert len(apps) == 1, seen["master"]["completedapps"]
    assert apps[0]["cores"] == 2  # workers of one core each: an executor on each


@pytest.mark.parametrize("table", TABLES)
def test_each_table_is_the_same_on_both_masters(runs: tuple[Path, dict[str, Any]], table: str) -> None:
    work, _ = runs
    local, cluster = rows(work / "out-local" / table), rows(work / "out-cluster" / table)
    assert local, f"{table}: empty, so the comparison would prove nothing"
    assert cluster == local


def test_the_summary_and_the_report_are_the_same_on_both_masters(runs: tuple[Path, dict[str, Any]]) -> None:
    work, seen = runs
    local, cluster = work / "out-local", work / "out-cluster"
    summary = json.loads((local / "summary.json").read_text())
    assert summary["events"] > 0 and sum(summary["episodes_by_cause"].values()) > 0
    assert json.loads((cluster / "summary.json").read_text()) == summary
    assert (cluster / "report.html").read_text() == (local / "report.html").read_text()
    # What the command prints: the summary, then where the report is, which names each run's --out.
    printed = {master: text.replace(f"out-{master}/report.html", "OUT/report.html")
               for master, text in seen["printed"].items()}
    assert printed["cluster"] == printed["local"]
    assert "OUT/report.html" in printed["local"]
