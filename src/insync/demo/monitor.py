"""The live monitor beside a demo cluster (`insync monitor`'s query on the demo's own SparkSession).

One SparkSession serves both clusters (local[2]: started once, when the first cluster is up); each cluster gets
its own query, checkpoint and alerts file under its directory, started when the cluster is up and stopped before
it goes down. Its alerts show under the acts' view as they come, and are kept for the summary. pyspark is
imported only when a monitor starts: the demo runs without it (`--no-monitor`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from insync.chaos.cluster import ClusterSpec
from insync.spark.monitor.rules import Thresholds
from insync.spark.monitor.view import MonitorView

if TYPE_CHECKING:
    from insync.spark.monitor.job import Monitor

MASTER = "local[2]"
DRAIN_BATCHES = 3


class DemoMonitor:
    def __init__(self) -> None:
        self._spark: Any = None
        self._monitor: Monitor | None = None
        self.view = MonitorView()
        self.alerts: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def start(self, spec: ClusterSpec, thresholds: Thresholds) -> None:
        """Start watching `spec` (a fresh view); the previous cluster's query must have been stopped."""
        assert self._monitor is None, "stop the previous cluster's monitor first"
        from insync.spark.monitor import job

        if self._spark is None:
            from insync.spark.session import build_session

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
        self._monitor = job.Monitor(self._spark, settings, self._on_batch, self.errors.append).start()

    def _on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.alerts.extend(alerts)
        self.view.on_batch(alerts, statuses)

    def drain(self, deadline_s: float) -> None:
        """Let the query read what the cluster wrote last (a killed broker's query restarts first): wait for
        DRAIN_BATCHES more micro-batches, at most `deadline_s`."""
        target = self.view.batches + DRAIN_BATCHES
        deadline = time.monotonic() + deadline_s
        while self._monitor is not None and self.view.batches < target and time.monotonic() < deadline:
            time.sleep(0.2)  # bounded by the deadline

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None

    def close(self) -> None:
        self.stop()
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
