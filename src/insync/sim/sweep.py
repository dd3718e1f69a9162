"""Many seeds of one scenario in parallel; each seed is an independent, reproducible run.

Workers receive (scenario name, overrides, seed) and return a small summary dict (no event list), so the
parent never ships large results between processes. The summary aggregates the figures that matter for a
sweep: failing seeds with their reproduce commands, lost acknowledged writes, violations, wall time.

Where the seeds run is the caller's choice, a map function: `local_processes(jobs)` here, or one Spark task per
seed (`insync.spark.sweep.spark_tasks`, which the CLI passes in), so the simulator never imports Spark.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario

SEEDS_PER_SWEEP_MAX = 1_000_000

Job: TypeAlias = tuple[str, dict[str, str], int]  # (scenario name, overrides, seed)
# Runs the function on every job and returns the results (in any order) and how many workers ran them.
MapJobs: TypeAlias = Callable[[Callable[[Job], dict[str, Any]], list[Job]], tuple[list[dict[str, Any]], int]]


def run_one(job: Job) -> dict[str, Any]:
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


def local_processes(jobs: int | None = None) -> MapJobs:
    """A map over `jobs` forked processes (default: every local core; never more than there are jobs)."""
    def map_jobs(run: Callable[[Job], dict[str, Any]], work: list[Job]) -> tuple[list[dict[str, Any]], int]:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(work)))
        if workers == 1:
            return [run(job) for job in work], 1
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(run, work, chunksize=1), workers

    return map_jobs


def sweep(name: str, overrides: dict[str, str], seeds: Iterable[int], map_jobs: MapJobs) -> SweepSummary:
    """Run every seed through `map_jobs` (`local_processes(...)`, or Spark's `spark_tasks(master)`)."""
    seed_list = list(seeds)
    assert 0 < len(seed_list) <= SEEDS_PER_SWEEP_MAX
    started = time.perf_counter()
    results, jobs = map_jobs(run_one, [(name, overrides, seed) for seed in seed_list])
    assert len(results) == len(seed_list) and jobs > 0
    summary = SweepSummary(name, len(seed_list), jobs, time.perf_counter() - started)
    for result in sorted(results, key=lambda r: int(r["seed"])):
        summary.virtual_s += result["virtual_s"]
        summary.lost_acked += result["lost_acked"]
        summary.unclean_elections += result["unclean_elections"]
        summary.isr_shrinks += result["isr_shrinks"]
        if not result["ok"]:
            summary.failures.append(result)
    return summary
