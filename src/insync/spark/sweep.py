"""Simulation sweeps on Spark: each (scenario, overrides, seed) is one Spark task (`insync sim sweep --spark`).

`spark_tasks(master)` is a map function for `sim.sweep.sweep`, which the CLI passes in: Spark runs whatever
function it is given, once per item, so spark/ never imports the simulator. A task runs the deterministic
simulator in the executor's Python worker and returns the run's summary dict (no event list), so a sweep over
thousands of seeds fans out over a real cluster (`--master spark://...`) as easily as over `local[*]`. The insync
package must be installed where the executors run (the data source has the same requirement).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def spark_tasks(master: str) -> Callable[[Callable[[Item], Result], list[Item]], tuple[list[Result], int]]:
    """A map function running `fn` on each item as one Spark task; it returns the results and the default
    parallelism it ran with. It uses the active session, or starts one on `master` and stops it after."""
    def map_tasks(fn: Callable[[Item], Result], items: list[Item]) -> tuple[list[Result], int]:
        from pyspark.sql import SparkSession

        from insync.spark.session import build_session

        running = SparkSession.getActiveSession()
        spark = running or build_session(master, app_name="insync-sim-sweep")
        try:
            context = spark.sparkContext
            parallelism = max(1, context.defaultParallelism)
            results = context.parallelize(items, min(len(items), parallelism * 4)).map(fn).collect()
            return list(results), parallelism
        finally:
            if running is None:  # only stop a session this sweep started
                spark.stop()

    return map_tasks
