"""Spare a reused PySpark worker a walk over every imported object after each of its tasks.

pyspark's daemon runs a full `gc.collect()` after every task of a reused Python worker (`pyspark/daemon.py`,
`spark.python.worker.reuse`, on by default). A full collection visits every container object in the process,
and a worker that has read a topic holds about 100k of them: pyarrow, numba, kio's protocol classes and this
package. Measured: 65-80 ms per collection; in a py-spy profile of `insync bench spark-source` the daemon's
collections were 14% of the worker's CPU, 4.6% when frozen at the start of the first task (numba compiles
the decoder, and pyarrow loads kernels, during that task), and none when frozen at its end.

`settle_after_task` therefore runs once per process, at the end of the first task that reads or writes a
topic: one collection, then `gc.freeze()` moves what survives (module state, which lives as long as the
process) to the permanent generation, so later collections visit only what later tasks make. The cost: objects
the first task still held when it ended are never collected if they later become cyclic garbage. That is one
task's leftovers, once per process, so it is bounded.
"""

from __future__ import annotations

import gc

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
