"""Stepping one node's wall clock while it runs: the `clock-step` fault, on insync's and on Kafka's nodes alike.

A node started with `environment(directory)` has `tools/clock-step/clock_step.c` preloaded (C, so outside the
package with the other tools that are not Python: the fault needs a source checkout): its CLOCK_REALTIME reads
(Python's `time.time`, the JVM's `System.currentTimeMillis`) are offset by the milliseconds in `DIR/clock-step-ms`, which
`step` rewrites while the node runs; its monotonic clock is left alone, as a real step (an operator's `date -s`,
NTP correcting a bad clock) leaves it. The library is built once with the C compiler into a cache outside the
repository. Why not the usual tools: a time namespace offsets only CLOCK_MONOTONIC and CLOCK_BOOTTIME, never the
wall clock; Debian's libfaketime (0.9.10) with the monotonic clock excluded breaks Python 3.11's `time.sleep`
(EINVAL from its CLOCK_MONOTONIC absolute-deadline `clock_nanosleep`, fixed upstream after that release) and
hangs librdkafka's timed waits, which both run inside an insync broker.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from insync.config import ConfigError

SOURCE = Path(__file__).resolve().parents[3] / "tools" / "clock-step" / "clock_step.c"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "insync" / "clock-step"
STEP_FILE = "clock-step-ms"
ENV_FILE = "INSYNC_CLOCK_STEP_FILE"  # the name clock_step.c reads
BUILD_TIMEOUT_S = 60.0


def unavailable() -> str | None:
    """Why the library cannot be built here, or None."""
    if not SOURCE.is_file():
        return f"the clock-step library's source is not at {SOURCE}: the fault needs insync's source checkout"
    if shutil.which("cc") is None:
        return "no C compiler (cc) to build the clock-step library: `make setup` installs gcc"
    return None


def library() -> Path:
    """The preload library, built on first use; named by its source's hash, so an edited source is rebuilt."""
    if not SOURCE.is_file():
        raise ConfigError(str(unavailable()))
    source = SOURCE.read_bytes()
    target = CACHE / f"clock_step-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if target.exists():
        return target
    reason = unavailable()
    if reason is not None:
        raise ConfigError(reason)
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    built = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(partial), str(SOURCE), "-ldl"],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    if built.returncode != 0:
        raise ConfigError(f"building {SOURCE.name} failed: {built.stderr.strip()}")
    partial.replace(target)  # atomic: a concurrent build of the same source writes the same bytes
    return target


def environment(directory: str | Path) -> dict[str, str]:
    """The environment of a node whose wall clock `step` can move; it starts at the true time."""
    path = Path(directory) / STEP_FILE
    if not path.exists():
        step(directory, 0)
    preload = " ".join(p for p in (str(library()), os.environ.get("LD_PRELOAD", "")) if p)
    return {**os.environ, "LD_PRELOAD": preload, ENV_FILE: str(path)}


def step(directory: str | Path, offset_ms: int) -> None:
    """Set a node's wall clock `offset_ms` from the true time (0 puts it back); the node sees it within 50 ms."""
    path = Path(directory) / STEP_FILE
    partial = path.with_suffix(".tmp")
    partial.write_text(f"{offset_ms}\n")
    partial.replace(path)  # a reader sees the old offset or the new one, never half of it

