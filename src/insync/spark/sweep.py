"""Simulation sweeps on Spark: each (scenario, overrides, seed) is one Spark task (`insync sim sweep --spark`).

A task runs the deterministic simulator in the executor's Python worker and returns the run's summary dict
(no event list), so a sweep over thousands of seeds fans out over a real cluster (`--master spark://...`) as
easily as over `local[*]`. The insync package must be installed where the executors run (the data source
has the same requirement).
"""

from __future__ import annotations

from typing import Any

from insync.sim.sweep import run_one


def run_on_spark(work: list[tuple[str, dict[str, str], int]], master: str) -> tuple[list[dict[str, Any]], int]:
    """The summaries of every job, and the default parallelism the sweep ran with."""
    from pyspark.sql import SparkSession

    from insync.spark.session import build_session

    running = SparkSession.getActiveSession()
    spark = running or build_session(master, app_name="insync-sim-sweep")
    try:
        context = spark.sparkContext
        parallelism = max(1, context.defaultParallelism)
        results = context.parallelize(work, min(len(work), parallelism * 4)).map(run_one).collect()
        return list(results), parallelism
    finally:
        if running is None:  # only stop a session this sweep started
            spark.stop()
