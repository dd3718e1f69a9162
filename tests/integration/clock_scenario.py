"""The clock-step scenario, the same on insync's cluster (tests/integration/test_clock_steps.py) and on Kafka's
(tests/kafka_ref/test_clock_steps_on_kafka.py): under the campaign's workload (acks=all idempotent, acks=all and
acks=1 producers, a consumer group, a reader), a follower's wall clock is stepped 5 minutes forward, then 5 back,
then put right; then the leader's; then the controller's. Each step is held past replica.lag.time.max.ms and
broker.session.timeout.ms (shortened for the scenario), and the partitions' ISRs are sampled all along from the
metadata. Both systems log an ISR shrink as Kafka does (`Shrinking ISR from ...`): `logged` finds those lines
among what each node logged after the ISRs were whole and before the clocks were put right.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import wait_until
from insync.admin import admin_client, ensure_topic
from insync.chaos import checker, clock_step, cluster, nemesis, workload
from insync.chaos.ops import HistoryWriter, read_history

TOPIC = "clock"
PARTITIONS = 3
# Kafka's names: both systems take them. Short, so that a wall-clock interval would trip within a step's hold.
SETTINGS = ["replica.lag.time.max.ms=4000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"]
HOLD_S = 7.0  # each step held past replica.lag.time.max.ms and broker.session.timeout.ms
SAMPLE_S = 0.5
RATE = 300.0
SETTLE_S, SETTLE_DEADLINE_S = 8.0, 120.0  # SETTLE_S past replica.lag.time.max.ms
OFFSETS_TOPIC = "__consumer_offsets"  # created when the workload's consumer group first asks for it


@dataclass(frozen=True, slots=True)
class Outcome:
    steps: tuple[str, ...]  # what was stepped, in order, with the seconds into the scenario
    log_offsets: dict[int, tuple[int, int]]  # node -> its log's size when the ISRs were whole and at the end
    under_replicated: tuple[str, ...]  # every sample that found a partition's ISR short of its replicas
    samples: int
    check: checker.Check
    client_errors: tuple[str, ...]


def run(spec: cluster.ClusterSpec, directory: Path) -> Outcome:
    """The scenario on a running cluster started with `clock_steps`; every clock put right at the end."""
    ensure_topic(spec.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    admin = admin_client(spec.bootstrap)
    leader, follower = wait_until(lambda: _leader_and_follower(admin), 30, f"a leader of {TOPIC}-0 and a follower")
    history = HistoryWriter(directory / "history.jsonl")
    clients = workload.Workload(spec.bootstrap, workload.WorkloadSpec(TOPIC, RATE), history)
    clients.start()
    steps: list[str] = []
    short: list[str] = []
    samples = 0
    try:
        _settle(admin)
        marks = {node.node_id: _log_size(node) for node in spec.nodes}
        start = time.monotonic()
        for node_id in (follower, leader, cluster.CONTROLLER_ID):
            for offset_ms in (nemesis.CLOCK_STEP_MS, -nemesis.CLOCK_STEP_MS, 0):
                clock_step.step(spec.node(node_id).directory, offset_ms)
                steps.append(f"{time.monotonic() - start:5.1f} s: node {node_id} at {offset_ms // 60_000:+d} min")
                samples += _hold(admin, start, short, HOLD_S)
        log_offsets = {node.node_id: (marks[node.node_id], _log_size(node)) for node in spec.nodes}
    finally:
        for node in spec.nodes:
            clock_step.step(node.directory, 0)
        clients.stop()
    workload.final_read(spec.bootstrap, TOPIC, history)
    history.close()
    check = checker.check(read_history(directory / "history.jsonl"))
    return Outcome(tuple(steps), log_offsets, tuple(short), samples, check, tuple(clients.errors))


def _log(node: cluster.NodeSpec) -> Path:
    """Kafka's server.log, or an insync node's stdout.log (where it logs Kafka's lines)."""
    kafka = Path(node.directory) / "server.log"
    return kafka if kafka.exists() else Path(node.directory) / "stdout.log"


def _log_size(node: cluster.NodeSpec) -> int:
    return _log(node).stat().st_size


def logged(spec: cluster.ClusterSpec, outcome: Outcome, message: str) -> list[str]:
    """The lines containing `message` that the nodes logged during the steps."""
    lines = []
    for node in spec.nodes:
        start, end = outcome.log_offsets[node.node_id]
        with _log(node).open("rb") as log:
            log.seek(start)
            text = log.read(end - start).decode(errors="replace")
        lines += [line for line in text.splitlines() if message in line]
    return lines


def _leader_and_follower(admin: Any) -> tuple[int, int] | None:
    metadata = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
    followers = [r for r in metadata.replicas if r != metadata.leader]
    return (int(metadata.leader), int(followers[0])) if metadata.leader >= 0 and followers else None


def _settle(admin: Any) -> None:
    """Wait for traffic flowing and every ISR whole, the consumer group's offsets topic's too, for SETTLE_S on end:
    a follower still creating its replicas of a new topic (slow on a loaded machine) is not the clock's doing."""
    deadline, whole_since = time.monotonic() + SETTLE_DEADLINE_S, None
    while time.monotonic() < deadline:  # bounded by the deadline
        try:
            whole = OFFSETS_TOPIC in admin.list_topics(timeout=5).topics and not _under_replicated(admin)
        except Exception:  # noqa: BLE001 - a broker busy: not whole yet
            whole = False
        whole_since = (whole_since or time.monotonic()) if whole else None
        if whole_since is not None and time.monotonic() - whole_since >= SETTLE_S:
            return
        time.sleep(SAMPLE_S)
    raise AssertionError(f"the ISRs did not stay whole for {SETTLE_S} s within {SETTLE_DEADLINE_S} s")


def _under_replicated(admin: Any) -> list[str]:
    """Every partition of every topic whose ISR is short of its replicas, as `topic-partition ISR [..] of [..]`."""
    topics = admin.list_topics(timeout=5).topics
    return [f"{name}-{index} ISR {sorted(p.isrs)} of {sorted(p.replicas)}" for name, topic in sorted(topics.items())
            for index, p in sorted(topic.partitions.items()) if len(p.isrs) < len(p.replicas)]


def _hold(admin: Any, start: float, short: list[str], hold_s: float) -> int:
    """Sample the ISRs every SAMPLE_S for `hold_s`, noting each partition found under-replicated; returns the
    samples taken. A sample that fails (a broker busy) is not one."""
    deadline, samples = time.monotonic() + hold_s, 0
    while time.monotonic() < deadline:  # bounded by the deadline
        try:
            found = _under_replicated(admin)
        except Exception:  # noqa: BLE001 - a missed sample is reported by the count, not raised
            time.sleep(SAMPLE_S)
            continue
        short.extend(f"{time.monotonic() - start:5.1f} s: {partition}" for partition in found)
        samples += 1
        time.sleep(SAMPLE_S)
    return samples
