"""Spare a reused PySpark worker a walk over every imported object after each of its tasks.

pyspark's daemon runs a full `gc.collect()` after every task of a reused Python worker (`pyspark/daemon.py`,
`spark.python.worker.reuse`, on by default). A full collection visits every container object in the process,
and a worker that has read a topic holds about 100k of them (pyarrow, numba, kio, this package), so those
collections are a large share of the worker's CPU. `settle_after_task` therefore runs once per process, at the
end of the first task that reads or writes a topic or plans a query (`settles`): one collection, then
`gc.freeze()` moves what survives (module state) to the permanent generation, so later collections visit only
what later tasks make; at the first task's end, since numba compiles and pyarrow loads kernels during it. The
cost, bounded: what the first task still held is never collected if it later becomes cyclic garbage. Planning
runs in reused workers of its own (`create_data_source`, `plan_data_source_read`, `write_into_data_source`,
`commit_data_source_write`), which import the same modules, so the data source's methods run there are wrapped
in `settles` too.
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
