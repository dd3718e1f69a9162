"""Fault plans: scripted faults from a scenario's `[[faults]]`, and random ones from its `[chaos]` table.

A scripted fault has `at_s`, `kind`, `target` (a broker id, or `"leader"` / `"follower"` / `"follower2"` of
`partition` resolved when it fires, so a plan need not know the placement) and kind-specific fields. Kinds:
`pause` (a GC pause: nothing runs, messages wait), `kill` (only fsynced data survives, `torn_tail` keeps a random
prefix of the last append; restarts after `restart_after_s`), `wipe` (back on an empty disk, a replaced one),
`stop` (controlled shutdown, then every log flushed), `isolate` (`one_way`: only what it sends is lost),
`partition` (`side_a`, `side_b`), `clog` and `swizzle` (FoundationDB's clogging), `throttle` (`bytes_per_ms` into the
broker: a slow follower), `latency` (its links take `ms` +/- `jitter_ms`, netem's terms; `one_way`: what it sends),
`slow_reads` (`ms`), `io_error` (EIO on the partition's files), `disk_full` (ENOSPC on the log dir: it halts; healed
by space and a restart), `delete_records` (`offset` or `"hw"`). `every_s` and `until_s` repeat a fault (churn); a
`duration_s` of 0 or absent lasts until the quiesce phase. `[chaos]` draws faults (`kinds`, `targets`, `gap_s`,
`duration_s`, `slow_read_ms`, `until_s`) one at a time, so RF 3 and min ISR 2 lose nothing, and a power loss waits
for the last one's broker to be in all ISRs (copies keep data, not fsync)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from insync.config import ConfigError
from insync.sim.network import LINK_LATENCY_MS_MAX
from insync.sim.scheduler import Scheduler
from insync.types import TopicPartition

KINDS = frozenset({"pause", "kill", "wipe", "stop", "isolate", "partition", "clog", "swizzle", "slow_reads",
                   "io_error", "disk_full", "delete_records", "throttle", "latency"})
CHAOS_KINDS = frozenset({"pause", "kill", "wipe", "stop", "isolate", "clog", "swizzle", "slow_reads", "disk_full"})
FAULTS_PER_RUN_MAX = 100_000
POWER_LOSS_RETRY_MS = 500  # how often a drawn power loss asks again whether the last one is made good


class FaultTarget(Protocol):
    """The operations of the simulated cluster that faults use."""

    topic: str

    def resolve(self, target: object, topic_partition: TopicPartition) -> int: ...

    def broker_ids(self) -> list[int]: ...

    def pause(self, broker_id: int, duration_ms: int) -> None: ...

    def kill(self, broker_id: int, torn_tail: bool, empty_disk: bool = False) -> None: ...

    def stop(self, broker_id: int, then: Callable[[], None]) -> None: ...

    def restart(self, broker_id: int) -> None: ...

    def isolate(self, broker_id: int, one_way: bool) -> None: ...

    def partition_groups(self, side_a: list[int], side_b: list[int]) -> None: ...

    def heal_network(self) -> None: ...

    def clog_from(self, broker_id: int, until_ms: int) -> None: ...

    def throttle_to(self, broker_id: int, bytes_per_ms: int) -> None: ...

    def slow_links(self, broker_id: int, latency_ms: int, jitter_ms: int, one_way: bool) -> None: ...

    def restore_links(self, broker_id: int) -> None: ...

    def swizzle(self, duration_ms: int) -> None: ...

    def set_slow_reads(self, broker_id: int, topic_partition: TopicPartition | None, ms: int) -> None: ...

    def set_io_error(self, broker_id: int, topic_partition: TopicPartition, on_read: bool, on_write: bool) -> None: ...

    def clear_disk_faults(self, broker_id: int) -> None: ...

    def in_every_isr(self, broker_id: int) -> bool:
        """The broker is registered, unfenced and in the ISR of every partition it holds a replica of."""

    def fill_disk(self, broker_id: int) -> None: ...

    def free_disk(self, broker_id: int) -> None: ...

    def delete_records(self, topic_partition: TopicPartition, offset: int | None) -> None: ...

    def note(self, text: str) -> None:
        """Log a fault for the run's trace."""


def link_latency(spec: dict[str, Any]) -> tuple[int, int]:
    """A `latency` fault's `ms` +/- `jitter_ms` (netem's and the real harness's terms) as the network's latency plus
    up to its jitter."""
    try:
        ms, jitter_ms = int(spec["ms"]), int(spec.get("jitter_ms", 0))
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"a latency fault needs ms and may have jitter_ms, whole milliseconds: {spec}") from None
    if not 0 <= jitter_ms <= ms or ms + jitter_ms > LINK_LATENCY_MS_MAX:
        raise ConfigError(f"a latency fault needs 0 <= jitter_ms <= ms and ms + jitter_ms <= {LINK_LATENCY_MS_MAX}, "
                          f"got {spec}")
    return ms - jitter_ms, 2 * jitter_ms


class FaultPlan:
    """Schedules the faults of one run; `heal_all` undoes whatever is still active."""

    def __init__(self, scheduler: Scheduler, cluster: FaultTarget, end_ms: int) -> None:
        self._scheduler = scheduler
        self._cluster = cluster
        self._end_ms = end_ms
        self._heals: list[Callable[[], None]] = []
        self._dead: set[int] = set()
        self._power_lost: set[int] = set()  # brokers whose last power loss is not yet made good in every ISR
        self._chaos_until_ms = end_ms
        self.applied = 0

    def schedule(self, faults: tuple[dict[str, Any], ...]) -> None:
        for spec in faults:
            kind = spec.get("kind")
            if kind not in KINDS:
                raise ConfigError(f"unknown fault kind {kind!r}; known: {', '.join(sorted(KINDS))}")
            if kind == "latency":
                link_latency(spec)  # a bad figure is named now, not when the fault fires
            at_ms = self._scheduler.start_ms + round(float(spec.get("at_s", 0)) * 1000)
            every_ms = round(float(spec.get("every_s", 0)) * 1000)
            until_ms = self._scheduler.start_ms + round(float(spec.get("until_s", 0)) * 1000)
            for _ in range(FAULTS_PER_RUN_MAX):
                self._scheduler.at(at_ms, functools.partial(self.apply, dict(spec)))
                at_ms += every_ms
                if every_ms <= 0 or at_ms > until_ms:
                    break

    def schedule_chaos(self, chaos: dict[str, Any]) -> None:
        kinds = sorted(chaos.get("kinds", sorted(CHAOS_KINDS)))
        unknown = set(kinds) - CHAOS_KINDS
        if unknown:
            raise ConfigError(f"unknown chaos kinds {sorted(unknown)}; known: {', '.join(sorted(CHAOS_KINDS))}")
        rng = self._scheduler.rng
        gap_lo, gap_hi = (float(x) for x in chaos.get("gap_s", [2, 10]))
        dur_lo, dur_hi = (float(x) for x in chaos.get("duration_s", [1, 15]))
        slow_lo, slow_hi = (int(x) for x in chaos.get("slow_read_ms", [100, 20000]))
        targets = list(chaos.get("targets", ["leader", "follower", "follower2"]))
        start = self._scheduler.start_ms
        until_ms = start + round(float(chaos.get("until_s", (self._end_ms - start) / 1000)) * 1000)
        time_ms = start + round(float(chaos.get("start_s", 5)) * 1000)
        self._chaos_until_ms = until_ms
        for _ in range(FAULTS_PER_RUN_MAX):
            duration_s = rng.uniform(dur_lo, dur_hi)
            if time_ms + duration_s * 1000 > until_ms:
                break
            kind = rng.choice(kinds)
            spec: dict[str, Any] = {"kind": kind, "at_s": (time_ms - start) / 1000,
                                    "target": rng.choice(targets),
                                    "partition": rng.randrange(max(1, chaos.get("partitions", 1)))}
            if kind in ("kill", "wipe", "stop"):
                spec["restart_after_s"] = duration_s
                if kind == "kill":
                    spec["torn_tail"] = rng.random() < 0.5
            else:
                spec["duration_s"] = duration_s
            if kind == "slow_reads":
                spec["ms"] = rng.randint(slow_lo, slow_hi)
                spec["all_partitions"] = rng.random() < 0.5
            if kind == "isolate":
                spec["one_way"] = rng.random() < 0.3
            self._scheduler.at(time_ms, functools.partial(self.apply, spec, drawn=True))
            time_ms += round((duration_s + rng.uniform(gap_lo, gap_hi)) * 1000)

    def apply(self, spec: dict[str, Any], drawn: bool = False) -> None:
        """Inject one fault now and schedule its end. A `drawn` power loss waits for the last one (module doc)."""
        cluster = self._cluster
        tp = TopicPartition(cluster.topic, int(spec.get("partition", 0)))
        kind = spec["kind"]
        broker = -1 if kind in ("partition", "swizzle", "delete_records") else cluster.resolve(spec.get("target"), tp)
        if broker in self._dead:
            return  # a fault on a dead broker has no effect
        if kind in ("kill", "wipe"):
            self._power_lost = {b for b in self._power_lost if not cluster.in_every_isr(b)}
            if drawn and self._power_lost:
                retry_ms = self._scheduler.now_ms + POWER_LOSS_RETRY_MS
                if retry_ms < self._chaos_until_ms:
                    self._scheduler.at(retry_ms, functools.partial(self.apply, spec, drawn=True))
                else:
                    cluster.note(f"fault {kind} dropped: brokers {sorted(self._power_lost)} not yet back in every ISR")
                return
            self._power_lost.add(broker)
        duration_ms = round(float(spec.get("duration_s", 0)) * 1000)
        until_ms = self._scheduler.now_ms + duration_ms if duration_ms > 0 else self._end_ms
        self.applied += 1
        cluster.note(f"fault {kind} on broker {broker} ({spec})")
        heal = self._inject(kind, spec, broker, tp, until_ms)
        if heal is not None:
            self._heals.append(heal)
            self._scheduler.at(max(until_ms, self._scheduler.now_ms), functools.partial(self._run_heal, heal))

    def _inject(self, kind: str, spec: dict[str, Any], broker: int, tp: TopicPartition,
                until_ms: int) -> Callable[[], None] | None:
        cluster = self._cluster
        now = self._scheduler.now_ms
        if kind == "pause":
            cluster.pause(broker, until_ms - now)
            return None
        if kind in ("kill", "wipe"):
            restart_ms = round(float(spec.get("restart_after_s", 5)) * 1000)
            cluster.kill(broker, bool(spec.get("torn_tail", False)), empty_disk=kind == "wipe")
            self._dead.add(broker)
            self._scheduler.at(now + restart_ms, lambda: self._restart(broker))
            return None
        if kind == "stop":
            restart_ms = round(float(spec.get("restart_after_s", 5)) * 1000)
            self._dead.add(broker)
            cluster.stop(broker, functools.partial(self._stopped, broker, restart_ms))
            return None
        if kind == "isolate":
            cluster.isolate(broker, bool(spec.get("one_way", False)))
            return cluster.heal_network
        if kind == "partition":
            side_a = [cluster.resolve(t, tp) for t in spec.get("side_a", [])]
            side_b = [cluster.resolve(t, tp) for t in spec.get("side_b", [])]
            cluster.partition_groups(side_a, side_b)
            return cluster.heal_network
        if kind == "clog":
            cluster.clog_from(broker, until_ms)
            return None
        if kind == "throttle":
            cluster.throttle_to(broker, int(spec["bytes_per_ms"]))
            return lambda: cluster.throttle_to(broker, 0)
        if kind == "latency":
            cluster.slow_links(broker, *link_latency(spec), bool(spec.get("one_way", False)))
            return lambda: cluster.restore_links(broker)
        if kind == "swizzle":
            cluster.swizzle(until_ms - now)
            return None
        if kind == "slow_reads":
            cluster.set_slow_reads(broker, None if spec.get("all_partitions") else tp, int(spec.get("ms", 1000)))
            return lambda: cluster.clear_disk_faults(broker)
        if kind == "io_error":
            cluster.set_io_error(broker, tp, bool(spec.get("on_read", False)), bool(spec.get("on_write", True)))
            return lambda: cluster.clear_disk_faults(broker)
        if kind == "disk_full":
            cluster.fill_disk(broker)
            return lambda: cluster.free_disk(broker)
        assert kind == "delete_records", kind
        offset = spec.get("offset", "hw")
        cluster.delete_records(tp, None if offset == "hw" else int(offset))
        return None

    def _stopped(self, broker: int, restart_ms: int) -> None:
        if broker in self._dead:
            self._scheduler.at(self._scheduler.now_ms + restart_ms, lambda: self._restart(broker))
        else:  # every fault was healed while it was stopping: it comes back at once
            self._cluster.restart(broker)

    def _restart(self, broker: int) -> None:
        if broker in self._dead:
            self._dead.discard(broker)
            self._cluster.restart(broker)

    def _run_heal(self, heal: Callable[[], None]) -> None:
        if heal in self._heals:
            self._heals.remove(heal)
            heal()

    def heal_all(self) -> None:
        """End every fault: heal links, clear disk faults, restart dead brokers (pauses end by themselves)."""
        for heal in list(self._heals):
            self._run_heal(heal)
        self._cluster.heal_network()
        for broker in self._cluster.broker_ids():
            self._cluster.clear_disk_faults(broker)
        for broker in sorted(self._dead):
            self._restart(broker)
