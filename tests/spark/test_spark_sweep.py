"""`insync sim sweep --spark`: each seed is a Spark task, and the results equal the local runs (determinism)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from insync.sim.sweep import local_processes, run_one, sweep
from insync.spark.sweep import spark_tasks

TIMING_FIELDS = ("wall_s", "cpu_s", "speedup")


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in TIMING_FIELDS}


def test_spark_sweep_runs_every_seed_like_the_local_sweep(spark: SparkSession) -> None:
    seeds = [3, 4, 5]
    summary = sweep("stuck-follower", {}, seeds, spark_tasks("local[2]"))
    assert summary.seeds == 3 and not summary.failures and summary.lost_acked == 0
    local = sweep("stuck-follower", {}, seeds, local_processes(1))
    assert (summary.virtual_s, summary.isr_shrinks) == (local.virtual_s, local.isr_shrinks)

    on_spark, _ = spark_tasks("local[2]")(run_one, [("stuck-follower", {}, 4)])
    assert comparable(on_spark[0]) == comparable(run_one(("stuck-follower", {}, 4)))
