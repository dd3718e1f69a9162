"""How long from an event to its alert in `__insync_alerts`: `python -m insync.spark.monitor.delays [DIR]`.

A 3-broker cluster (quick failure detection: 3 s replica lag, 6 s broker sessions; KIP-501 off) with acks=1 load
on three topics of three partitions, and the monitor beside it on `local[2]` with its 1 s trigger and 2 s
thresholds. Three faults, one after the other, each held until its alert is in the topic (at most FAULT_HOLD_S): a
paused follower (`under_replicated`), a leader whose reads of one partition are slow (`leader_side`) and a killed
leader (`under_replicated` of the partition it led). Each faulty broker is one that does not lead
`__insync_alerts` (`_target`), and leads a partition of `__insync_events`, as every broker does, so the figures
include the source's reading around that partition.

The delay of an alert is its record's timestamp in `__insync_alerts` (when the monitor wrote it) minus the time it
was due in event time: the event's own time for an alert raised at once (`leader_side`), the episode's start plus
its threshold for a duration alert. Printed, one line per fault, with the machine's load; never asserted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, script
from insync.chaos.script import Step
from insync.spark.monitor import alert_log, job
from insync.spark.monitor.rules import Thresholds
from insync.types import ALERTS_TOPIC
from insync.waiting import wait_until

TIMING = ["insync.events.topic.enable=true", "fault.injection.enable=true", "replica.lag.time.max.ms=3000",
          "broker.session.timeout.ms=6000", "broker.heartbeat.interval.ms=500", "replica.fetch.backoff.ms=200",
          "isr.change.propagation.check.interval.ms=250", "isr.change.propagation.blackout.ms=500",
          "follower.fetch.pending.reads.insync.enable=false"]
THRESHOLDS = Thresholds(urp_ms=2000, min_isr_ms=2000, offline_ms=2000, risk_ms=2000)
TOPICS = ("paused", "slow", "killed")
PARTITIONS = 3  # so that each fault can be on a broker that does not lead __insync_alerts (`_target`)
FAULT_HOLD_S = 120.0
SLOW_READS_MS = 8000
READ_ATTEMPTS = 30  # one a second: the alerts partition may wait for a new leader (6 s sessions)


class Load:
    """acks=1 records to every partition of `topics` from a thread, so the leaders have reads to serve."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "log_level": 0})
        self._topics, self._partitions, self._stop = topics, partitions, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():  # bounded by `stop`
            for topic in self._topics:
                for partition in range(self._partitions):
                    with contextlib.suppress(BufferError):  # a full queue: the next round sends more
                        self._producer.produce(topic, b"x" * 100, partition=partition)
            self._producer.poll(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass(frozen=True, slots=True)
class Delay:
    fault: str
    kind: str
    partition: str  # topic-partition
    due_ms: int
    written_ms: int  # the alert record's timestamp in __insync_alerts

    @property
    def delay_s(self) -> float:
        return (self.written_ms - self.due_ms) / 1000


class _Alerts:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.batches = 0

    def __call__(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        self.seen.extend(alerts)
        self.batches += 1

    def wait(self, kind: str, topic: str, partition: int, since_ms: int) -> dict[str, Any]:
        """The first alert of `kind` about the partition whose episode began at `since_ms` or later: a fault on a
        broker makes every partition it holds a replica of an episode, and the faults come one after the other."""
        return wait_until(lambda: next((a for a in self.seen if a["kind"] == kind and a["topic"] == topic and
                                        a["partition"] == partition and a["since_ms"] >= since_ms), None),
                          FAULT_HOLD_S, f"a {kind} alert for {topic}-{partition}")

    def wait_batches(self, count: int) -> None:
        """The query runs: faults before its first micro-batch would come before its starting offsets."""
        wait_until(lambda: self.batches >= count, FAULT_HOLD_S, f"{count} micro-batches")


def _target(bootstrap: str, topic: str, leader: bool) -> tuple[int, int]:
    """A partition of `topic` and the broker to fault in it (its leader, or else a follower) that does not lead
    __insync_alerts: a fault there would hold up the alert's own write (a killed broker's until its leadership
    moves, or for good when it was the last replica in sync), which is not the monitor's delay."""
    alerts_leader = describe_rows(bootstrap, [ALERTS_TOPIC])[0].leader
    for row in sorted(describe_rows(bootstrap, [topic]), key=lambda r: r.partition):
        for broker in [row.leader] if leader else [b for b in row.replicas if b != row.leader]:
            if broker != alerts_leader:
                return row.partition, broker
    raise AssertionError(f"every partition of {topic} has broker {alerts_leader}, the alerts' leader, in that role")


def _settled(bootstrap: str) -> None:
    """Wait until every replica of every partition is in sync again: a broker killed while it is the last replica
    in sync of a partition (the slow leader's followers are still catching up, say) takes that partition offline,
    its partition of `__insync_events` included, and the events in it with it."""
    lagging: list[str] = []

    def in_sync() -> bool:
        nonlocal lagging
        lagging = [f"{r.topic}-{r.partition}" for r in describe_rows(bootstrap) if set(r.isr) != set(r.replicas)]
        return not lagging

    wait_until(in_sync, FAULT_HOLD_S, lambda: f"every replica in sync (under-replicated: {lagging})", interval_s=0.5)


def _faults(spec: cluster.ClusterSpec, alerts: _Alerts) -> list[tuple[str, dict[str, Any]]]:
    """The three faults, each on a settled cluster and held until its alert came; the alerts in order."""
    found = []
    _settled(spec.bootstrap)
    partition, follower = _target(spec.bootstrap, "paused", leader=False)
    since_ms = int(time.time() * 1000)
    spec = script.apply(spec, Step(0, "pause", follower))
    try:
        found.append(("paused follower", alerts.wait("under_replicated", "paused", partition, since_ms)))
    finally:
        spec = script.apply(spec, Step(0, "resume", follower))
    _settled(spec.bootstrap)
    partition, leader = _target(spec.bootstrap, "slow", leader=True)
    since_ms = int(time.time() * 1000)
    spec = script.apply(spec, Step(0, "slow-reads", leader, topic="slow", partition=partition, ms=SLOW_READS_MS))
    try:
        found.append(("slow leader, KIP-501 off", alerts.wait("leader_side", "slow", partition, since_ms)))
    finally:
        spec = script.apply(spec, Step(0, "clear", leader))
    _settled(spec.bootstrap)
    partition, leader = _target(spec.bootstrap, "killed", leader=True)
    since_ms = int(time.time() * 1000)
    script.apply(spec, Step(0, "kill", leader))
    found.append(("killed leader", alerts.wait("under_replicated", "killed", partition, since_ms)))
    return found


def measure(directory: Path, spark: Any) -> list[Delay]:
    """Run the three faults with the monitor on `spark`; the delay of each one's alert."""
    spec = cluster.up(str(directory / "cluster"), 3, 0, TIMING)
    try:
        for topic in TOPICS:
            ensure_topic(spec.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        job.wait_for_events_topic(spec.bootstrap, 30)
        settings = job.MonitorSettings(spec.bootstrap, str(directory / "checkpoint"), THRESHOLDS)
        alerts, load = _Alerts(), Load(spec.bootstrap, list(TOPICS), PARTITIONS)
        monitor = job.Monitor(spark, settings, alerts).start()
        try:
            alerts.wait_batches(2)
            found = _faults(spec, alerts)
        finally:
            monitor.stop()
            load.stop()
        written = _written_ms(spec.bootstrap, alert_log.monitor_id(Path(settings.checkpoint)))
        missing = [a for _, a in found if alert_log.alert_id(a) not in written]
        assert not missing, f"alerts the monitor reported but {ALERTS_TOPIC} does not hold: {missing}"
        return [Delay(fault, a["kind"], f"{a['topic']}-{a['partition']}", int(a["due_ms"]), written[alert_log.alert_id(a)])
                for fault, a in found]
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def _written_ms(bootstrap: str, monitor: str) -> dict[alert_log.AlertId, int]:
    """When each of the monitor's alerts was written: its record's timestamp in __insync_alerts. Tried again while
    the client still knows the killed broker."""
    for attempt in range(READ_ATTEMPTS):  # bounded
        try:
            tail = alert_log.read_tail(bootstrap, ALERTS_TOPIC, 100_000, 30.0)
            break
        except Exception:
            if attempt == READ_ATTEMPTS - 1:
                raise
            time.sleep(1)
    records = [(json.loads(value), timestamp_ms) for value, timestamp_ms in tail]
    return {alert_log.alert_id(r): ts for r, ts in records if r.get("monitor") == monitor}


def main(argv: list[str]) -> int:
    from insync.spark.session import build_session

    directory = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="insync-delays-"))
    spark = build_session("local[2]", app_name="insync-monitor-delays", shuffle_partitions=1)
    spark.sparkContext.setLogLevel("FATAL")
    try:
        delays = measure(directory, spark)
    finally:
        spark.stop()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"event to alert in {ALERTS_TOPIC} (1 s trigger, local[2], load average {load}):")
    for d in delays:
        print(f"  {d.fault:<26} {d.kind:<17} {d.partition}  {d.delay_s:5.1f} s after due")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
