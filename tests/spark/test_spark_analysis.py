"""The whole analysis over the scenario's logs (insync events and Kafka 2.x / 3.x lines), asserted table by table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from spark_scenario import HORIZON, T0, T1, T2, write

from insync.spark.analysis import health, job
from insync.spark.analysis.inputs import discover

# Spark on a shared two-core machine: the first analysis also pays for the JVM's warm-up.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def out(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = write(tmp_path_factory.mktemp("logs"))
    out_dir = tmp_path_factory.mktemp("out")
    job.run(spark, discover([str(logs)]), str(out_dir), health.AnalysisOptions(flap_window_ms=60_000))
    return out_dir


def rows(spark: SparkSession, out: Path, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(str(out / table)).select(*columns)
    return sorted(tuple(r) for r in df.collect())


def test_summary_json_has_exactly_the_headline_counts(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    assert summary == {
        "events": 42, "malformed_lines": 6, "ignored_lines": 1, "isr_shrinks": 11, "isr_expands": 11, "flapping_episodes": 11,
        "urp_intervals": 10, "under_min_isr_intervals": 2, "offline_intervals": 1, "open_at_end_of_log_intervals": 2,
        "shutdown_intervals": 0,
        "episodes_by_cause": {"follower": 2, "leader": 1, "failed": 0, "burst": 2, "stuck": 0, "slow": 1,
                              "unknown": 1},
        "partitions": 16, "denied_requests": 1,
    }
    assert list(summary) == list(job.SUMMARY_KEYS)


def test_intervals_per_partition_and_kind(spark: SparkSession, out: Path) -> None:
    assert rows(spark, out, "intervals", ["topic", "partition", "kind", "start_ms", "end_ms", "open_ended"]) == [
        ("legacy", 0, "under_replicated", T2, T2 + 3_000, False),
        ("legacy", 1, "under_replicated", T2 + 120_000, T2 + 180_000, False),
        ("logs", 0, "under_replicated", T1, T1 + 30_000, False),
        ("logs", 1, "under_min_isr", T1 + 510, T1 + 40_000, False),
        ("logs", 1, "under_replicated", T1 + 500, T1 + 40_000, False),
        ("logs", 4, "under_min_isr", T1 + 120_000, HORIZON, True),
        ("orders", 0, "under_replicated", T0, T0 + 90_000, False),
        ("orders", 1, "under_replicated", T0 + 1_000, T0 + 95_000, False),
        ("orders", 2, "under_min_isr", T0 + 200_000, T0 + 230_000, False),
        ("orders", 2, "under_replicated", T0 + 200_000, T0 + 230_000, False),
        ("orders", 3, "under_replicated", T0 + 201_000, T0 + 231_000, False),
        ("payments", 0, "offline", T0 + 500_000, T0 + 520_000, False),
        ("payments", 0, "under_replicated", T0 + 2_000, T0 + 520_000, True),  # broker 1's log ends there
        ("payments", 1, "under_replicated", T0 + 400_000, T0 + 401_500, False),
        ("payments", 1, "under_replicated", T0 + 600_000, T0 + 700_000, False),
    ]
    durations = spark.read.parquet(str(out / "intervals")).where("duration_ms != end_ms - start_ms").count()
    assert durations == 0


def test_episodes_get_their_causes(spark: SparkSession, out: Path) -> None:
    columns = ["episode", "cause", "partitions", "removals", "removed_brokers", "leaders", "not_back", "max_out_ms",
               "open_ended"]
    assert rows(spark, out, "episodes", columns) == [
        (1, "burst", 1, 2, [1, 3], [2], 0, 3_000, False),
        (2, "unknown", 1, 1, [3], [2], 0, 60_000, False),
        (3, "follower", 3, 3, [3], [1, 2], 1, 94_000, True),
        (4, "leader", 2, 4, [1, 3, 4], [2], 0, 30_000, False),
        (5, "burst", 1, 2, [2, 3], [4], 0, 1_500, False),
        (6, "slow", 1, 1, [2], [4], 0, 100_000, False),
        (7, "follower", 2, 2, [2], [1], 0, 39_500, False),
    ]
    times = spark.read.parquet(str(out / "episodes")).selectExpr(
        "episode", "unix_millis(start)", "unix_millis(end)").collect()
    assert sorted(tuple(r) for r in times) == [
        (1, T2, T2 + 3_000), (2, T2 + 120_000, T2 + 180_000), (3, T0, T0 + 520_000), (4, T0 + 200_000, T0 + 231_000),
        (5, T0 + 400_000, T0 + 401_500), (6, T0 + 600_000, T0 + 700_000), (7, T1, T1 + 40_000)]
    evidence = dict(rows(spark, out, "episodes", ["episode", "evidence"]))
    assert evidence[3] == "broker 3 removed from 3 partitions (leaders 1,2) within 2.0 s"
    assert evidence[4] == ("every follower (1,3,4) of 2 partitions led by broker 2 removed within 1.0 s, none of them "
                           "removed by another leader")


def test_flapping_episodes_are_removals_back_within_the_window(spark: SparkSession, out: Path) -> None:
    flaps = rows(spark, out, "flapping_episodes", ["topic", "partition", "replica", "out_ms"])
    assert flaps == [
        ("legacy", 0, 1, 2_000), ("legacy", 0, 3, 3_000), ("legacy", 1, 3, 60_000),
        ("logs", 0, 2, 30_000), ("logs", 1, 2, 39_500),
        ("orders", 2, 1, 30_000), ("orders", 2, 3, 30_000), ("orders", 3, 3, 30_000), ("orders", 3, 4, 30_000),
        ("payments", 1, 2, 1_500), ("payments", 1, 3, 1_500),
    ]


def test_isr_changes_collapse_commit_lines_and_keep_reasons(spark: SparkSession, out: Path) -> None:
    changes = rows(spark, out, "isr_changes", ["topic", "partition", "ts_ms", "change", "logged_as", "isr_before",
                                               "isr_after", "added"])
    legacy = [c for c in changes if c[0] == "legacy"]
    assert legacy == [
        ("legacy", 0, T2, "shrink", "isr_shrink", [1, 2, 3], [2], []),
        ("legacy", 0, T2 + 2_000, "expand", "isr_expand", [2], [1, 2], [1]),
        ("legacy", 0, T2 + 3_000, "expand", "isr_expand", [1, 2], [1, 2, 3], [3]),
        ("legacy", 1, T2 + 120_000, "shrink", "isr_update", [2, 3], [2], []),
        ("legacy", 1, T2 + 180_000, "expand", "isr_update", [2], [2, 3], [3]),
    ]
    assert len(changes) == 22
    removed = spark.read.parquet(str(out / "isr_changes")).where("topic = 'logs' and change = 'shrink'") \
        .orderBy("partition").select("removed").collect()
    assert [[tuple(r) for r in row[0]] for row in removed] == [
        [(2, 950, 1_709_294_370_000, None, None, None, None)], [(2, None, None, None, None, None, None)]]
    stuck = spark.read.parquet(str(out / "isr_changes")).where("topic = 'orders' and partition = 0 and "
                                                               "change = 'shrink'").select("removed").first()
    assert stuck is not None and [r["reason"] for r in stuck[0]] == ["stuck"]


def test_per_broker_counts(spark: SparkSession, out: Path) -> None:
    columns = ["broker", "times_removed", "partitions_removed_from", "times_leader_of_removal", "follower_episodes",
               "leader_episodes", "flaps", "removed_stuck", "removed_slow", "removed_by_messages",
               "partitions_failed", "events_reported"]
    assert rows(spark, out, "per_broker", columns) == [
        (1, 2, 2, 4, 0, 0, 2, 0, 1, 0, 1, 16),
        (2, 4, 3, 8, 1, 1, 3, 0, 1, 1, 0, 20),
        (3, 8, 8, 0, 1, 0, 5, 3, 2, 1, 0, 0),
        (4, 1, 1, 3, 0, 0, 1, 0, 1, 0, 0, 6),  # its denied event counts as reported
    ]


def test_malformed_lines_are_counted_with_examples(spark: SparkSession, out: Path) -> None:
    malformed = rows(spark, out, "malformed", ["source", "file", "line", "reason"])
    assert [(source, Path(file).parent.name, line, reason) for source, file, line, reason in malformed] == [
        ("insync", "broker-1", 4, "not a JSON object of the event schema"),
        ("insync", "broker-1", 6, "isr_shrink lacks one of isr_before, isr_after, removed, leader_epoch, hw, leo"),
        ("insync", "broker-2", 9, "schema version is not one of 1, 2"),
        ("kafka", "kafka2", 12, "unrecognised isr_expand line"),
        ("kafka", "kafka3", 13, "unrecognised isr_shrink line"),
        ("kafka", "kafka3", 14, "unparseable log4j prefix"),
    ]


def test_report_is_self_contained_html_with_plots_and_recommendations(out: Path) -> None:
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 3
    for needle in ("Recommendations", "follower.fetch.pending.reads.insync.enable=true",
                   "replica.lag.max.messages=0", "Look at broker(s) 2, 3", "Malformed lines",
                   "unparseable log4j prefix", "All times are UTC", "2019-06-01 00:00:00.000Z"):
        assert needle in html, needle
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_logs_with_only_malformed_lines_give_an_empty_analysis(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "events.jsonl").write_text("garbage\n{\"v\":1}\n")
    summary = job.run(spark, discover([str(tmp_path / "logs")]), str(tmp_path / "out"), health.AnalysisOptions())
    assert summary["events"] == 0 and summary["malformed_lines"] == 2 and summary["partitions"] == 0
    assert "No ISR churn" in (tmp_path / "out" / "report.html").read_text()
