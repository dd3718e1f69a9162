"""The seed scenarios' model: a real-process script's steps (`SeedStep`), the seed itself (`RealSeed`), and what
one run of it showed (`SeedRun`), from the simulator or a real cluster alike, so that the same claims
(seed_claims.py) judge both. The seeds themselves are in seeds.py, the sim-vs-real table in seed_table.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from insync.config import ConfigError

# What every real seed sets: short timers so a scenario takes seconds, the fault file, and one partition of
# __consumer_offsets (the read-back's consumer has a group.id: creating 50 would cost each run seconds).
BASE_CONFIGS = ("replica.fetch.backoff.ms=200", "isr.change.propagation.check.interval.ms=250",
                "isr.change.propagation.blackout.ms=500", "fault.injection.enable=true", "offsets.topic.num.partitions=1")
STEP_ACTIONS = ("pause", "kill", "stop", "crash", "isolate", "throttle", "latency", "slow-reads", "fail-partition",
                "delay", "delete-records")
STEP_TARGETS = ("leader", "follower", "follower2")
STEP_WAITS = ("", "isr-full", "isr-published", "isr-shrunk", "leader-alone")
LAG_REMOVAL = "lag"  # a Kafka leader's removal: Kafka has one rule, and names no finer reason (stuck, slow)


@dataclass(frozen=True, slots=True)
class SeedStep:
    """One fault at `at_s` seconds into the workload, on `target` ("leader" / "follower" / "follower2" of
    `partition` when it fires, or a broker id), undone `for_s` later (resume, restart, heal the network, or clear
    the fault file); 0 keeps it. `crash` is a power loss (what the node had not fsynced is gone); `throttle`
    limits what the target receives to `kbit` kbit/s (tbf, in network namespaces); `latency` delays its link both
    ways by `ms` +/- `jitter_ms` (netem, or the nfqueue daemons, in network namespaces).

    `after` makes it wait (bounded by the seed's `settle_s`) for a state before firing, and moves every later
    step and undoing by the time it waited, so the faults keep their spacing: "isr-full" (every ISR full, as an
    operator's rolling restart waits for no under-replicated partitions before the next broker), "isr-published"
    (every ISR full, and a metadata propagation since the last ISR change), "isr-shrunk"
    (a replica out of `partition`'s ISR), "leader-alone" (its leader the only replica in it). A script that
    needs a removal first waits for it rather than guess how long the brokers take on a loaded machine."""

    at_s: float
    action: str
    target: str | int
    for_s: float = 0.0
    partition: int = 0
    ms: int = 0
    kbit: int = 0
    jitter_ms: int = 0
    after: str = ""

    def __post_init__(self) -> None:
        if self.action not in STEP_ACTIONS:
            raise ConfigError(f"seed step: action must be one of {', '.join(STEP_ACTIONS)}, got {self.action!r}")
        if isinstance(self.target, str) and self.target not in STEP_TARGETS:
            raise ConfigError(f"seed step: target must be a broker id or one of {', '.join(STEP_TARGETS)}, "
                              f"got {self.target!r}")
        if (self.action == "throttle") != (self.kbit > 0):
            raise ConfigError(f"seed step: a throttle needs a rate (kbit > 0), and only a throttle has one; got "
                              f"{self.action} at {self.kbit} kbit/s")
        latency_ok = self.ms > 0 and 0 <= self.jitter_ms <= self.ms
        if (self.action == "latency" and not latency_ok) or (self.action != "latency" and self.jitter_ms):
            raise ConfigError(f"seed step: a latency needs 0 < ms and 0 <= jitter_ms <= ms, and only a latency has a "
                              f"jitter; got {self.action} of {self.ms} +/- {self.jitter_ms} ms")
        if self.after not in STEP_WAITS:
            raise ConfigError(f"seed step: after must be one of {', '.join(w for w in STEP_WAITS if w)}, "
                              f"got {self.after!r}")


@dataclass(frozen=True, slots=True)
class SeedRun:
    """What one run of a seed showed, from the simulator or a real cluster: the topic's events (as
    events.jsonl has them, in time order) and the workload's outcome."""

    side: str  # "sim", "real" (insync), or "kafka <version>"
    lag_ms: int
    events: tuple[dict[str, Any], ...]
    acked: int
    lost: int
    duplicated: int
    not_enough_replicas: int
    urp_s: float
    under_min_isr_s: float
    offline_s: float
    propagation_ms: tuple[int, int] = (2500, 5000)  # the controller's ISR propagation check interval, blackout
    # A real run's watch of the brokers' metadata (`RealSeed.watch_metadata`): {ts_ms, broker, partition, isr}
    # each time a broker's answer for a partition changed. The simulator's runs have none.
    seen: tuple[dict[str, Any], ...] = ()

    @property
    def on_kafka(self) -> bool:
        return self.side.startswith("kafka")

    def removed_for(self, reason: str) -> set[str]:
        """The removal reasons that mean `reason` in this run: on Kafka its one rule, the lag, too."""
        return {reason, LAG_REMOVAL} if self.on_kafka else {reason}

    def of(self, kind: str, partition: int | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind and (partition is None or e.get("partition") == partition)]

    def removals(self) -> list[dict[str, Any]]:
        """Each replica an ISR shrink removed, with the shrink's time (`ts_ms`) beside its own fields."""
        return [{**r, "ts_ms": e["ts_ms"], "partition": e.get("partition")}
                for e in self.of("isr_shrink") for r in e["removed"]]

    def waited_lags(self) -> list[float]:
        """For each removal, the time since the replica was last caught up, in lag times."""
        return [round((r["ts_ms"] - r["last_caught_up_ms"]) / self.lag_ms, 2) for r in self.removals()
                if r.get("last_caught_up_ms")]

    @property
    def unclean(self) -> int:
        return sum(1 for e in self.of("leader_change") if e["reason"] == "unclean")


Check = Callable[[SeedRun], list[str]]


@dataclass(frozen=True, slots=True)
class RealSeed:
    name: str
    sim: str  # the packaged simulator scenario
    description: str
    check: Check
    steps: tuple[SeedStep, ...]
    sim_overrides: dict[str, str] = field(default_factory=dict)
    sim_seed: int | None = None
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_isr: int = 2
    lag_ms: int = 1500
    session_ms: int = 3000
    configs: tuple[str, ...] = ()
    rate: float = 200.0
    # Beside the steady producer, a second one writes `side_records` small records at once every `side_every_s`
    # with acks `side_acks`: seed 001's bursts, or the unacknowledged bulk that outruns a slow follower.
    side_records: int = 0
    side_every_s: float = 0.0
    side_acks: str = "all"
    namespaces: bool = False  # each node in its own network namespace (root): for `isolate`, `throttle`, `latency`
    watch_metadata: bool = False  # ask every broker for the topic's ISRs all along (`SeedRun.seen`)
    duration_s: float = 8.0
    settle_s: float = 15.0  # at most this long, after the faults are undone, for every ISR to be full again

    def broker_configs(self) -> list[str]:
        return [*BASE_CONFIGS, f"replica.lag.time.max.ms={self.lag_ms}", f"broker.session.timeout.ms={self.session_ms}",
                f"broker.heartbeat.interval.ms={max(100, self.session_ms // 6)}", *self.configs]
