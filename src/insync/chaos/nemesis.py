"""The campaign's fault kinds: a registry from a name to how the fault starts and how it is undone.

A `FaultKind` starts against a `Target` (the running cluster and the workload's topic) given `pick`, a number
from the run's seed that chooses the victim, and returns an `Active` fault: its description and the `undo` that
ends it. Kinds that need the brokers' fault injection name its configs (`overrides`), so a campaign turns it on
only when asked for them. A new kind is one more entry in `KINDS`: `pause` (SIGSTOP, a long GC pause), `kill`
(a leader), `slow-reads` (KIP-501's slow leader), `fail-partition` (KIP-461; undone by a restart, since a failed
partition stays failed until then, as in Kafka), `delay`, `power-loss` (chaos/power.py), and `controller-kill` /
`controller-pause` (with a ZooKeeper standby, it takes over). Opt-in network kinds (`OPT_IN_KINDS`, not in
`all`, since they need a cluster in network namespaces: `needs_netns`) are `isolate`, `leader-cut`, `bridge`,
`ring`, `one-way`, `bandwidth`, `loss` and `latency`; they are undone by healing the network. Opt-in too:
`LOG_DIR_KINDS` (`disk-full`, `disk-error`), `clock-step` (a broker's wall clock stepped minutes) and
`txn-coordinator-kill` / `-pause` (`--txn`). On Kafka the `insync_only` kinds are skipped where they fall.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from insync.admin import admin_client
from insync.admin_requests import request
from insync.chaos import (
    clock_step,
    cluster,
    kafka_cluster,
    kafka_power,
    power,
    script,
    slow_disk,
    small_disk,
    txn_workload,
)
from insync.chaos.cluster import CONTROLLER_ID, ClusterSpec
from insync.config import ConfigError
from insync.protocol.kio import build, error_of, request_class
from insync.waiting import WaitTimeout, wait_until

INJECTION = ("fault.injection.enable=true",)
SMALL_DISK, FAILING_DISK = "small", "failing"  # chaos/small_disk.py's tmpfs, chaos/slow_disk.py's FUSE passthrough
SLOW_READ_MS = 3000
METADATA_WAIT_S = 10.0
DELAY_MS = 1500
BANDWIDTH_KBIT = 800  # 100 kB/s: below what the workload's replication needs, so followers fall behind
LOSS_PERCENT = 20.0  # on every link of one broker: TCP retransmits, requests slow down, nothing is cut
LATENCY_MS, JITTER_MS = 50, 10  # a slow wide-area link: every fetch round trip to the broker 50 ms longer
CLOCK_STEP_MS = 5 * 60_000  # far past every session timeout and replica.lag.time.max.ms


@dataclass
class Target:
    """The cluster as it is now (kill and restart change its pids) and the topic under the workload."""
    spec: ClusterSpec
    topic: str

    def apply(self, step: script.Step) -> None:
        self.spec = script.apply(self.spec, step)

    def heal(self, action: str, node_id: int) -> None:
        """`restart` or `resume` a node, unless overlapping faults already did or made it moot: a restart of a
        running node and a resume of a dead one are skipped."""
        assert action in ("restart", "resume"), action
        pid = self.spec.node(node_id).pid
        running = pid is not None and cluster.pid_alive(pid)
        if (action == "restart") != running:
            self.apply(script.Step(0, action, node_id))

    def replicas(self, pick: int) -> tuple[int, int, tuple[int, ...]]:
        """(partition, leader, replicas) of the partition `pick` chooses, from the live brokers' metadata. Just
        after a fault is undone a broker can answer without the topic's partitions or with no leader yet: asked
        again for up to `METADATA_WAIT_S`."""
        live = ",".join(b.address for b in self.spec.brokers if b.pid is not None)
        admin = admin_client(live)
        topic: Any = None  # the last answer

        def led() -> bool:
            nonlocal topic
            topic = admin.list_topics(self.topic, timeout=10).topics[self.topic]
            return bool(topic.partitions) and _chosen(topic, pick)[1].leader >= 0

        with contextlib.suppress(WaitTimeout):  # a partition without a leader yet is still a victim
            wait_until(led, METADATA_WAIT_S, f"a leader for the chosen partition of {self.topic}", interval_s=0.5)
        if not topic.partitions:
            raise ConfigError(f"no partitions of {self.topic} in the metadata after {METADATA_WAIT_S:g} s: "
                              f"{topic.error}")
        partition, metadata = _chosen(topic, pick)
        return partition, int(metadata.leader), tuple(int(r) for r in metadata.replicas)

    def broker(self, pick: int) -> int:
        return self.spec.brokers[pick % len(self.spec.brokers)].node_id


def _chosen(topic: Any, pick: int) -> tuple[int, Any]:
    """The partition `pick` chooses of a topic's metadata, and its metadata."""
    partition = sorted(topic.partitions)[pick % len(topic.partitions)]
    return partition, topic.partitions[partition]


@dataclass(frozen=True, slots=True)
class Active:
    description: str
    undo: Callable[[Target], None]


@dataclass(frozen=True, slots=True)
class FaultKind:
    name: str
    start: Callable[[Target, int], Active]
    overrides: tuple[str, ...] = ()  # broker configs the kind needs (its fault injection turned on)
    needs_netns: bool = False  # each node in its own network namespace (cluster.up's namespaces)
    log_dir_disk: str | None = None  # each broker's log dir on its own file system: SMALL_DISK or FAILING_DISK
    clock_steps: bool = False  # every node started with a steppable wall clock (chaos/clock_step.py)
    needs_txn: bool = False  # the workload's transactional producer (chaos/txn_workload.py)
    insync_only: bool = False  # injected by an insync node itself (its fault file): no way in from outside Kafka


def _pause(target: Target, pick: int) -> Active:
    broker = target.broker(pick)
    target.apply(script.Step(0, "pause", broker))
    return Active(f"pause broker {broker}", lambda t: t.heal("resume", broker))


def _kill(target: Target, pick: int) -> Active:
    partition, leader, _ = target.replicas(pick)
    if leader < 0:
        raise ConfigError(f"partition {partition} of {target.topic} has no leader to kill")
    target.apply(script.Step(0, "kill", leader))
    return Active(f"kill broker {leader} (leader of {partition})",
                  lambda t: t.heal("restart", leader))


def _slow_reads(target: Target, pick: int) -> Active:
    partition, leader, _ = target.replicas(pick)
    target.apply(script.Step(0, "slow-reads", leader, target.topic, partition, SLOW_READ_MS))
    return Active(f"slow reads of {partition} at broker {leader} ({SLOW_READ_MS} ms)",
                  lambda t: t.apply(script.Step(0, "clear", leader)))


def _fail_partition(target: Target, pick: int) -> Active:
    partition, leader, replicas = target.replicas(pick)
    follower = next(r for r in (*replicas[pick % len(replicas):], *replicas) if r != leader)
    target.apply(script.Step(0, "fail-partition", follower, target.topic, partition))

    def undo(t: Target) -> None:
        t.apply(script.Step(0, "clear", follower))
        t.spec = cluster.stop_node(t.spec, follower)
        t.heal("restart", follower)

    return Active(f"fail partition {partition} at follower {follower}", undo)


def _delay(target: Target, pick: int) -> Active:
    broker = target.broker(pick)
    target.apply(script.Step(0, "delay", broker, ms=DELAY_MS))
    return Active(f"delay broker {broker}'s replication {DELAY_MS} ms",
                  lambda t: t.apply(script.Step(0, "clear", broker)))


def _power_loss(target: Target, pick: int) -> Active:
    """insync's node loses what its journal says was not fsynced; a Kafka node, everything past its recovery points
    (chaos/kafka_power.py: Kafka does not record its syncs, so the worst case a power cut allows)."""
    partition, leader, _ = target.replicas(pick)
    if leader < 0:
        raise ConfigError(f"partition {partition} of {target.topic} has no leader to crash")
    if target.spec.engine != kafka_cluster.ENGINE_INSYNC:
        target.spec = kafka_power.crash(target.spec, leader)
        lost = "its logs cut to their recovery points"
    else:
        target.spec, cut = power.crash(target.spec, leader, restart=False)
        lost = f"{cut.bytes_lost} bytes not fsynced"
    return Active(f"power loss at broker {leader} (leader of {partition}, {lost})",
                  lambda t: t.heal("restart", leader))


def _disk_fault(name: str) -> Callable[[Target, int], Active]:
    """`disk-full` fills the log dir of a partition's leader (its small tmpfs) until writes fail with ENOSPC;
    `disk-error` makes every read and write of it fail with EIO (its FUSE passthrough). Either way the broker
    refuses what it could not write with KAFKA_STORAGE_ERROR and, its only log dir offline, halts; the others take
    over its leaderships. Undone by freeing the space or ending the errors and restarting the broker, which
    recovers its logs and catches up."""
    def start(target: Target, pick: int) -> Active:
        partition, leader, _ = target.replicas(pick)
        if leader < 0:
            raise ConfigError(f"partition {partition} of {target.topic} has no leader whose log dir to break")
        node = target.spec.node(leader)
        if name == "disk-full":
            what = f"fill the log dir of broker {leader} ({small_disk.fill(node.log_dir)} bytes)"
        else:
            slow_disk.write_errors(Path(node.directory), True)
            what = f"EIO on the log dir of broker {leader}"

        def undo(t: Target) -> None:
            if name == "disk-full":
                small_disk.free(node.log_dir)
            else:
                slow_disk.write_errors(Path(node.directory), False)
            t.heal("restart", leader)

        return Active(f"{what} (leader of {partition})", undo)
    return start


def _clock_step(target: Target, pick: int) -> Active:
    """A broker's wall clock stepped CLOCK_STEP_MS forward or back (the pick's parity chooses), its monotonic
    clock untouched: what an operator's `date -s` or NTP correcting a bad clock does. Undone by stepping it back."""
    broker = target.broker(pick)
    offset_ms = CLOCK_STEP_MS if pick % 2 == 0 else -CLOCK_STEP_MS
    clock_step.step(target.spec.node(broker).directory, offset_ms)
    return Active(f"step broker {broker}'s wall clock {offset_ms // 60_000:+d} min",
                  lambda t: clock_step.step(t.spec.node(broker).directory, 0))


def _controller(action: str, undo: str) -> Callable[[Target, int], Active]:
    """With several controllers (metadata.store=zookeeper) the fault hits the active one, and any controller a
    previous fault left dead (a paused one that lost its epoch stops itself when resumed) is started again
    first, as a standby, so that there is one to take over."""
    def start(target: Target, _pick: int) -> Active:
        controllers, victim = target.spec.controllers, CONTROLLER_ID
        if target.spec.engine != "insync" and len(controllers) != 1:
            # Kafka's KRaft voters all listen, so the active one cannot be told by its port; 3.x has no controller
            # process (node 0 is ZooKeeper).
            raise ConfigError(f"controller faults on {target.spec.engine} need one KRaft controller, "
                              f"this cluster has {len(controllers)}")
        if len(controllers) > 1:
            for node in controllers:
                target.heal("restart", node.node_id)
            victim = _active_controller(controllers)
        target.apply(script.Step(0, action, victim))
        return Active(f"{action} controller {victim}", lambda t: t.heal(undo, victim))
    return start


def _active_controller(controllers: tuple[cluster.NodeSpec, ...]) -> int:
    """The controller that listens (only the active one does), waited for up to `METADATA_WAIT_S` while a standby
    is still taking over; controller 0 when none does by then."""
    with contextlib.suppress(WaitTimeout):
        return wait_until(lambda: next((c for c in controllers if cluster.listening(c.port, c.host)), None),
                          METADATA_WAIT_S, "a controller listening").node_id
    return CONTROLLER_ID


KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("pause", _pause),
    FaultKind("kill", _kill),
    FaultKind("slow-reads", _slow_reads, INJECTION, insync_only=True),
    FaultKind("fail-partition", _fail_partition, INJECTION, insync_only=True),
    FaultKind("delay", _delay, INJECTION, insync_only=True),
    FaultKind("power-loss", _power_loss, (f"{power.POWER_LOSS_CONFIG}=true",)),
    FaultKind("controller-kill", _controller("kill", "restart")),
    FaultKind("controller-pause", _controller("pause", "resume")),
)}


def _network(action: str, on: str) -> Callable[[Target, int], Active]:
    """A network fault on a broker (`on="broker"`), on one partition (`"partition"`) or on the whole cluster."""
    def start(target: Target, pick: int) -> Active:
        if on == "broker":
            step = script.Step(0, action, target.broker(pick), kbit=BANDWIDTH_KBIT, ms=LATENCY_MS,
                               jitter_ms=JITTER_MS, percent=LOSS_PERCENT if action == "loss" else None)
        elif on == "partition":
            partition, leader, replicas = target.replicas(pick)
            followers = [r for r in replicas if r != leader]
            if leader < 0 or not followers:
                raise ConfigError(f"partition {partition} of {target.topic} has no leader and follower to cut")
            step = script.Step(0, action, leader, target.topic, partition, peer=followers[pick % len(followers)])
        else:
            step = script.Step(0, action, None)
        target.apply(step)
        where = {"broker": f" broker {step.broker}", "partition": f" partition {step.partition} (leader "
                 f"{step.broker}, follower {step.peer})"}.get(on, "")
        return Active(f"{action}{where}", lambda t: t.apply(script.Step(0, "heal", None)))
    return start


OPT_IN_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("isolate", _network("isolate", "broker"), needs_netns=True),
    FaultKind("leader-cut", _network("leader-cut", "partition"), needs_netns=True),
    FaultKind("bridge", _network("bridge", "cluster"), needs_netns=True),
    FaultKind("ring", _network("ring", "cluster"), needs_netns=True),
    FaultKind("one-way", _network("one-way", "partition"), needs_netns=True),
    FaultKind("bandwidth", _network("bandwidth", "broker"), needs_netns=True),
    FaultKind("loss", _network("loss", "broker"), needs_netns=True),
    FaultKind("latency", _network("latency", "broker"), needs_netns=True),
)}
# Opt-in too: each needs the brokers' log dirs on a file system of its own.
LOG_DIR_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("disk-full", _disk_fault("disk-full"), log_dir_disk=SMALL_DISK),
    FaultKind("disk-error", _disk_fault("disk-error"), log_dir_disk=FAILING_DISK),
)}
# Opt-in: it needs a C compiler to build the clock-step library, and the nodes started with it preloaded.
CLOCK_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("clock-step", _clock_step, clock_steps=True),
)}


def _txn_coordinator(action: str, undo: str) -> Callable[[Target, int], Active]:
    """The broker coordinating the transactional producer's transactional.id (FindCoordinator's answer, asked for
    up to `METADATA_WAIT_S` while none is named), which is what the producer's commits and aborts go through."""
    def start(target: Target, _pick: int) -> Active:
        transactional_id = txn_workload.transactional_id(target.topic, txn_workload.PROCESS)
        victim = wait_until(lambda: _coordinator(target.spec, transactional_id), METADATA_WAIT_S,
                            f"a coordinator for {transactional_id}", interval_s=0.5)
        target.apply(script.Step(0, action, victim))
        return Active(f"{action} broker {victim} (transaction coordinator)", lambda t: t.heal(undo, victim))
    return start


def _coordinator(spec: ClusterSpec, transactional_id: str) -> int | None:
    """FindCoordinator v4 (key type 1, a transactional id) to a live broker: the node it names, or None."""
    body = build(request_class(10, 4), key_type=1, coordinator_keys=(transactional_id,))
    for broker in (b for b in spec.brokers if b.pid is not None and cluster.pid_alive(b.pid)):
        with contextlib.suppress(OSError, ConfigError):
            (answer,) = request(broker.address, body, 5).coordinators
            return int(answer.node_id) if error_of(answer.error_code).name == "NONE" else None
    return None


# Opt-in: they need the transactional producer (`--txn`), whose coordinator they hit.
TXN_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    FaultKind("txn-coordinator-kill", _txn_coordinator("kill", "restart"), needs_txn=True),
    FaultKind("txn-coordinator-pause", _txn_coordinator("pause", "resume"), needs_txn=True),
)}
REGISTRY: dict[str, FaultKind] = {**KINDS, **OPT_IN_KINDS, **LOG_DIR_KINDS, **CLOCK_KINDS, **TXN_KINDS}


def parse_kinds(text: str) -> tuple[str, ...]:
    """`--faults kill,pause,...` checked against the registry; `all` is every kind but the opt-in ones, on every
    engine (on Kafka the `insync_only` ones are skipped where they fall, so one seed plans the same schedule)."""
    names = tuple(KINDS) if text.strip() == "all" else tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in REGISTRY]
    if unknown or not names:
        raise ConfigError(f"--faults: unknown fault kind{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                          f"known: {', '.join(REGISTRY)}" if unknown else "--faults names no fault kind")
    return tuple(dict.fromkeys(names))
