"""`insync chaos`: one fault now (`apply`), or a timed script of faults under a workload (`run_script`).

A script is TOML: `topic` (created if missing), `partitions`, `replication_factor`, `min_insync_replicas`, `rate`
(records a second, acks=all, idempotent), `duration_s`, then `[[step]]`s with `at_s`, `action` and its fields:

    [[step]]
    at_s = 5
    action = "pause"   # pause | resume | kill | restart | crash | slow-reads | clear | fail-partition | delay
    broker = 2         # network steps need `insync cluster up --netns`: isolate, leader-cut, bridge, ring,
                       # one-way, loss, latency, bandwidth, heal (chaos/network.py)

Steps run in time order while the workload produces; at the end every fault is undone, the topic is read back
and the verdict (lost, duplicated, reordered) is returned. An unknown action or missing field names the step.
"""

from __future__ import annotations

import signal
import time
import tomllib
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from insync import faults
from insync.admin import ensure_topic
from insync.chaos import cluster, history, kafka_cluster, network, power
from insync.config import ConfigError

PROCESS_ACTIONS = ("pause", "resume", "kill", "restart", "crash", "slow-reads", "clear", "fail-partition", "delay")
NETWORK_ACTIONS = ("isolate", "leader-cut", "bridge", "ring", "one-way", "loss", "latency", "bandwidth", "heal")
ACTIONS = PROCESS_ACTIONS + NETWORK_ACTIONS
# Faults an insync node injects into itself (its fault file, its power-loss mode): a Kafka node has no such hook.
INSYNC_ONLY_ACTIONS = ("crash", "slow-reads", "clear", "fail-partition", "delay")
_NEEDS = {"slow-reads": ("topic", "partition", "ms"), "fail-partition": ("topic", "partition"), "delay": ("ms",),
          "leader-cut": ("topic", "partition"), "one-way": ("peer",), "loss": ("percent",), "latency": ("ms",),
          "bandwidth": ("kbit",)}
_NO_NODE = ("leader-cut", "bridge", "ring", "heal")  # steps about the whole cluster or a partition
_INTS = ("broker", "partition", "ms", "peer", "kbit", "jitter_ms")


@dataclass(frozen=True, slots=True)
class Step:
    at_s: float
    action: str
    broker: int | None  # the node; None for the steps about the whole cluster or a partition (_NO_NODE)
    topic: str | None = None
    partition: int | None = None
    ms: int | None = None
    peer: int | None = None
    percent: float | None = None
    kbit: int | None = None
    jitter_ms: int | None = None
    clients: bool = False  # latency: the root namespace's clients delayed too


@dataclass(frozen=True, slots=True)
class Script:
    topic: str = "chaos"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    rate: float = 200.0
    duration_s: float = 30.0
    steps: tuple[Step, ...] = field(default_factory=tuple)


def parse_step(raw: dict[str, Any], index: int) -> Step:
    where = f"step {index + 1}"
    action = raw.get("action")
    if action not in ACTIONS:
        raise ConfigError(f"{where}: action must be one of {', '.join(ACTIONS)}, got {action!r}")
    for key in ("at_s", *(() if action in _NO_NODE else ("broker",)), *_NEEDS.get(action, ())):
        if key not in raw:
            raise ConfigError(f"{where} ({action}) needs {key}")
    unknown = set(raw) - {"at_s", "action", "topic", "percent", "clients", *_INTS}
    if unknown:
        raise ConfigError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))}")
    if not isinstance(raw.get("clients", False), bool):
        raise ConfigError(f"{where}: clients must be true or false, got {raw['clients']!r}")
    try:
        ints = {key: None if raw.get(key) is None else int(raw[key]) for key in _INTS}
        return Step(float(raw["at_s"]), action, topic=raw.get("topic"), clients=raw.get("clients", False),
                    percent=None if raw.get("percent") is None else float(raw["percent"]), **ints)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_script(path: str | Path) -> Script:
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    steps = tuple(sorted((parse_step(s, i) for i, s in enumerate(data.pop("step", []))), key=lambda s: s.at_s))
    known = {"topic", "partitions", "replication_factor", "min_insync_replicas", "rate", "duration_s"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))}")
    return replace(Script(**data), steps=steps)


def apply(spec: cluster.ClusterSpec, step: Step) -> cluster.ClusterSpec:
    """Carry out one step against the cluster; returns the (possibly updated) cluster description."""
    if step.action in NETWORK_ACTIONS:
        _apply_network(spec, step)
        return spec
    if step.action in INSYNC_ONLY_ACTIONS and spec.engine != kafka_cluster.ENGINE_INSYNC:
        raise ConfigError(f"{step.action} is injected by insync nodes themselves; the cluster at {spec.directory} "
                          f"runs {spec.engine} (process and network faults work on it)")
    assert step.broker is not None
    node = spec.node(step.broker)
    if step.action == "pause":
        cluster.signal_node(spec, step.broker, signal.SIGSTOP)
    elif step.action == "resume":
        cluster.signal_node(spec, step.broker, signal.SIGCONT)
    elif step.action == "kill":
        return cluster.stop_node(spec, step.broker, deadline_s=0, sig=signal.SIGKILL)
    elif step.action == "restart":
        if node.roles == "broker" and spec.engine != kafka_cluster.ENGINE_INSYNC and not kafka_cluster.dist_for(
                spec.engine).kraft_only:
            zookeeper = kafka_cluster.ZooKeeperState(spec.node(0).address)  # node 0 runs ZooKeeper
            try:
                zookeeper.wait_registration_gone(step.broker)
            finally:
                zookeeper.close()
        spec = cluster.start_node(spec, step.broker)
        if node.roles != "controller" or len(spec.controllers) == 1:  # a standby controller does not listen
            cluster.wait_listening(spec.node(step.broker), spec.start_deadline_s)
    elif step.action == "crash":
        spec, _cut = power.crash(spec, step.broker)
    else:
        _apply_fault(node.directory, step)
    return spec


def _apply_network(spec: cluster.ClusterSpec, step: Step) -> None:
    if step.action == "heal":
        network.heal(spec)
    elif step.action == "latency":
        assert step.broker is not None and step.ms is not None
        network.shape(spec, step.broker, delay_ms=step.ms, jitter_ms=step.jitter_ms or 0,
                      loss_percent=step.percent or 0.0, clients=step.clients)
    elif step.action == "bandwidth":
        assert step.broker is not None and step.kbit is not None
        network.shape(spec, step.broker, rate_kbit=step.kbit)
    else:
        network.partition(spec, step.action, step.broker, step.peer,
                          100.0 if step.percent is None else step.percent, step.topic, step.partition)


def _apply_fault(directory: str, step: Step) -> None:
    current = faults.read_faults(directory)
    if step.action == "clear":
        updated = faults.FaultSpec()
    elif step.action == "slow-reads":
        assert step.topic is not None and step.partition is not None and step.ms is not None
        slow = dict(current.slow_reads_ms)
        slow[faults.partition_key(step.topic, step.partition)] = step.ms
        updated = replace(current, slow_reads_ms=slow)
    elif step.action == "fail-partition":
        assert step.topic is not None and step.partition is not None
        key = faults.partition_key(step.topic, step.partition)
        updated = replace(current, failed_partitions=tuple(sorted({*current.failed_partitions, key})))
    else:
        assert step.action == "delay" and step.ms is not None
        updated = replace(current, delay_ms=step.ms)
    faults.write_faults(directory, updated)


def run_script(spec: cluster.ClusterSpec, script: Script, log: Any = print) -> history.Verdict:
    ensure_topic(spec.bootstrap, script.topic, script.partitions, script.replication_factor,
                 {"min.insync.replicas": str(script.min_insync_replicas)})
    run_id = uuid.uuid4().hex[:8]
    workload = history.ProduceWorkload(spec.bootstrap, script.topic, script.rate, run_id)
    workload.start()
    start = time.monotonic()
    paused: set[int] = set()
    killed: set[int] = set()
    try:
        for step in script.steps:
            time.sleep(max(0.0, start + step.at_s - time.monotonic()))
            log(f"[{time.monotonic() - start:6.1f}s] {step.action}"
                + ("" if step.broker is None else f" broker {step.broker}"))
            spec = apply(spec, step)
            _track(step, paused, killed)
        time.sleep(max(0.0, start + script.duration_s - time.monotonic()))
    finally:
        if any(step.action in NETWORK_ACTIONS for step in script.steps):
            network.heal(spec)
        for broker in sorted(paused):
            spec = apply(spec, Step(0, "resume", broker))
        for broker in sorted(killed):
            spec = apply(spec, Step(0, "restart", broker))
        produced = workload.stop()
    return history.verdict(produced, history.read_back(spec.bootstrap, script.topic, run_id))


def _track(step: Step, paused: set[int], killed: set[int]) -> None:
    if step.broker is None:
        return
    if step.action == "pause":
        paused.add(step.broker)
    elif step.action == "resume":
        paused.discard(step.broker)
    elif step.action == "kill":
        killed.add(step.broker)
    elif step.action == "restart":
        killed.discard(step.broker)
