"""Parsing: every Kafka 2.x / 3.x wording of REFERENCE 10 and insync events into the one event table."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from spark_scenario import KAFKA2_LOG, KAFKA3_LOG, T1, T2

from insync.spark.analysis import logparse
from insync.spark.analysis.inputs import Inputs

# Spark on a shared two-core machine: the first analysis also pays for the JVM's warm-up.
pytestmark = pytest.mark.timeout(600)

COLUMNS = ["line", "ts_ms", "broker", "topic", "partition", "type", "leader", "leader_epoch", "isr_before",
           "isr_after", "added", "hw", "leo", "under_min_isr", "min_isr"]


@pytest.fixture(scope="module")
def parsed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    root = tmp_path_factory.mktemp("kafka")
    (root / "k3.log").write_text("\n".join(KAFKA3_LOG) + "\n")
    (root / "k2.log").write_text("\n".join(KAFKA2_LOG) + "\n")
    df = logparse.load(spark, Inputs((), (str(root / "k3.log"), str(root / "k2.log"))))
    return df.cache()


def events(parsed: DataFrame, name: str) -> list[tuple[object, ...]]:
    df = logparse.events_of(parsed).where(f"file like '%{name}'").select(*COLUMNS).orderBy("line")
    return [tuple(r) for r in df.collect()]


def test_kafka_3x_lines(parsed: DataFrame) -> None:
    assert events(parsed, "k3.log") == [
        (1, T1, 1, "logs", 0, "isr_shrink", 1, None, [1, 2, 3], [1, 3], None, 1000, 1010, None, None),
        (2, T1 + 10, 1, "logs", 0, "isr_update", 1, None, None, [1, 3], None, None, None, False, None),
        (3, T1 + 500, 1, "logs", 1, "isr_shrink", 1, None, [1, 2, 3], [1, 3], None, 20, 20, None, None),
        (4, T1 + 510, 1, "logs", 1, "isr_update", 1, None, None, [1, 3], None, None, None, True, None),
        (5, T1 + 30_000, 1, "logs", 0, "isr_update", 1, None, None, [1, 2, 3], None, None, None, False, None),
        (6, T1 + 40_000, 1, "logs", 1, "isr_update", 1, None, None, [1, 2, 3], None, None, None, False, None),
        (7, T1 + 60_000, 1, "logs", 2, "leader_change", 1, 3, None, [1, 2], None, 10, 10, False, None),
        (8, T1 + 61_000, 1, "logs", 3, "follower_start", 2, 2, None, None, None, 5, 5, None, None),
        (10, T1 + 120_000, 1, "logs", 4, "produce_rejected", None, None, None, [1], None, None, None, None, 2),
        (12, T1 + 180_000, 1, "logs", 5, "partition_failed", 3, None, None, None, None, None, None, None, None),
        (15, T1 + 300_000, 1, None, None, "broker_started", None, None, None, None, None, None, None, None, None),
    ]


def test_kafka_2x_lines(parsed: DataFrame) -> None:
    assert events(parsed, "k2.log") == [
        (1, T2, 2, "legacy", 0, "isr_shrink", 2, None, [1, 2, 3], [2], None, 100, 120, None, None),
        (2, T2 + 5, 2, "legacy", 0, "isr_update", 2, None, None, [2], None, None, None, None, None),
        (3, T2 + 2_000, 2, "legacy", 0, "isr_expand", 2, None, [2], [1, 2], [1], None, None, None, None),
        (4, T2 + 2_001, 2, "legacy", 0, "isr_update", 2, None, None, [1, 2], None, None, None, None, None),
        (5, T2 + 3_000, 2, "legacy", 0, "isr_expand", 2, None, [1, 2], [1, 2, 3], [3], None, None, None, None),
        (6, T2 + 3_001, 2, "legacy", 0, "isr_update", 2, None, None, [1, 2, 3], None, None, None, None, None),
        (7, T2 + 60_000, 2, "legacy", 1, "leader_change", 2, 7, None, [2, 3], None, 300, 300, None, None),
        (8, T2 + 61_000, 2, "legacy", 2, "leader_change", 2, 4, None, None, None, None, 50, None, None),
        (9, T2 + 62_000, 2, "legacy", 3, "follower_start", None, 5, None, None, None, 70, 70, None, None),
        (10, T2 + 120_000, 2, "legacy", 1, "isr_update", 2, None, None, [2], None, None, None, None, None),
        (11, T2 + 180_000, 2, "legacy", 1, "isr_update", 2, None, None, [2, 3], None, None, None, None, None),
    ]


def test_shrink_lines_keep_each_out_of_sync_replica(parsed: DataFrame) -> None:
    shrinks = logparse.events_of(parsed).where("type = 'isr_shrink'").orderBy("ts_ms").select("removed").collect()
    assert [[tuple(r) for r in row[0]] for row in shrinks] == [
        [(1, 90, None, None, None, None, None), (3, 80, None, None, None, None, None)],
        [(2, 950, 1_709_294_370_000, None, None, None, None)],
        [(2, None, None, None, None, None, None)],
    ]


def test_log_timezone_turns_local_log4j_times_into_utc(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(KAFKA3_LOG[0] + "\n")
    berlin = logparse.load(spark, Inputs((), (str(log),)), log_timezone="Europe/Berlin")
    assert [r[0] for r in berlin.select("ts_ms").collect()] == [T1 - 3_600_000]  # CET is UTC+1 in March


def test_insync_lines_validate_like_events(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([
        '{"v":1,"ts_ms":5,"broker":1,"type":"partition_failed","topic":"t","partition":0,"leader":2,"error":"X"}',
        '{"v":1,"ts_ms":5,"broker":1,"type":"partition_failed","topic":"t","leader":2,"error":"X"}',
        '{"v":1,"ts_ms":5,"broker":1,"type":"no_such_type","topic":"t","partition":0}',
        '{"v":1,"ts_ms":-1,"broker":1,"type":"partition_offline","topic":"t","partition":0}',
        '{"v":1,"ts_ms":5,"broker":1,"type":"broker_fenced","broker_id":3}',
        '{"v":1,"ts_ms":"5","broker":1,"type":"partition_offline","topic":"t","partition":0}',
        # Fields only rarer types require are parsed from those lines alone: checked there, ignored elsewhere.
        '{"v":1,"ts_ms":5,"broker":1,"type":"broker_fenced"}',
        '{"v":1,"ts_ms":5,"broker":1,"type":"broker_fenced","broker_id":"3"}',
        '{"v":1,"ts_ms":5,"broker":1,"type":"partition_offline","topic":"t","partition":0,"broker_id":"3"}',
    ]) + "\n")
    parsed = logparse.load(spark, Inputs((str(log),), ()))
    got = sorted((r["line"], r["type"], r["leader"], r["detail"], r["reason"]) for r in parsed.collect())
    assert got == [
        (1, "partition_failed", 2, "X", None),
        (2, "partition_failed", 2, "X", "missing topic or partition"),
        (3, "no_such_type", None, None, "unknown event type"),
        (4, "partition_offline", None, None, "missing or invalid ts_ms"),
        (5, "broker_fenced", None, None, None),
        (6, "partition_offline", None, None, "not a JSON object of the event schema"),
        (7, "broker_fenced", None, None, "broker_fenced lacks one of broker_id"),
        (8, "broker_fenced", None, None, "not a JSON object of the event schema"),
        (9, "partition_offline", None, None, None),
    ]


def test_line_numbers_count_across_the_splits_of_a_file(spark: SparkSession, tmp_path: Path) -> None:
    """A file Spark reads in several splits (here 4 KiB each) is numbered from its first line, in order."""
    lines = [f"line {i:05d} " + "x" * 40 for i in range(1, 2_001)]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "b.log").write_text("\n".join(lines[:700]) + "\n")
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        read = logparse.read_lines(spark, [str(tmp_path / "a.log"), str(tmp_path / "b.log")])
        assert read.rdd.getNumPartitions() > 20
        got = [(Path(r["file"]).name, r["line"], r["text"]) for r in read.collect()]
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    expected = [("a.log", n, text) for n, text in enumerate(lines, 1)]
    expected += [("b.log", n, text) for n, text in enumerate(lines[:700], 1)]
    assert sorted(got) == expected
