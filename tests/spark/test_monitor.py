"""`insync monitor` on a live cluster: alerts for a paused follower (which also leads a partition of
`__insync_events`: the alert comes while it is paused) and for a slow leader (KIP-501 off), each once in the view,
in `__insync_alerts` and in the alerts file across a failure between writing a micro-batch's alerts and committing
it and across a restart from the checkpoint, none for a clean `cluster down`.

One cluster and the suite's SparkSession for the module; the delays from each condition to its alert are printed
(docs/benchmarks.md has figures), never asserted."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, script
from insync.chaos.script import Step
from insync.spark.monitor import alert_log, delays, job
from insync.types import ALERTS_TOPIC, EVENTS_TOPIC
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(480)

TIMING = delays.TIMING
THRESHOLDS = delays.THRESHOLDS


class Monitor:
    """The monitor on the test's session (restarting when its query fails), alerts gathered. With `fail_once`, the
    first micro-batch that added alerts fails after writing them, before Spark commits it: the query restarts
    from its checkpoint and replays that batch, as after a crash at that point."""

    def __init__(self, spark: SparkSession, settings: job.MonitorSettings, fail_once: bool = False) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.batches = 0
        self.errors: list[str] = []
        self.failed_batch: int | None = None if fail_once else -1
        self.monitor = job.Monitor(spark, settings, self._on_batch, self.errors.append).start()

    def _on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.alerts.extend(alerts)
        self.batches += 1
        if alerts and self.failed_batch is None:
            self.failed_batch = alerts[0]["batch"]
            raise RuntimeError("injected: the monitor stops after writing its alerts, before Spark commits them")

    def named(self, kind: str, topic: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts if a["kind"] == kind and a["topic"] == topic and a["partition"] == 0]

    def progress(self) -> str:
        """The last micro-batches' durations and the restarts, for a failure's message."""
        query = self.monitor.query
        recent = query.recentProgress[-5:] if query is not None else []
        return "; ".join([f"batch {p['batchId']}: {p['batchDuration']} ms, {p['numInputRows']} rows" for p in recent]
                         + self.errors[-3:])

    def batch_ids(self) -> list[int]:
        query = self.monitor.query
        return [p["batchId"] for p in query.recentProgress] if query is not None else []

    def stop(self) -> None:
        self.monitor.stop()


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


def _ids(alerts: list[dict[str, Any]]) -> Counter[alert_log.AlertId]:
    return Counter(alert_log.alert_id(a) for a in alerts)


def _in_topic(bootstrap: str, monitor: str) -> list[dict[str, Any]]:
    records = [json.loads(v) for v, _ in alert_log.read_tail(bootstrap, ALERTS_TOPIC, 100_000, 30.0)]
    return [r for r in records if r.get("monitor") == monitor]


@pytest.mark.slow
def test_alerts_once_each_across_a_crash_and_a_restart_none_for_a_clean_shutdown_none_held_up_by_a_paused_broker(
        spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    for topic in ("paused", "slow"):
        ensure_topic(spec.bootstrap, topic, 2, 3, {"min.insync.replicas": "2"})
    settings = job.MonitorSettings(spec.bootstrap, str(tmp_path / "checkpoint"), THRESHOLDS,
                                   alerts_file=str(tmp_path / "alerts.jsonl"))
    job.wait_for_events_topic(spec.bootstrap, 20)
    load = delays.Load(spec.bootstrap, ["paused", "slow"], 2)
    monitor = Monitor(spark, settings, fail_once=True)
    try:
        wait_until(lambda: monitor.batches >= 2, 120, "the monitor's first micro-batches")
        leader, followers = _roles(spec, "paused")
        # The paused broker leads a partition of __insync_events (each broker leads one): the source skips that
        # partition while its leader does not answer and reads the others, so the alert comes during the pause.
        assert followers[0] in {r.leader for r in describe_rows(spec.bootstrap, [EVENTS_TOPIC])}
        spec = script.apply(spec, Step(0, "pause", followers[0]))
        try:
            wait_until(lambda: monitor.named("under_replicated", "paused"), 90,
                       lambda: f"an URP alert during the pause ({monitor.progress()}; {monitor.alerts})")
        finally:
            spec = script.apply(spec, Step(0, "resume", followers[0]))
        urp = monitor.named("under_replicated", "paused")[0]
        assert urp["cause"] == f"follower {followers[0]} stuck", urp
        assert urp["evidence"]["leader"] == leader
        # The first micro-batch with alerts failed after writing them: Spark ran it again after the restart.
        wait_until(lambda: monitor.failed_batch in monitor.batch_ids(), 60,
                   lambda: f"micro-batch {monitor.failed_batch} replayed ({monitor.progress()})")

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

    again = Monitor(spark, settings)  # from the checkpoint: the state says what was alerted already
    try:
        # Six micro-batches (a 1 s trigger, the cluster's heartbeats in each): an alert it repeats is in them.
        wait_until(lambda: again.batches >= 6, 60, "six micro-batches of the restarted monitor")
        assert not set(_ids(again.alerts)) & set(_ids(monitor.alerts))
        shown = len(again.alerts)
        in_topic = _in_topic(spec.bootstrap, alert_log.monitor_id(Path(settings.checkpoint)))
        down_ms = int(time.time() * 1000)
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
        # A window for alerts that must not come: past every threshold, had the cluster's clock gone on.
        time.sleep(THRESHOLDS.urp_ms / 1000 + 4)
    finally:
        again.stop()
    assert [a for a in again.alerts if a["due_ms"] >= down_ms] == []
    everything = _ids(monitor.alerts + again.alerts)
    assert max(everything.values()) == 1, everything
    assert max(_ids(in_topic).values()) == 1 and set(_ids(monitor.alerts + again.alerts[:shown])) <= set(
        _ids(in_topic)) <= set(everything), (in_topic, everything)
    written = [json.loads(line) for line in Path(settings.alerts_file or "").read_text().splitlines()]
    assert _ids(written) == everything
