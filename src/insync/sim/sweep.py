"""Many seeds of one scenario in parallel processes; each seed is an independent, reproducible run.

Workers receive (scenario name, overrides, seed) and return a small summary dict (no event list), so the
parent never ships large results between processes. The summary aggregates the figures that matter for a
sweep: failing seeds with their reproduce commands, lost acknowledged writes, violations, wall time.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario

SEEDS_PER_SWEEP_MAX = 1_000_000


def run_one(job: tuple[str, dict[str, str], int]) -> dict[str, Any]:
    name, overrides, seed = job
    result = run_scenario(load_scenario(name, overrides, seed=seed), overrides)
    summary = result.to_dict(with_events=False)
    summary.pop("config")
    return summary


@dataclass(slots=True)
class SweepSummary:
    scenario: str
    seeds: int
    jobs: int
    wall_s: float
    virtual_s: float = 0.0
    lost_acked: int = 0
    unclean_elections: int = 0
    isr_shrinks: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "seeds": self.seeds, "jobs": self.jobs, "wall_s": round(self.wall_s, 2),
                "virtual_s": round(self.virtual_s, 1), "lost_acked": self.lost_acked,
                "unclean_elections": self.unclean_elections, "isr_shrinks": self.isr_shrinks,
                "failed_seeds": [f["seed"] for f in self.failures], "failures": self.failures}

    def table(self) -> str:
        lines = [f"scenario {self.scenario}: {self.seeds} seeds on {self.jobs} processes in {self.wall_s:.1f} s "
                 f"({self.virtual_s:.0f} virtual s)",
                 f"lost acknowledged writes: {self.lost_acked}, unclean elections: {self.unclean_elections}, "
                 f"ISR shrinks: {self.isr_shrinks}",
                 f"failed seeds: {len(self.failures)}"]
        for failure in self.failures[:50]:
            first = (failure["invariant_violations"] + failure["expectation_failures"] + ["?"])[0]
            lines.append(f"  seed {failure['seed']}: {first}")
        return "\n".join(lines)


def sweep(name: str, overrides: dict[str, str], seeds: Iterable[int], jobs: int | None = None,
          spark_master: str | None = None) -> SweepSummary:
    """Run every seed; in local processes (default) or, with `spark_master`, one Spark task per seed."""
    seed_list = list(seeds)
    assert 0 < len(seed_list) <= SEEDS_PER_SWEEP_MAX
    started = time.perf_counter()
    work = [(name, overrides, seed) for seed in seed_list]
    if spark_master is not None:
        from insync.spark.sweep import run_on_spark

        results, jobs = run_on_spark(work, spark_master)
    else:
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(seed_list)))
        if jobs == 1:
            results = [run_one(job) for job in work]
        else:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                results = pool.map(run_one, work, chunksize=1)
    summary = SweepSummary(name, len(seed_list), jobs, time.perf_counter() - started)
    for result in sorted(results, key=lambda r: int(r["seed"])):
        summary.virtual_s += result["virtual_s"]
        summary.lost_acked += result["lost_acked"]
        summary.unclean_elections += result["unclean_elections"]
        summary.isr_shrinks += result["isr_shrinks"]
        if not result["ok"]:
            summary.failures.append(result)
    return summary
