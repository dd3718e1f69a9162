"""`insync chaos campaign`: runs of the Jepsen-style workload under a fault schedule drawn from a seed.

Run r of a campaign with seed S has seed S + r, and everything random in it comes from that seed: `plan_run`
draws the schedule (kinds, times, durations, victims chosen by role and number), so `--runs 1 --seed S+r`
replays run r even where the leader moved. The first fault of a run is kind `seed % len(kinds)`, so N consecutive
runs cover N kinds; within a run every kind comes once before any comes again. Faults come one at a time (or in
`--concurrent-faults` lanes), the last ending `COOLDOWN_S` before the run does, so the cluster heals while the
workload still runs. Each run starts its own cluster under `<out>/run-<r>/cluster` (with `zookeeper`, two
controllers and a ZooKeeper of its own, so controller faults hand over), creates a topic (RF 3, min ISR 2, no
unclean election), runs the workload (chaos/workload.py) and the faults into `history.jsonl`, reads every
partition completely, checks the history (chaos/checker.py) and writes the report. A run is ok when no anomaly
the producers' guarantees forbid was found; `<out>/campaign.json` and `<out>/index.html` hold the totals.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from insync.admin import ensure_topic
from insync.chaos import checker, clock_step, cluster, nemesis, report, slow_disk, small_disk, workload
from insync.chaos.history import CLIENT_LOGGER
from insync.chaos.ops import HistoryWriter, Op, read_history
from insync.chaos.zookeeper import ZooKeeperServer
from insync.config import ConfigError

WARMUP_S = 3.0
COOLDOWN_S = 6.0
HOLD_S = (2.0, 6.0)
GAP_S = (1.0, 3.0)
FAULTS_PER_RUN_MAX = 100
CONCURRENCY_MAX = 3
ZOOKEEPER_SESSION_MS = 2000  # how long a paused or killed active controller keeps its znode before a standby wins
PARTITIONS = 3
BROKERS = 3
SMALL_DISK_MB = 64  # room for a run's segments many times over; `disk-full` fills the rest
OVERRIDES = (
    "replica.lag.time.max.ms=4000",
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.fetch.backoff.ms=200",
    "unclean.leader.election.enable=false",
)


@dataclass(frozen=True, slots=True)
class Planned:
    at_s: float
    kind: str
    hold_s: float
    pick: int


@dataclass(frozen=True, slots=True)
class RunPlan:
    run: int
    seed: int
    duration_s: float
    faults: tuple[Planned, ...]
    zookeeper: bool = False  # metadata.store=zookeeper with a standby controller and a ZooKeeper server of its own
    engine: str = "insync"  # or `kafka:<version>`: the same runs on real Kafka (chaos/kafka_cluster.py)
    txn: bool = False  # the workload has a transactional producer too (chaos/txn_workload.py)


@dataclass(frozen=True, slots=True)
class RunResult:
    plan: RunPlan
    check: checker.Check
    directory: str
    elapsed_s: float
    client_errors: tuple[str, ...] = ()
    error: str | None = None  # the harness failed (e.g. a broker that would not start again)
    skipped: tuple[str, ...] = ()  # kinds the schedule has that this engine cannot be given (`insync_only` on Kafka)

    @property
    def ok(self) -> bool:
        return self.check.ok and self.error is None

    def to_json(self, ops: Sequence[Op]) -> dict[str, Any]:
        """results.json: the plan, the verdict, the counts, the first anomalies and the per-second series."""
        check = self.check
        return {
            "run": self.plan.run, "seed": self.plan.seed, "duration_s": self.plan.duration_s,
            "metadata_store": "zookeeper" if self.plan.zookeeper else "kraft", "engine": self.plan.engine,
            "elapsed_s": round(self.elapsed_s, 1), "ok": self.ok, "error": self.error,
            "forbidden": len(check.forbidden),
            "schedule": [asdict(p) for p in self.plan.faults],
            "faults": [{"fault": f, "start_ms": round(a, 1), "stop_ms": round(b, 1)} for f, a, b in check.faults],
            "skipped": list(self.skipped),
            "sends": check.sends, "transactions": check.transactions, "reads": check.reads, "complete_partitions": list(check.complete_partitions),
            "anomalies": check.counts, "anomalies_by_label": check.counts_by_label(),
            "client_errors": list(self.client_errors),
            "examples": check.examples(report.ANOMALIES_SHOWN),
            "series": report.series(ops),
        }


def plan_run(run: int, seed: int, duration_s: float, kinds: Sequence[str], concurrency: int = 1,
             zookeeper: bool = False) -> RunPlan:
    """`concurrency` lanes of faults, each one fault at a time; lane l starts `l * HOLD_S[0]` later, so with
    several lanes faults overlap (Jepsen's composed nemeses)."""
    assert kinds and duration_s > 0 and 1 <= concurrency <= CONCURRENCY_MAX, (kinds, duration_s, concurrency)
    rng = random.Random(seed)
    first = kinds[seed % len(kinds)]
    rest = [k for k in kinds if k != first]
    rng.shuffle(rest)
    order = [first, *rest]  # every kind once before any repeats
    faults: list[Planned] = []
    for lane in range(concurrency):
        at_s = WARMUP_S + lane * HOLD_S[0]
        while len(faults) < FAULTS_PER_RUN_MAX:
            hold_s = round(rng.uniform(*HOLD_S), 1)
            if at_s + hold_s > duration_s - COOLDOWN_S:
                break
            faults.append(Planned(round(at_s, 1), order[len(faults) % len(order)], hold_s, rng.randrange(1 << 16)))
            at_s += hold_s + rng.uniform(*GAP_S)
    return RunPlan(run, seed, duration_s, tuple(sorted(faults, key=lambda f: f.at_s)), zookeeper)


def plan_campaign(runs: int, seed: int, duration_s: float, kinds: Sequence[str], concurrency: int = 1,
                  zookeeper: bool = False, engine: str = "insync", txn: bool = False) -> tuple[RunPlan, ...]:
    networked = [kind for kind in kinds if nemesis.REGISTRY[kind].needs_netns]
    if zookeeper and networked:
        raise ConfigError(f"{', '.join(networked)} need a cluster in network namespaces, and metadata.store="
                          "zookeeper does not run in them (its ZooKeeper server listens on 127.0.0.1): drop "
                          "--zookeeper or those kinds")
    _check_log_dir_disks(kinds)
    transactional = [kind for kind in kinds if nemesis.REGISTRY[kind].needs_txn]
    if transactional and not txn:
        raise ConfigError(f"{', '.join(transactional)} hit the transactional producer's coordinator: add --txn")
    stepped = [kind for kind in kinds if nemesis.REGISTRY[kind].clock_steps]
    if stepped and (reason := clock_step.unavailable()) is not None:
        raise ConfigError(f"{', '.join(stepped)}: {reason}")
    if zookeeper and engine != "insync":
        raise ConfigError("--zookeeper is insync's ZooKeeper metadata store; Kafka with ZooKeeper is --engine kafka:3.9")
    return tuple(replace(plan_run(r, seed + r, duration_s, kinds, concurrency, zookeeper), engine=engine, txn=txn)
                 for r in range(runs))


def _check_log_dir_disks(kinds: Sequence[str]) -> None:
    """The kinds that put the brokers' log dirs on a file system of their own: one such file system per run,
    one that can be made here, under each broker's log dir (`node-<id>/data`, on insync and on Kafka)."""
    needs = {name: nemesis.REGISTRY[name].log_dir_disk for name in kinds if nemesis.REGISTRY[name].log_dir_disk}
    if not needs:
        return
    if len(set(needs.values())) > 1:
        raise ConfigError(f"{' and '.join(needs)} each put the log dirs on a file system of their own: run them "
                          "in separate campaigns")
    reason = small_disk.unavailable() if nemesis.SMALL_DISK in needs.values() else slow_disk.unavailable()
    if reason is not None:
        raise ConfigError(f"{', '.join(needs)}: {reason}")


def run_one(plan: RunPlan, out: Path, rate: float = 300.0) -> RunResult:
    """One run on its own cluster. If the harness itself fails, the run is not ok and says why; its history up to
    then is still checked, and the campaign goes on with the next run."""
    directory = out / f"run-{plan.run}"
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    history = HistoryWriter(directory / "history.jsonl")
    clients_log = _clients_log(directory / "clients.log")
    errors: tuple[str, ...] = ()
    error = None
    try:
        errors = _under_faults(plan, directory, history, rate)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        logging.getLogger(CLIENT_LOGGER).removeHandler(clients_log)
        clients_log.close()
        history.close()
    ops = read_history(directory / "history.jsonl")
    skipped = tuple(op.fault for op in ops if op.f == "skip" and op.fault is not None)
    result = RunResult(plan, checker.check(ops), str(directory), time.monotonic() - started, errors, error, skipped)
    report.write(directory, result.to_json(ops))
    return result


def _under_faults(plan: RunPlan, directory: Path, history: HistoryWriter, rate: float) -> tuple[str, ...]:
    """ZooKeeper (when the plan asks for it) and the cluster up, then the workload under the faults; returns the
    clients' own errors."""
    kinds = [nemesis.REGISTRY[p.kind] for p in plan.faults]
    overrides = node_overrides(plan)
    with contextlib.ExitStack() as stack:
        controllers = 1
        if plan.zookeeper:
            zk = stack.enter_context(ZooKeeperServer(directory / "zookeeper", cluster.free_ports(1)[0]))
            overrides += ["metadata.store=zookeeper", f"zookeeper.connect={zk.connect('/insync')}",
                          f"zookeeper.session.timeout.ms={ZOOKEEPER_SESSION_MS}"]
            controllers = 2
        node_dirs = [(directory / "cluster" / f"node-{b}").resolve() for b in range(1, BROKERS + 1)]
        disks = {k.log_dir_disk for k in kinds}
        if nemesis.SMALL_DISK in disks:
            stack.enter_context(small_disk.mounted([d / "data" for d in node_dirs], SMALL_DISK_MB))
        if nemesis.FAILING_DISK in disks:
            stack.enter_context(slow_disk.mounted(node_dirs))
        spec = cluster.up(str(directory / "cluster"), BROKERS, 0, overrides, controllers,
                          namespaces=any(k.needs_netns for k in kinds), engine=plan.engine,
                          clock_steps=any(k.clock_steps for k in kinds))
        return _workload_under_faults(plan, directory, history, rate, spec)


def node_overrides(plan: RunPlan) -> list[str]:
    """The nodes' configs: the campaign's own, and on insync those that turn on the planned kinds' fault injection
    (a Kafka node would only warn of configs it does not know)."""
    overrides = [*OVERRIDES]
    if plan.engine == "insync":
        overrides += dict.fromkeys(o for p in plan.faults for o in nemesis.REGISTRY[p.kind].overrides)
    return overrides


def _workload_under_faults(plan: RunPlan, directory: Path, history: HistoryWriter, rate: float,
                           spec: cluster.ClusterSpec) -> tuple[str, ...]:
    """The workload and the faults, the final read, cluster down."""
    try:
        topic = f"chaos-{plan.seed}"
        ensure_topic(spec.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        target = nemesis.Target(spec, topic)
        clients = workload.Workload(spec.bootstrap, workload.WorkloadSpec(topic, rate, txn=plan.txn,
                                                                          partitions=PARTITIONS, seed=plan.seed),
                                    history)
        clients.start()
        try:
            _play(plan, target, history)
        finally:
            clients.stop()
        if plan.txn:  # the aborted records are in the log: shown, not judged
            workload.final_read(target.spec.bootstrap, topic, history, "final-ru", workload.READ_UNCOMMITTED)
        workload.final_read(target.spec.bootstrap, topic, history)
        return tuple(clients.errors)
    finally:
        cluster.down(cluster.ClusterSpec.load(directory / "cluster"), cluster.STOP_DEADLINE_S)


def _clients_log(path: Path) -> logging.Handler:
    """librdkafka's lines during the run (connection refused while a broker is down...) go to clients.log,
    not to the terminal: they are expected under faults, and kept for when a run goes wrong."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger(CLIENT_LOGGER)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return handler


def _play(plan: RunPlan, target: nemesis.Target, history: HistoryWriter) -> None:
    """The schedule, in time: each fault started, and undone once held for its `hold_s` from when it actually
    began (starting and undoing take time, and a late start must not cut a fault short); several may be active at
    once. Whatever is still active when the run's duration is over is undone then, the latest first."""
    queue = [(p.at_s, 1, i) for i, p in enumerate(plan.faults)]  # (at, start?, fault): stops first at one time
    heapq.heapify(queue)
    start = time.monotonic()
    active: dict[int, nemesis.Active] = {}
    try:
        while queue and queue[0][0] < plan.duration_s:  # bounded: each fault comes back once, as its stop
            at_s, is_start, i = heapq.heappop(queue)
            time.sleep(max(0.0, start + at_s - time.monotonic()))
            if not is_start:
                _undo(active.pop(i), target, history)
                continue
            kind = nemesis.REGISTRY[plan.faults[i].kind]
            if kind.insync_only and target.spec.engine != "insync":
                history.append("nemesis", "info", "skip", fault=kind.name,
                               error=f"injected by an insync node itself: no way in on {target.spec.engine}")
                continue
            try:
                active[i] = kind.start(target, plan.faults[i].pick)
            except Exception as exc:  # e.g. no leader to kill right now: the run goes on, the history says so
                history.append("nemesis", "fail", "start", fault=plan.faults[i].kind, error=repr(exc))
                continue
            history.append("nemesis", "info", "start", fault=active[i].description)
            heapq.heappush(queue, (time.monotonic() - start + plan.faults[i].hold_s, 0, i))
        time.sleep(max(0.0, start + plan.duration_s - time.monotonic()))
    finally:
        for i in reversed(list(active)):
            _undo(active.pop(i), target, history)


def _undo(active: nemesis.Active, target: nemesis.Target, history: HistoryWriter) -> None:
    active.undo(target)
    history.append("nemesis", "info", "stop", fault=active.description)


def run_campaign(plans: Sequence[RunPlan], out: Path, rate: float = 300.0,
                 each: Callable[[RunResult], None] = lambda _r: None) -> list[RunResult]:
    """The runs one after another; `<out>/campaign.json` (the totals so far) and `<out>/index.html` (the same,
    linking to each run's report) are rewritten after each. A run directory left by an earlier campaign is refused:
    its cluster's logs would be the new cluster's, and every value read twice."""
    earlier = sorted(str(out / f"run-{p.run}") for p in plans if (out / f"run-{p.run}").exists())
    if earlier:
        raise ConfigError(f"--out {out} already holds {', '.join(earlier)} from an earlier campaign: choose another "
                          "directory or remove them")
    results: list[RunResult] = []
    started = time.monotonic()
    for plan in plans:
        results.append(run_one(plan, out, rate))
        totals = summary(results, time.monotonic() - started)
        (out / "campaign.json").write_text(json.dumps(totals, indent=1))
        (out / "index.html").write_text(report.index(totals))
        each(results[-1])
    return results


def summary(results: Sequence[RunResult], elapsed_s: float) -> dict[str, Any]:
    totals: Counter[str] = Counter()
    by_label: dict[str, Counter[str]] = defaultdict(Counter)
    for result in results:
        totals.update(result.check.counts)
        for label, kinds in result.check.counts_by_label().items():
            by_label[label].update(kinds)
    return {
        "runs": len(results), "elapsed_s": round(elapsed_s, 1), "ok_runs": sum(1 for r in results if r.ok),
        "forbidden": sum(len(r.check.forbidden) for r in results),
        "faults": sum(len(r.check.faults) for r in results), "skipped": sum(len(r.skipped) for r in results),
        "acked": sum(r.check.sends.get("ok", 0) for r in results),
        "anomalies": {kind: totals[kind] for kind in checker.KINDS},
        "anomalies_by_label": {label: dict(kinds) for label, kinds in sorted(by_label.items())},
        "per_run": [{"run": r.plan.run, "seed": r.plan.seed, "ok": r.ok, "error": r.error,
                     "elapsed_s": round(r.elapsed_s, 1), "faults": [f for f, _, _ in r.check.faults],
                     "skipped": list(r.skipped),
                     "anomalies": r.check.counts, "transactions": r.check.transactions} for r in results],
    }
