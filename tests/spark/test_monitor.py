"""`insync monitor` on a live cluster: alerts for a paused follower and for a slow leader (KIP-501 off), none
repeated after a restart from the checkpoint, none for a clean `cluster down`.

One cluster and the suite's SparkSession for the module; the delays from each condition to its alert are printed
(README figures), never asserted."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, script
from insync.chaos.script import Step
from insync.spark.monitor import job
from insync.spark.monitor.rules import Thresholds

pytestmark = pytest.mark.timeout(480)

TIMING = ["insync.events.topic.enable=true", "fault.injection.enable=true", "replica.lag.time.max.ms=1500",
          "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500", "replica.fetch.backoff.ms=200",
          "isr.change.propagation.check.interval.ms=250", "isr.change.propagation.blackout.ms=500"]
THRESHOLDS = Thresholds(urp_ms=2000, min_isr_ms=2000, offline_ms=2000, risk_ms=2000)


def wait_until(predicate: Any, timeout_s: float, what: str | Any) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what if isinstance(what, str) else what()}")
        time.sleep(0.25)


class Monitor:
    """The monitor on the test's session (restarting when a paused broker fails its query), alerts gathered."""

    def __init__(self, spark: SparkSession, settings: job.MonitorSettings) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.batches = 0
        self.errors: list[str] = []
        self.monitor = job.Monitor(spark, settings, self._on_batch, self.errors.append).start()

    def _on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.alerts.extend(alerts)
        self.batches += 1

    def named(self, kind: str, topic: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts if a["kind"] == kind and a["topic"] == topic and a["partition"] == 0]

    def progress(self) -> str:
        """The last micro-batches' durations and the restarts, for a failure's message."""
        query = self.monitor.query
        recent = query.recentProgress[-5:] if query is not None else []
        return "; ".join([f"batch {p['batchId']}: {p['batchDuration']} ms, {p['numInputRows']} rows" for p in recent]
                         + self.errors[-3:])

    def stop(self) -> None:
        self.monitor.stop()


class Load:
    """acks=1 records to every partition of the test topics, so the leaders have reads to serve."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "log_level": 0})
        self._topics, self._stop = topics, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for topic in self._topics:
                for partition in range(2):
                    with contextlib.suppress(BufferError):
                        self._producer.produce(topic, b"x" * 100, partition=partition)
            self._producer.poll(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    started = cluster.up(str(tmp_path_factory.mktemp("monitor")), 3, 0, TIMING)
    try:
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(started.directory), 10.0)


def _roles(spec: cluster.ClusterSpec, topic: str) -> tuple[int, list[int]]:
    row = next(r for r in describe_rows(spec.bootstrap, [topic]) if r.partition == 0)
    return row.leader, [b for b in row.replicas if b != row.leader]


def _delays(alerts: list[dict[str, Any]]) -> str:
    return ", ".join(f"{a['kind']} {a['topic']}-{a['partition']} {(a['emitted_ms'] - a['due_ms']) / 1000:.1f} s"
                     for a in alerts)


# Known defects, issue 21 still open: in the lead's full runs on 2026-11-24 this failed twice, once with the
# restarted monitor repeating the last alerts written before the stop (its checkpoint did not yet hold them), once
# with the source's micro-batches failing (planPartitions) while the paused broker led a partition of
# __insync_events. It passed in the helper's run. Not strict, so a pass is reported as XPASS, not hidden.
@pytest.mark.xfail(reason="monitor restart may repeat alerts; source stalls on a paused events leader (issue 21)",
                   strict=False)
def test_alerts_for_a_paused_follower_and_a_slow_leader_once_each_and_none_for_a_clean_shutdown(
        spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    for topic in ("paused", "slow"):
        ensure_topic(spec.bootstrap, topic, 2, 3, {"min.insync.replicas": "2"})
    settings = job.MonitorSettings(spec.bootstrap, str(tmp_path / "checkpoint"), THRESHOLDS,
                                   alerts_file=str(tmp_path / "alerts.jsonl"))
    job.wait_for_events_topic(spec.bootstrap, 20)
    load = Load(spec.bootstrap, ["paused", "slow"])
    monitor = Monitor(spark, settings)
    try:
        wait_until(lambda: monitor.batches >= 2, 120, "the monitor's first micro-batches")
        leader, followers = _roles(spec, "paused")
        # Paused past the lag and the URP threshold. The paused broker also leads a partition of __insync_events,
        # so the monitor's source stalls on it until its requests time out and its leadership moves: the alert
        # may come only after the resume, from the backlog.
        spec = script.apply(spec, Step(0, "pause", followers[0]))
        time.sleep(8)
        spec = script.apply(spec, Step(0, "resume", followers[0]))
        wait_until(lambda: monitor.named("under_replicated", "paused"), 120,
                   lambda: f"an URP alert for the paused follower ({monitor.progress()}; {monitor.alerts})")
        urp = monitor.named("under_replicated", "paused")[0]
        assert urp["cause"] == f"follower {followers[0]} stuck", urp
        assert urp["evidence"]["leader"] == leader

        slow_leader, _ = _roles(spec, "slow")
        spec = script.apply(spec, Step(0, "slow-reads", slow_leader, topic="slow", partition=0, ms=8000))
        wait_until(lambda: monitor.named("leader_side", "slow"), 120,
                   lambda: f"a leader-side alert for the slow leader ({monitor.progress()}; {monitor.alerts})")
        spec = script.apply(spec, Step(0, "clear", slow_leader))
        side = monitor.named("leader_side", "slow")[0]
        assert side["partition"] == 0 and f"broker {slow_leader}'s own reads were slow" in side["cause"], side
        print("delays:", _delays(monitor.alerts))
    finally:
        monitor.stop()
        load.stop()
    seen = len(monitor.alerts)

    again = Monitor(spark, settings)  # from the checkpoint: the state says what was alerted already
    try:
        wait_until(lambda: again.batches >= 3, 60, "the restarted monitor's micro-batches")
        time.sleep(3)
        repeated = [a for a in again.alerts if (a["kind"], a["topic"], a["partition"], a["since_ms"]) in
                    {(b["kind"], b["topic"], b["partition"], b["since_ms"]) for b in monitor.alerts}]
        assert repeated == []
        down_ms = int(time.time() * 1000)
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
        time.sleep(THRESHOLDS.urp_ms / 1000 + 4)  # past every threshold, had the cluster's clock gone on
    finally:
        again.stop()
    assert [a for a in again.alerts if a["due_ms"] >= down_ms] == []
    written = [json.loads(line) for line in Path(settings.alerts_file or "").read_text().splitlines()]
    assert len(written) == seen + len(again.alerts)
