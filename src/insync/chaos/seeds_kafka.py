"""The seed scenarios on a real Apache Kafka cluster: `insync chaos seeds --engine kafka:VERSION`.

Kafka writes no events.jsonl, so a Kafka run's figures come from what an operator of Kafka sees: every broker's own
metadata, asked all along by the run's metadata watch and merged into one history per partition (`consolidate`),
and the brokers' server.log for what only the leader knows: each ISR shrink's `lastCaughtUpTimeMs`, and each
produce it refused NOT_ENOUGH_REPLICAS. The history is written as insync's events (`isr_shrink`, `isr_expand`,
`leader_change`, ...), so the seed's claims and table judge a Kafka run as they judge insync's. A removal is
"lag" when the leader logged it (Kafka has one rule: not caught up for `replica.lag.time.max.ms`) and "fenced"
when the controller made it (a broker fenced or shut down). A step Kafka has no hook for (insync's fault file:
slow reads, a failing partition, delayed fetches) makes a seed unavailable on Kafka, with the reason.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from insync.chaos import cluster, kafka_cluster, slow_disk
from insync.chaos import history as workload_history
from insync.chaos.seed_model import LAG_REMOVAL, RealSeed, SeedRun
from insync.events import LeaderChangeReason

CONTROLLER_REMOVAL = "fenced"
# insync's own keys among the seeds' broker settings: Kafka would only warn that it does not know them.
INSYNC_ONLY_KEYS = ("isr.change.propagation.", "fault.injection.", "follower.fetch.pending.reads.insync.enable",
                    "replica.lag.max.messages", "eligible.leader.replicas.enable")
KRAFT_ONLY_KEYS = ("broker.session.timeout.ms", "broker.heartbeat.interval.ms")
ZOOKEEPER_SESSION_KEY = "zookeeper.session.timeout.ms"
SEGMENT_BYTES_KEY = "log.segment.bytes"
KAFKA_4_SEGMENT_BYTES_MIN = 1024 * 1024  # Kafka 4 refuses smaller segments at start-up
NO_HOOK = {"fail-partition": "a failing partition needs insync's fault file",
           "delay": "delayed fetch answers need insync's fault file"}
# A shrink's server.log line is matched to the removal the watch saw up to this long after it.
SHRINK_LINE_SLACK_MS = 2000
# A leader move within this long after a clean stop began is the stop's (controlled shutdown).
SHUTDOWN_WINDOW_MS = 30_000
_LINE_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_SHRINK = re.compile(r"\[Partition (\S+)-(\d+) broker=(\d+)\] Shrinking ISR from [0-9,]* to [0-9,]*\."
                     r".*Out of sync replicas: (.*)$")
_OUT_OF_SYNC = re.compile(r"brokerId: (\d+), endOffset: -?\d+, lastCaughtUpTimeMs: (-?\d+)")


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition as the brokers' metadata showed it from `ts_ms`."""

    ts_ms: int
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Fired:
    """A fault the harness made: when it began and ended (a clean stop ends when the process has exited)."""

    action: str
    broker: int
    start_ms: int
    end_ms: int


def unavailable(seed: RealSeed, kraft: bool) -> str | None:
    """Why `seed` cannot run on a Kafka (KRaft or ZooKeeper mode), or None when every step of it can be made from
    outside a Kafka process and Kafka can be set as the seed sets insync."""
    missing = sorted({step.action for step in seed.steps if step.action in NO_HOOK})
    no_slow_disk = slow_disk.unavailable() if any(step.action == "slow-reads" for step in seed.steps) else None
    if no_slow_disk:
        missing.append(f"slow reads need a slow disk under Kafka's log.dirs: {no_slow_disk}")
    if seed.name.startswith("bursty-producer-count"):
        return "Kafka has no count rule since 0.9 (replica.lag.max.messages is gone; seed 001)"
    if "eligible.leader.replicas.enable=true" in seed.configs and not kraft:
        return "ZooKeeper-mode Kafka has no ELR (KIP-966 came with KRaft, in 4.0)"
    if "eligible.leader.replicas.enable=false" in seed.configs and kraft and not missing:
        return "Kafka 4.x turns ELR off only as a metadata feature (eligible.leader.replicas.version), not a setting"
    return "; ".join(NO_HOOK.get(action, action) for action in missing) or None


def mount_slow_disks(seed: RealSeed, directory: Path) -> dict[Path, subprocess.Popen[bytes]]:
    """A slow disk (chaos/slow_disk.py) under each broker's log.dirs when the seed slows reads (the leader is
    known only once the cluster runs), none otherwise; what is mounted is unmounted if a later one fails."""
    if not any(step.action == "slow-reads" for step in seed.steps):
        return {}
    disks: dict[Path, subprocess.Popen[bytes]] = {}
    try:
        for broker in range(1, seed.brokers + 1):
            node_dir = Path(directory).resolve() / f"node-{broker}"
            disks[node_dir] = slow_disk.mount(node_dir)
    except BaseException:
        unmount_slow_disks(disks)
        raise
    return disks


def unmount_slow_disks(disks: Mapping[Path, subprocess.Popen[bytes]]) -> None:
    for node_dir, process in disks.items():
        slow_disk.unmount(node_dir, process)


def kafka_configs(configs: Iterable[str], kraft: bool) -> list[str]:
    """The seed's broker settings as Kafka takes them: insync's own keys dropped; in ZooKeeper mode the broker
    session is ZooKeeper's, and heartbeats are ZooKeeper's too; segments no smaller than Kafka 4 allows."""
    out = []
    for entry in configs:
        key, _, value = entry.partition("=")
        if key.startswith(INSYNC_ONLY_KEYS):
            continue
        if key in KRAFT_ONLY_KEYS and not kraft:
            if key == "broker.session.timeout.ms":
                out.append(f"{ZOOKEEPER_SESSION_KEY}={value}")
            continue
        if key == SEGMENT_BYTES_KEY and kraft:
            entry = f"{key}={max(int(value), KAFKA_4_SEGMENT_BYTES_MIN)}"
        out.append(entry)
    return out


def consolidate(seen: Sequence[Mapping[str, Any]]) -> list[PartitionState]:
    """One history per partition from every broker's answers (`seen`: each change of one broker's answer, in time
    order). A newer leader epoch is always news. At the same epoch, an answer is news only from a broker that was
    up to date (its previous answer was the partition's state): a broker paused or cut off answers from its old
    metadata when it is back, which is behind, not news; at an older epoch it never is."""
    current: dict[int, PartitionState] = {}
    answered: dict[tuple[int, int], PartitionState] = {}  # (broker, partition) -> its last answer
    history: list[PartitionState] = []
    for entry in sorted(seen, key=lambda e: e["ts_ms"]):
        state = PartitionState(int(entry["ts_ms"]), int(entry["partition"]), int(entry["leader"]),
                               int(entry["leader_epoch"]), tuple(entry["isr"]), tuple(entry.get("elr", ())))
        key = (int(entry["broker"]), state.partition)
        previous, now = answered.get(key), current.get(state.partition)
        answered[key] = state
        if now is None or state.leader_epoch > now.leader_epoch or (
                state.leader_epoch == now.leader_epoch and _same(previous, now) and not _same(state, now)):
            current[state.partition] = state
            history.append(state)
    return history


def _same(a: PartitionState | None, b: PartitionState) -> bool:
    return a is not None and (a.leader, a.leader_epoch, sorted(a.isr), sorted(a.elr)) == (
        b.leader, b.leader_epoch, sorted(b.isr), sorted(b.elr))


def events(history: Sequence[PartitionState], fired: Sequence[Fired], caught_up: Mapping[tuple[int, int], list[
        tuple[int, int]]]) -> list[dict[str, Any]]:
    """insync's events for the history: leader changes (with the reason the faults say), ISR shrinks and
    expansions, offline and online; `caught_up` is `shrink_lines`' answer."""
    out: list[dict[str, Any]] = []
    before: dict[int, PartitionState] = {}
    for state in history:
        old = before.get(state.partition)
        before[state.partition] = state
        base = {"ts_ms": state.ts_ms, "partition": state.partition}
        if old is None:
            out.append({**base, "type": "leader_change", "leader_before": -1, "leader_after": state.leader,
                        "isr": list(state.isr), "elr": list(state.elr), "reason": LeaderChangeReason.CREATED.value})
            continue
        if (state.leader, state.leader_epoch) != (old.leader, old.leader_epoch):
            out.append({**base, "type": "leader_change", "leader_before": old.leader, "leader_after": state.leader,
                        "isr": list(state.isr), "elr": list(state.elr), "reason": _reason(old, state, fired)})
            if (state.leader < 0) != (old.leader < 0):
                out.append({**base, "type": "partition_offline" if state.leader < 0 else "partition_online"})
        removed = [b for b in old.isr if b not in state.isr]
        added = [b for b in state.isr if b not in old.isr]
        change = {**base, "isr_before": list(old.isr), "isr_after": list(state.isr), "leader_epoch": state.leader_epoch}
        if removed:
            out.append({**change, "type": "isr_shrink",
                        "removed": [_removal(state, b, caught_up) for b in removed]})
        if added:
            out.append({**change, "type": "isr_expand", "added": [{"broker": b} for b in added]})
    return out


def _reason(old: PartitionState, new: PartitionState, fired: Sequence[Fired]) -> str:
    """Why the leader changed: unclean when the new one was in neither the ISR nor the ELR; shutdown when its old
    leader was being stopped cleanly; fenced otherwise (killed, paused, cut off)."""
    if new.leader >= 0 and new.leader not in old.isr and new.leader not in old.elr:
        return LeaderChangeReason.UNCLEAN.value
    if any(f.action == "stop" and f.broker == old.leader and f.start_ms <= new.ts_ms <= f.end_ms + SHUTDOWN_WINDOW_MS
           for f in fired):
        return LeaderChangeReason.SHUTDOWN.value
    return LeaderChangeReason.FENCED.value


def _removal(state: PartitionState, broker: int, caught_up: Mapping[tuple[int, int], list[tuple[int, int]]]
             ) -> dict[str, Any]:
    """A leader's removal, with the last caught-up time its server.log line gives; without such a line the
    controller removed the broker (fenced or shut down)."""
    logged = [(line_ms, last_ms) for line_ms, last_ms in caught_up.get((state.partition, broker), ())
              if line_ms <= state.ts_ms + SHRINK_LINE_SLACK_MS]
    if not logged:
        return {"broker": broker, "reason": CONTROLLER_REMOVAL}
    return {"broker": broker, "reason": LAG_REMOVAL, "last_caught_up_ms": logged[-1][1]}


def shrink_lines(lines: Iterable[str], topic: str) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(partition, broker) -> [(time of the leader's `Shrinking ISR` line, the broker's `lastCaughtUpTimeMs`)] of
    `topic`, from server.log lines (Kafka logs in local time, as this machine's clock reads it)."""
    found: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for line in lines:
        shrink, stamp = _SHRINK.search(line), _LINE_TIME.match(line)
        if shrink is None or stamp is None or shrink.group(1) != topic:
            continue
        line_ms = int(datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)
        for broker, last_ms in _OUT_OF_SYNC.findall(shrink.group(4)):
            found.setdefault((int(shrink.group(2)), int(broker)), []).append((line_ms, int(last_ms)))
    return found


def refused(lines: Iterable[str], topic: str) -> int:
    """Produces of `topic` the brokers refused NOT_ENOUGH_REPLICAS (ReplicaManager logs each with its exception)."""
    marker = f"for partition {topic}-"
    return sum(1 for line in lines if "NotEnoughReplicas" in line and marker in line)


def server_lines(directories: Iterable[Path]) -> list[str]:
    """Every node's server.log lines (the rotated files too, oldest first)."""
    lines: list[str] = []
    for directory in directories:
        for path in sorted(directory.glob("server.log*"), key=lambda p: (p.name != "server.log", p.name),
                           reverse=True):
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return lines


def intervals_s(history: Sequence[PartitionState], end_ms: int, replication_factor: int, min_isr: int
                ) -> tuple[float, float, float]:
    """Partition-seconds under-replicated, under min ISR and offline, from each partition's history to `end_ms`."""
    totals = [0, 0, 0]
    by_partition: dict[int, list[PartitionState]] = {}
    for state in history:
        by_partition.setdefault(state.partition, []).append(state)
    for states in by_partition.values():
        for state, until in zip(states, [*(s.ts_ms for s in states[1:]), end_ms], strict=True):
            held = until - state.ts_ms
            totals[0] += held if len(state.isr) < replication_factor else 0
            totals[1] += held if len(state.isr) < min_isr else 0
            totals[2] += held if state.leader < 0 else 0
    urp, under_min, offline = (round(t / 1000, 1) for t in totals)
    return urp, under_min, offline


def fenced_events(fired: Sequence[Fired]) -> list[dict[str, Any]]:
    """A clean stop's end as insync's `broker_fenced` (the broker let go), which the rolling-restart claim reads."""
    return [{"ts_ms": f.end_ms, "type": "broker_fenced", "broker_id": f.broker} for f in fired if f.action == "stop"]


def seed_run(seed: RealSeed, spec: cluster.ClusterSpec, seen: Sequence[Mapping[str, Any]], fired: Sequence[Fired],
             verdict: workload_history.Verdict, end_ms: int) -> SeedRun:
    """A Kafka run as a `SeedRun`: the watch's history as events, the brokers' server.log for the shrinks' last
    caught-up times and the refused produces, the read-back's verdict; its side names the Kafka version."""
    partitions = consolidate(seen)
    lines = server_lines(Path(node.directory) for node in spec.brokers)
    made = [*events(partitions, fired, shrink_lines(lines, seed.name)), *fenced_events(fired)]
    urp, under_min, offline = intervals_s(partitions, end_ms, seed.replication_factor, seed.min_isr)
    return SeedRun(f"kafka {kafka_cluster.engine_version(spec.engine)}", seed.lag_ms,
                   tuple(sorted(made, key=lambda e: e["ts_ms"])), verdict.acked, verdict.lost, verdict.duplicated,
                   refused(lines, seed.name), urp, under_min, offline, seen=tuple(dict(e) for e in seen))
