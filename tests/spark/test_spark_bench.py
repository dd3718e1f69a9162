"""The benchmark's generator writes well-formed logs of the asked size, in the layout `discover` expects."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from insync.spark.analysis import bench, logparse
from insync.spark.analysis.inputs import discover

# Spark on a shared two-core machine: the first analysis also pays for the JVM's warm-up.
pytestmark = pytest.mark.timeout(600)


def test_generated_logs_parse_without_malformed_lines(spark: SparkSession, tmp_path: Path) -> None:
    bench.generate(spark, str(tmp_path), 6_000)
    found = discover([str(tmp_path)])
    assert found.event_logs and found.kafka_logs
    counts = {row["type"]: row["count"] for row in logparse.load(spark, found).groupBy("type").count().collect()}
    # 4,800 insync events over 4 partitions (shrink, expand alternately), 1,200 Kafka lines (shrink, commit).
    assert counts == {"isr_shrink": 2_400 + 600, "isr_expand": 2_400, "isr_update": 600}
    bench.generate(spark, str(tmp_path), 6_000)  # already there: kept
    assert discover([str(tmp_path)]) == found


def test_growth_compares_time_with_size() -> None:
    small = bench.BenchResult(1_000_000, 1_000_000, 0, 20.0, 50_000.0)
    large = bench.BenchResult(10_000_000, 10_000_000, 0, 150.0, 66_666.7)
    assert bench.growth([small, large]) == {"size_ratio": 10.0, "time_ratio": 7.5}
    assert "growth: 10.0x events took 7.5x the time" in bench.describe([small, large])
    assert bench.growth([small]) is None
