"""Runs of real Kafka whose truth is known, for `insync analyze` (`make compat`; the trimmed logs of one run per
scenario and version are the fixtures of tests/spark/test_kafka_log_truth.py).

A run starts a 3-broker cluster of one Kafka version, creates a topic whose replicas are placed by hand (so which
broker leads what is known, and the broker a follower fault hits leads nothing, and is not ZooKeeper mode's
controller), runs an idempotent acks=all producer, makes one fault on one broker, undoes it, waits until every ISR
is whole again, stops the cluster, and keeps each node's server.log, state-change.log and controller.log with
truth.json: what was done, when (epoch ms), and what the analysis must therefore say (the episode's cause, broker
and partitions, the leader changes, the partitions under-replicated, under min ISR and offline).

`python tests/kafka_ref/kafka_log_runs.py VERSION SCENARIO OUT [--fixture DIR]` makes one run into OUT (and its
trimmed copy into DIR: the fixtures are tests/spark/fixtures/kafka-runs/VERSION/SCENARIO).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from insync.admin import ADMIN_TIMEOUT_S, admin_client, describe_rows
from insync.chaos import cluster, history, kafka_cluster, network
from insync.chaos.script import Step, apply
from insync.chaos.seeds_run import _SideProducer
from insync.spark.analysis import kafka_lines
from insync.waiting import wait_until

PARTITIONS = 6
MIN_ISR = 2
RATE = 1_000.0  # records a second, 100 bytes each
WARM_UP_S = 10.0
SETTLE_S = 5.0  # after the ISRs are whole, before the cluster stops
WHOLE_TIMEOUT_S = 180.0
STOP_DEADLINE_S = 60.0
SLOW_KBIT = 200  # the slow follower's ingress: a third of what the acks=1 writes alone take
SIDE_EVERY_S = 0.05
LOG_NAMES = ("server.log", "state-change.log", "controller.log")
VERSIONS = {"4.1": "kafka:4.1", "3.9": "kafka:3.9"}


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    action: str  # pause | kill | stop | slow
    target: str  # follower: a broker that leads nothing; leader: one that leads half the partitions
    duration_s: float  # from the fault to its undoing (resume, restart, heal)
    cause: str | None  # the episode cause the analysis must name; None: no fault episode at all
    netns: bool = False
    configs: tuple[str, ...] = ()  # broker settings, KEY=VALUE
    side_records: int = 0  # acks=1 records written every SIDE_EVERY_S beside the acks=all producer


SCENARIOS = {s.name: s for s in (
    # Paused past replica.lag.time.max.ms (30 s): KRaft fences it at broker.session.timeout.ms (9 s), ZooKeeper
    # mode drops it when its session expires (18 s); either way the controller takes it out of every ISR.
    Scenario("paused-follower", "pause", "follower", 45.0, "follower"),
    Scenario("killed-leader", "kill", "leader", 30.0, "follower"),
    Scenario("controlled-shutdown", "stop", "leader", 20.0, None),
    # A slow link into the follower: it fetches, never reaching the end, and its leaders drop it after the lag.
    # As the seed does: small fetches, so that a round trip cannot carry all that was written meanwhile, and acks=1
    # writes beside, which the follower does not hold back as it holds back acks=all ones.
    Scenario("slow-follower", "slow", "follower", 60.0, "follower", netns=True,
             configs=("replica.fetch.max.bytes=16384",), side_records=100),
)}


def placement(brokers: list[int], controller: int | None) -> tuple[int, int, dict[int, list[int]]]:
    """(leader, follower, replicas per partition): the follower is never first in a replica list, so it leads
    nothing; the leader is first in half of them. Neither is ZooKeeper mode's controller when avoidable, so a
    fault on them does not move the controller too."""
    assert len(brokers) == 3, brokers
    others = [b for b in brokers if b != controller]
    follower = others[-1]
    leader = others[0]
    third = next(b for b in brokers if b not in (leader, follower))
    replicas = {p: [leader, third, follower] if p % 2 == 0 else [third, leader, follower] for p in range(PARTITIONS)}
    return leader, follower, replicas


def topic_name(version: str, scenario: Scenario) -> str:
    """The run's topic, its own across versions and scenarios (so that the fixtures can be analysed together)."""
    return f"{scenario.name}-kafka{version.replace('.', '')}"


def _create_topic(bootstrap: str, topic: str, replicas: dict[int, list[int]]) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = admin_client(bootstrap)
    new = NewTopic(topic, num_partitions=len(replicas), config={"min.insync.replicas": str(MIN_ISR)},
                   replica_assignment=[replicas[p] for p in sorted(replicas)])
    admin.create_topics([new], operation_timeout=ADMIN_TIMEOUT_S)[topic].result(timeout=ADMIN_TIMEOUT_S)
    wait_until(lambda: _isr_whole(bootstrap, topic, replicas), WHOLE_TIMEOUT_S, f"topic {topic} led, ISRs whole",
               interval_s=0.5, retry_on=(Exception,))


def _isr_whole(bootstrap: str, topic: str, replicas: dict[int, list[int]]) -> bool:
    rows = describe_rows(bootstrap, [topic])
    return len(rows) == len(replicas) and all(
        r.leader >= 0 and sorted(r.isr) == sorted(replicas[r.partition]) for r in rows)


def _controller_id(spec: cluster.ClusterSpec) -> int | None:
    """ZooKeeper mode's controller (a broker); None in KRaft, whose controller is node 0 (a KRaft broker names a
    random broker as the controller to clients)."""
    if kafka_cluster.dist_for(spec.engine).kraft_only:
        return None
    return int(admin_client(spec.bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S).controller_id)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _fault(spec: cluster.ClusterSpec, scenario: Scenario, broker: int) -> cluster.ClusterSpec:
    if scenario.action == "stop":
        return cluster.stop_node(spec, broker, STOP_DEADLINE_S, sig=signal.SIGTERM)
    if scenario.action == "slow":
        network.install(spec, network.current(spec).with_ingress(broker, SLOW_KBIT))
        return spec
    return apply(spec, Step(0, scenario.action, broker))


def _undo(spec: cluster.ClusterSpec, scenario: Scenario, broker: int) -> cluster.ClusterSpec:
    if scenario.action == "slow":
        network.heal(spec)
        return spec
    return apply(spec, Step(0, "resume" if scenario.action == "pause" else "restart", broker))


def expected(scenario: Scenario, topic: str, broker: int, replicas: dict[int, list[int]]) -> dict[str, Any]:
    """What the analysis must say about the run's topic."""
    hosted = sorted(f"{topic}-{p}" for p, r in replicas.items() if broker in r)
    led = sorted(f"{topic}-{p}" for p, r in replicas.items() if r[0] == broker)
    episodes = [] if scenario.cause is None else [{"cause": scenario.cause, "broker": broker, "partitions": hosted}]
    return {"episodes": episodes, "leader_changes": [] if scenario.action == "slow" else led,
            "under_replicated": hosted if scenario.cause is not None else [],
            "shutdown": hosted if scenario.cause is None else [], "under_min_isr": [], "offline": []}


def run(version: str, scenario: Scenario, out: Path, work: Path) -> dict[str, Any]:
    """One run into `out` (logs per node, truth.json); `work` holds the cluster while it runs."""
    spec = cluster.up(str(work), 3, 0, list(scenario.configs), namespaces=scenario.netns, engine=VERSIONS[version])
    try:
        truth = _run_on(spec, version, scenario)
        spec = cluster.ClusterSpec.load(spec.directory)
    finally:
        down_ms = _now_ms()
        cluster.down(cluster.ClusterSpec.load(spec.directory), STOP_DEADLINE_S)
    truth["cluster_down_ms"] = down_ms
    keep_logs(work, out)
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return truth


def _run_on(spec: cluster.ClusterSpec, version: str, scenario: Scenario) -> dict[str, Any]:
    brokers = [b.node_id for b in spec.brokers]
    leader, follower, replicas = placement(brokers, _controller_id(spec))
    broker = follower if scenario.target == "follower" else leader
    topic = topic_name(version, scenario)
    _create_topic(spec.bootstrap, topic, replicas)
    workload = history.ProduceWorkload(spec.bootstrap, topic, RATE, uuid.uuid4().hex[:8])
    workload.start()
    side = _SideProducer(spec.bootstrap, topic, PARTITIONS, scenario.side_records, SIDE_EVERY_S, "1")
    if scenario.side_records:
        side.start()
    try:
        time.sleep(WARM_UP_S)
        start_ms = _now_ms()
        spec = _fault(spec, scenario, broker)
        time.sleep(scenario.duration_s)
        end_ms = _now_ms()
        spec = _undo(spec, scenario, broker)
        wait_until(lambda: _isr_whole(spec.bootstrap, topic, replicas), WHOLE_TIMEOUT_S, f"every ISR of {topic} whole",
                   interval_s=0.5, retry_on=(Exception,))
        whole_ms = _now_ms()
        time.sleep(SETTLE_S)
    finally:
        side.stop()
        produced = workload.stop()
    return {"version": version, "engine": spec.engine, "mode": "kraft" if kafka_cluster.dist_for(
                spec.engine).kraft_only else "zookeeper",
            "scenario": asdict(scenario), "topic": topic, "min_insync_replicas": MIN_ISR,
            "replicas": {f"{topic}-{p}": r for p, r in sorted(replicas.items())},
            "fault": {"action": scenario.action, "broker": broker, "start_ms": start_ms, "end_ms": end_ms},
            "isr_whole_ms": whole_ms, "acked": len(produced.acked), "failed": dict(produced.failed),
            "expected": expected(scenario, topic, broker, replicas)}


def keep_logs(work: Path, out: Path) -> None:
    """Each node's Kafka logs (the rotated ones too) into `out/node-N/`."""
    out.mkdir(parents=True, exist_ok=True)
    for node in sorted(work.glob("node-*")):
        for log in sorted(node.iterdir()):
            if log.name.startswith(LOG_NAMES) and log.stat().st_size > 0:
                (out / node.name).mkdir(exist_ok=True)
                shutil.copy2(log, out / node.name / log.name)


# ---------------------------------------------------------------------------------------------------------------
# Fixtures: a run's logs trimmed to what the analysis reads, what the controller and brokers say about the topic
# and the brokers' comings and goings, and a sample of the rest (noise the analysis must ignore).

NOISE_EVERY = 40  # every 40th other log4j line is kept
NOISE_MAX = 15  # per file
LIFECYCLE_PHRASES = ("Fencing broker", "handleBrokerFenced", "enterControlledShutdown", "to unfence",
                     "controlled shutdown", "immediate shutdown", "incarnation", "failure callback",
                     "startup callback", "Newly added brokers", "Shutting down broker", "Kafka Server started",
                     "] started (", "Transition from ", "shutting down (")


def _is_event(line: str) -> bool:
    """Whether logparse makes an event of the line (its kinds' full patterns, as test_kafka_line_patterns reads
    them)."""
    prefixed = re.match(kafka_lines.LOG4J_RX, line)
    if prefixed is None:
        return False
    body = re.match(kafka_lines.BODY_RX, prefixed.group(3))
    return body is not None and any(
        re.match(kind.pattern, body.group(1)) and (kind.context is None or re.match(kind.context, prefixed.group(3)))
        for kind in kafka_lines.KINDS)


def trimmed(lines: list[str], topic: str, decisions: bool) -> list[str]:
    """The lines of one log worth keeping, in order: events, the brokers' comings and goings, the state changes of
    the topic (in a log of `decisions`: state-change.log, controller.log), the exception line after a refused
    append, and a sample of the other log4j lines (a server.log's own lines about the topic among them)."""
    kept: list[str] = []
    noise = 0
    for number, line in enumerate(lines):
        log4j = re.match(kafka_lines.LOG4J_RX, line) is not None
        about_topic = decisions and (f" {topic}-" in line or f"'{topic}'" in line)
        relevant = _is_event(line) or (log4j and (about_topic or any(p in line for p in LIFECYCLE_PHRASES)))
        follows_refusal = not log4j and number > 0 and kafka_lines.APPEND_ERROR_PHRASE in lines[number - 1]
        sampled = log4j and number % NOISE_EVERY == 0 and noise < NOISE_MAX
        if relevant or follows_refusal or sampled:
            kept.append(line)
            noise += int(sampled and not relevant)
    return kept


def trim(logs: Path, fixture: Path) -> None:
    """A run's logs (from `run`) as a fixture: each log trimmed, truth.json as it is."""
    truth = json.loads((logs / "truth.json").read_text(encoding="utf-8"))
    shutil.rmtree(fixture, ignore_errors=True)
    for log in sorted(logs.glob("node-*/*")):
        target = fixture / log.relative_to(logs)
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = log.read_text(encoding="utf-8").splitlines()
        decisions = not log.name.startswith("server.log")
        target.write_text("".join(f"{line}\n" for line in trimmed(lines, truth["topic"], decisions)),
                          encoding="utf-8")
    shutil.copy2(logs / "truth.json", fixture / "truth.json")


def main() -> None:
    parser = argparse.ArgumentParser(description="One run of Kafka with a known fault, its logs and truth.json")
    parser.add_argument("version", choices=sorted(VERSIONS))
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("out", type=Path, help="where the run's logs and truth.json go (the cluster beside it)")
    parser.add_argument("--fixture", type=Path, help="also write the trimmed logs there (tests/spark/fixtures/...)")
    args = parser.parse_args()
    work = args.out.with_name(args.out.name + ".cluster")
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(run(args.version, SCENARIOS[args.scenario], args.out, work), indent=1))
    if args.fixture is not None:
        trim(args.out, args.fixture)


if __name__ == "__main__":
    main()
