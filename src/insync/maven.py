"""Maven, for the jars insync fetches only when asked: Apache Kafka releases (chaos/kafka_dist.py) and Spark's own
Kafka connector (spark/connector_jars.py). Each goes to its own folder of one cache outside any repository, and
each run of `mvn` is bounded in time and fails naming what it was fetching."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from insync.config import ConfigError

MVN_TIMEOUT_S = 900.0
ERROR_TAIL_LINES = 15


class MavenError(ConfigError):
    """No `mvn`, or it failed or ran out of time; the message names what it was fetching and Maven's last lines."""


def cache_root() -> Path:
    """`$INSYNC_CACHE`, by default `~/.cache/insync`."""
    return Path(os.environ.get("INSYNC_CACHE") or Path.home() / ".cache" / "insync")


def run(cwd: Path, goals: list[str], what: str, timeout_s: float = MVN_TIMEOUT_S) -> None:
    """`mvn -q -B <goals>` in `cwd` (where the pom is), within `timeout_s`."""
    assert goals and timeout_s > 0, (goals, timeout_s)
    if shutil.which("mvn") is None:
        raise MavenError(f"cannot fetch {what}: no mvn on PATH (apt-get install maven)")
    try:
        done = subprocess.run(["mvn", "-q", "-B", *goals], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise MavenError(f"Maven did not fetch {what} within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-ERROR_TAIL_LINES:])
        raise MavenError(f"Maven could not fetch {what} (exit {done.returncode}):\n{tail}")
