"""The outcome of one simulation run, as JSON (`--json`) or as a readable table.

The field names are a contract: tests, `insync sim sweep` and the analysis read them.
`events` holds every replication-health event (DESIGN.md 7) from brokers and the controller, in time order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SimResult:
    scenario: str
    seed: int
    config: dict[str, Any]
    overrides: dict[str, str] = field(default_factory=dict)
    virtual_s: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0  # process CPU time: on a shared machine wall time also measures the neighbours
    acked: int = 0
    acked_records: int = 0
    lost_acked: int = 0
    duplicates: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    urp_ms: int = 0
    under_min_isr_ms: int = 0
    offline_ms: int = 0
    produce_errors: dict[str, int] = field(default_factory=dict)
    failed_partitions_max: int = 0
    failed_partitions_end: int = 0
    metadata_propagations: int = 0
    invariant_violations: list[str] = field(default_factory=list)
    unclean_elections: int = 0
    consumed_batches: int = 0
    divergent_logs: int = 0
    expectation_failures: list[str] = field(default_factory=list)
    sim_events: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)  # the faults injected, with their times
    transactions: dict[str, int] = field(default_factory=dict)  # outcomes and errors of transactional producers

    @property
    def speedup(self) -> float:
        return self.virtual_s / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def ok(self) -> bool:
        return not self.invariant_violations and not self.expectation_failures

    def reproduce_command(self) -> str:
        sets = "".join(f" --set {key}={value}" for key, value in sorted(self.overrides.items()))
        return f"insync sim run {self.scenario} --seed {self.seed}{sets}"

    def to_dict(self, with_events: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": self.scenario,
            "seed": self.seed,
            "config": self.config,
            "virtual_s": round(self.virtual_s, 3),
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "speedup": round(self.speedup, 1) if self.wall_s > 0 else None,
            "acked": self.acked,
            "acked_records": self.acked_records,
            "lost_acked": self.lost_acked,
            "duplicates": self.duplicates,
            "isr_shrinks": self.isr_shrinks,
            "isr_expands": self.isr_expands,
            "urp_ms": self.urp_ms,
            "under_min_isr_ms": self.under_min_isr_ms,
            "offline_ms": self.offline_ms,
            "produce_errors": dict(sorted(self.produce_errors.items())),
            "failed_partitions_max": self.failed_partitions_max,
            "failed_partitions_end": self.failed_partitions_end,
            "metadata_propagations": self.metadata_propagations,
            "invariant_violations": list(self.invariant_violations),
            "unclean_elections": self.unclean_elections,
            "consumed_batches": self.consumed_batches,
            "divergent_logs": self.divergent_logs,
            "expectation_failures": list(self.expectation_failures),
            "sim_events": self.sim_events,
            "ok": self.ok,
            "reproduce": self.reproduce_command(),
            "faults": list(self.trace),
            "transactions": dict(self.transactions),
        }
        if with_events:
            out["events"] = self.events
        return out

    def table(self) -> str:
        """A two-column summary for people; the events are summarised by type."""
        rows: list[tuple[str, str]] = [
            ("scenario", self.scenario), ("seed", str(self.seed)),
            ("virtual time", f"{self.virtual_s:.1f} s"), ("wall time", f"{self.wall_s:.2f} s (CPU {self.cpu_s:.2f} s)"),
            ("speedup", f"{self.speedup:.0f}x virtual/wall"),
            ("acknowledged batches", f"{self.acked} ({self.acked_records} records)"),
            ("lost acknowledged (acks=all)", str(self.lost_acked)), ("duplicates", str(self.duplicates)),
            ("ISR shrinks / expands", f"{self.isr_shrinks} / {self.isr_expands}"),
            ("under-replicated", f"{self.urp_ms / 1000:.1f} partition-s"),
            ("under min ISR", f"{self.under_min_isr_ms / 1000:.1f} partition-s"),
            ("offline", f"{self.offline_ms / 1000:.1f} partition-s"),
            ("produce errors", ", ".join(f"{k}={v}" for k, v in sorted(self.produce_errors.items())) or "none"),
            ("failed partitions (max / end)", f"{self.failed_partitions_max} / {self.failed_partitions_end}"),
            ("metadata propagations", str(self.metadata_propagations)),
            ("unclean elections", str(self.unclean_elections)),
            ("consumed batches", str(self.consumed_batches)),
            ("simulated events", str(self.sim_events)),
        ]
        if self.transactions:
            rows.append(("transactions", ", ".join(f"{k}={v}" for k, v in self.transactions.items())))
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event["type"]] = counts.get(event["type"], 0) + 1
        rows.append(("events", ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"))
        width = max(len(name) for name, _ in rows)
        lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
        status = "OK" if self.ok else "FAILED"
        lines.append(f"{'result'.ljust(width)}  {status}")
        for text in self.invariant_violations[:20]:
            lines.append(f"  violation: {text}")
        for text in self.expectation_failures:
            lines.append(f"  expectation: {text}")
        if not self.ok:
            lines.append(f"reproduce with: {self.reproduce_command()}")
        return "\n".join(lines)
