"""The clock-step library on a real Python process: its wall clock follows the step file while it runs, its
monotonic clock and its sleeps do not."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from insync.chaos import clock_step

pytestmark = pytest.mark.timeout(60)

if clock_step.unavailable() is not None:
    pytest.skip(str(clock_step.unavailable()), allow_module_level=True)

# Prints its wall clock's lead over the harness's (sent on stdin) and how long a 0.2 s sleep took, twice a step.
CHILD = """
import sys, time
for line in sys.stdin:
    start = time.monotonic()
    time.sleep(0.2)
    print(round((time.time() - float(line)) / 60), round(time.monotonic() - start, 1), flush=True)
"""


def test_a_step_moves_the_wall_clock_and_nothing_else(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=clock_step.environment(tmp_path), text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    seen = []
    try:
        for offset_ms in (0, 5 * 60_000, -5 * 60_000, 0):
            clock_step.step(tmp_path, offset_ms)
            time.sleep(0.1)  # past the library's re-read interval
            child.stdin.write(f"{time.time()}\n")
            child.stdin.flush()
            seen.append(child.stdout.readline().split())
    finally:
        child.stdin.close()
        child.wait(10)
    assert seen == [["0", "0.2"], ["5", "0.2"], ["-5", "0.2"], ["0", "0.2"]]
