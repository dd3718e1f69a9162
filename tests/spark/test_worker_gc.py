"""`worker_gc.settle_after_task`: once per process, the heap is collected and frozen; later garbage is still
collected. Run in a fresh interpreter so the test process's own heap is left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import gc
    import weakref
    from insync.spark.source import worker_gc

    class Node:
        def __init__(self):
            self.me = self  # a reference cycle: only the cyclic collector frees it

    before = weakref.ref(Node())  # garbage before the first settle: collected, not frozen
    assert before() is not None
    assert gc.get_freeze_count() == 0
    assert worker_gc.settle_after_task() is True
    frozen = gc.get_freeze_count()
    assert frozen > 1000, frozen  # the imported modules' objects
    assert before() is None
    assert worker_gc.settle_after_task() is False
    assert gc.get_freeze_count() == frozen  # the second task froze nothing more
    after = weakref.ref(Node())
    gc.collect()
    assert after() is None  # what later tasks make is still collected
    print("ok")
""")


def test_settle_freezes_once_and_later_garbage_is_still_collected() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


PLANNING_SCRIPT = textwrap.dedent("""
    import gc
    from insync.spark.source import worker_gc
    from insync.spark.source.datasource import InsyncDataSource

    @worker_gc.settles
    def fails():
        raise ValueError("bad option")

    try:
        fails()
    except ValueError:
        pass
    assert gc.get_freeze_count() == 0  # only a method that returned settles
    source = InsyncDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"})
    assert source.schema().startswith("key binary")  # what create_data_source's worker calls
    assert gc.get_freeze_count() > 1000
    print("ok")
""")


def test_a_planning_call_settles_its_worker_once_it_returns() -> None:
    done = subprocess.run([sys.executable, "-c", PLANNING_SCRIPT], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
