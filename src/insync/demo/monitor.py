"""The live monitor beside a demo cluster (`insync monitor`'s query on the demo's own SparkSession).

One SparkSession serves both clusters (local[2]: started once, when the first cluster is up); each cluster gets
its own query, checkpoint and alerts file under its directory, started when the cluster is up and stopped before
it goes down. Its alerts show under the acts' view as they come, and are kept for the summary. pyspark is
imported only when a monitor starts: the demo runs without it (`--no-monitor`). Spark's own output (its JVM's
stderr, and with it the Python workers' and streaming source runner's tracebacks when a query stops mid-read)
goes to `spark_log`, not between the acts, as the clients' log lines go to clients.log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from insync.chaos.cluster import ClusterSpec
from insync.spark.monitor.rules import Thresholds
from insync.spark.monitor.view import MonitorView
from insync.waiting import WaitTimeout, wait_until

if TYPE_CHECKING:
    from insync.spark.monitor.job import Monitor

MASTER = "local[2]"
DRAIN_BATCHES = 3


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 is `path` (appended) for what starts meanwhile: a child process keeps it; this process
    gets its own stderr back at the end."""
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


class DemoMonitor:
    def __init__(self, spark_log: Path) -> None:
        self.spark_log = spark_log  # the Spark JVM's stderr
        self._spark: Any = None
        self._monitor: Monitor | None = None
        self.view = MonitorView()
        self.alerts: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._first_alert = 0  # where the current cluster's alerts begin in `alerts`

    def start(self, spec: ClusterSpec, thresholds: Thresholds) -> None:
        """Start watching `spec` (a fresh view); the previous cluster's query must have been stopped."""
        assert self._monitor is None, "stop the previous cluster's monitor first"
        from insync.spark.monitor import job

        if self._spark is None:
            from insync.spark.session import build_session

            with _stderr_to(self.spark_log):  # the JVM starts here, and keeps this stderr
                self._spark = build_session(MASTER, app_name="insync-demo-monitor", shuffle_partitions=1)
            # The query fails and restarts when the acts pause or kill a broker: that is told in the view, and
            # Spark's own ERROR lines would only scroll the acts away.
            self._spark.sparkContext.setLogLevel("FATAL")
        directory = Path(spec.directory)
        # From the topic's beginning: the cluster is new, and the first act starts while Spark is still
        # planning the query's first micro-batch.
        settings = job.MonitorSettings(spec.bootstrap, str(directory / "monitor"), thresholds, from_beginning=True,
                                       alerts_file=str(directory / "alerts.jsonl"))
        job.wait_for_events_topic(spec.bootstrap, 30.0)
        self.view = MonitorView()
        self._first_alert = len(self.alerts)
        self._monitor = job.Monitor(self._spark, settings, self._on_batch, self.errors.append).start()

    def _on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.alerts.extend(alerts)
        self.view.on_batch(alerts, statuses)

    def alerted(self, kind: str, topic: str, partition: int) -> bool:
        """Whether the current cluster's query has raised a `kind` alert about `topic`-`partition`."""
        return any(a["kind"] == kind and a["topic"] == topic and a["partition"] == partition
                   for a in self.alerts[self._first_alert:])

    def drain(self, deadline_s: float) -> None:
        """Let the query read what the cluster wrote last (a killed broker's query restarts first): wait for
        DRAIN_BATCHES more micro-batches, at most `deadline_s`."""
        target = self.view.batches + DRAIN_BATCHES
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: self._monitor is None or self.view.batches >= target, deadline_s,
                       f"{DRAIN_BATCHES} more micro-batches")

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None

    def close(self) -> None:
        self.stop()
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
