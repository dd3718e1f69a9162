"""Spare a reused PySpark worker a walk over every imported object after each of its tasks.

pyspark's daemon runs a full `gc.collect()` after every task of a reused Python worker (`pyspark/daemon.py`,
`spark.python.worker.reuse`, on by default). A full collection visits every container object in the process,
and a worker that has read a topic holds about 100k of them: pyarrow, numba, kio's protocol classes and this
package. Measured: 65-80 ms per collection; in a py-spy profile of `insync bench spark-source` the daemon's
collections were 14% of the worker's CPU, 4.6% when frozen at the start of the first task (numba compiles
the decoder, and pyarrow loads kernels, during that task), and none when frozen at its end.

`settle_after_task` therefore runs once per process, at the end of the first task that reads or writes a
topic or plans a query (`settles`): one collection, then `gc.freeze()` moves what survives (module state, which
lives as long as the process) to the permanent generation, so later collections visit only what later tasks
make. The cost: objects the first task still held when it ended are never collected if they later become cyclic
garbage. That is one task's leftovers, once per process, so it is bounded.

Planning runs in reused workers of its own (`pyspark.sql.worker.create_data_source` calls `schema()`,
`plan_data_source_read` calls `reader()` and `partitions()`, `write_into_data_source` calls `writer()`, and
`commit_data_source_write` calls `commit()` or `abort()`). They import the same modules, so the daemon's
collection after each of those calls cost the same 65-80 ms, two or three times per query: the data source's
methods that run there are wrapped in `settles`. Measured on a read of 2000 records, alternating sessions: the
query took 0.18-0.20 s (median of 20) before and 0.13-0.16 s after.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_settled = False


def settle_after_task() -> bool:
    """Collect and freeze the heap, the first time only; True if this call did it."""
    global _settled
    if _settled:
        return False
    _settled = True
    gc.collect()
    gc.freeze()
    return True


def settles(method: Callable[P, R]) -> Callable[P, R]:
    """`method`, then `settle_after_task()` once it has returned: for methods that end a planning worker's task."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        result = method(*args, **kwargs)
        settle_after_task()
        return result

    return run
