"""`insync monitor --kafka-logs` on a real 3-broker Kafka 4.1 cluster (KRaft, lag time 1.5 s, session 3 s) under
acks=1 load: a paused follower (SIGSTOP) raises `under_replicated` naming it, a leader whose disk reads are slow
(a FUSE slow disk under its log.dirs, chaos/slow_disk.py) raises `leader_side` naming it, each within 5 s of the
ISR change (the episode's start, from the logs or the poll) - the delays are printed - and a clean `cluster down`
raises nothing. The slow leader's reads take half a lag each, as in the seed scenario `slow-leader-reads-kip501-on`,
where Kafka drops both followers at about two lags; with reads of five lags Kafka seldom shrank the ISR within 90 s
(a read likely holds the partition lock its shrink takes: docs/benchmarks.md, the seeds on Kafka)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from insync.admin import ADMIN_TIMEOUT_S, admin_client, describe_rows
from insync.chaos import cluster, kafka_cluster, script, slow_disk
from insync.chaos.script import Step
from insync.spark.monitor import delays, job
from insync.spark.monitor.rules import Thresholds
from insync.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ENGINE = "kafka:4.1"
CONFIGS = ["replica.lag.time.max.ms=1500", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
           "offsets.topic.num.partitions=1"]
THRESHOLDS = Thresholds(urp_ms=1_000)
ALERT_WITHIN_MS = 5_000
SLOW_READ_MS = 750  # half a lag time: both followers drop out while it lasts (seed 000, KIP-501 off)
TOPICS = {"paused": [1, 2, 3], "slow": [2, 1, 3]}  # replicas, the leader first; broker 3 leads nothing


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    try:
        kafka_cluster.dist_for(ENGINE)
    except Exception as exc:  # noqa: BLE001 - no release in the cache (make kafka)
        pytest.skip(f"no Kafka 4.1: {exc}")
    if slow_disk.unavailable() is not None:
        pytest.skip(f"no slow disk: {slow_disk.unavailable()}")
    directory = tmp_path_factory.mktemp("kafka-monitor")
    with slow_disk.mounted([directory / f"node-{n}" for n in (1, 2, 3)]):
        started = cluster.up(str(directory), 3, 0, CONFIGS, engine=ENGINE)
        try:
            yield started
        finally:
            cluster.down(cluster.ClusterSpec.load(started.directory), 30.0)


def _create(bootstrap: str) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replica_assignment=[r],
                                            config={"min.insync.replicas": "2"}) for t, r in TOPICS.items()],
                                  operation_timeout=ADMIN_TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)
    wait_until(lambda: _whole(bootstrap), 60, "both topics led with whole ISRs", interval_s=0.5, retry_on=(Exception,))


def _whole(bootstrap: str) -> bool:
    rows = describe_rows(bootstrap, list(TOPICS))
    return all(r.leader == TOPICS[r.topic][0] and sorted(r.isr) == sorted(TOPICS[r.topic]) for r in rows)


class Alerts:
    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.batches = 0
        self.errors: list[str] = []
        self.statuses: dict[str, str] = {}  # each partition's last status line ("" when healthy)

    def on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.alerts.extend(alerts)
        self.statuses.update(statuses)
        self.batches += 1

    def healthy(self) -> bool:
        """The monitor saw every topic's episode end: no alert of it can still come due."""
        return all(self.statuses.get(f"{topic}-0") == "" for topic in TOPICS)

    def named(self, kind: str, topic: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts if a["kind"] == kind and a["topic"] == topic]


def _delay(alert: dict[str, Any], what: str) -> int:
    delay = alert["emitted_ms"] - alert["since_ms"]
    due = alert["due_ms"] - alert["since_ms"]
    print(f"{what}: ISR change at {alert['since_ms']}, alert {delay} ms later (due {due} ms after it); {alert['cause']}")
    return delay


def test_kafka_alerts_for_a_paused_follower_and_a_slow_leader(spark: SparkSession, spec: cluster.ClusterSpec,
                                                               tmp_path: Path) -> None:
    _create(spec.bootstrap)
    seen = Alerts()
    settings = job.MonitorSettings(spec.bootstrap, str(tmp_path / "checkpoint"), THRESHOLDS,
                                   alerts_file=str(tmp_path / "alerts.jsonl"), kafka_logs=(str(spec.directory),))
    job.wait_for_kafka(spec.bootstrap, 30.0)
    monitor = job.Monitor(spark, settings, seen.on_batch, seen.errors.append).start()
    load = delays.Load(spec.bootstrap, list(TOPICS), 1)
    try:
        wait_until(lambda: seen.batches >= 3, 120, "the monitor's first micro-batches")
        assert seen.alerts == [], seen.alerts

        spec = script.apply(spec, Step(0, "pause", 3))
        wait_until(lambda: seen.named("under_replicated", "paused"), 60,
                   lambda: f"an under_replicated alert for the paused follower ({seen.alerts}; {seen.errors})")
        spec = script.apply(spec, Step(0, "resume", 3))
        urp = seen.named("under_replicated", "paused")[0]
        assert [r["broker"] for r in urp["evidence"]["removed"]] == [3] and "follower 3" in urp["cause"], urp
        assert _delay(urp, "paused follower 3") < ALERT_WITHIN_MS
        wait_until(lambda: _whole(spec.bootstrap), 120, "ISRs whole again", interval_s=0.5, retry_on=(Exception,))

        _slow_leader(spec, seen)
        # An alert still due when the cluster goes down would be written to a stopped cluster, where the write
        # waits for the sink's flush timeout: the episodes must have ended in the monitor's view first.
        wait_until(seen.healthy, 60, lambda: f"the monitor's view healthy again ({seen.statuses})")
        load.stop()

        before = len(seen.alerts)
        cluster.down(cluster.ClusterSpec.load(spec.directory), 30.0)
        down_at = seen.batches
        wait_until(lambda: seen.batches >= down_at + 10, 60, "ten micro-batches after cluster down")
        assert seen.alerts[before:] == [], seen.alerts[before:]
    finally:
        load.stop()
        monitor.stop()
        print(f"alerts: {[(a['kind'], a['topic'], a['since_ms']) for a in seen.alerts]}; at {time.time():.0f}")


def _slow_leader(spec: cluster.ClusterSpec, seen: Alerts) -> None:
    leader = TOPICS["slow"][0]
    slow_disk.write_control(Path(spec.node(leader).directory), {"slow-0": SLOW_READ_MS})
    try:
        wait_until(lambda: seen.named("leader_side", "slow"), 180,
                   lambda: f"a leader_side alert for the slow leader ({seen.alerts}; {seen.errors})")
    finally:
        slow_disk.write_control(Path(spec.node(leader).directory), {})
    side = seen.named("leader_side", "slow")[0]
    assert f"broker {leader}'s own reads were slow" in side["cause"], side
    assert _delay(side, f"slow leader {leader}") < ALERT_WITHIN_MS
    assert not seen.named("leader_side", "paused"), seen.alerts
    wait_until(lambda: _whole(spec.bootstrap), 120, "ISRs whole again", interval_s=0.5, retry_on=(Exception,))
