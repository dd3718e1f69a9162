"""The benchmark of issue 3: 3 brokers, 10 partitions, 1,000 msg/s. The figure itself (>= 100 virtual s per
wall s on an idle machine) is reported by `insync sim run throughput`, never asserted here (a timed assertion
fails on a loaded machine: 6x at load 24); the suite asserts that the workload really ran, clean."""

from __future__ import annotations

from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario


def test_throughput_benchmark_runs_fast_and_clean() -> None:
    result = run_scenario(load_scenario("throughput"))
    assert result.ok, result.invariant_violations
    assert result.acked_records >= 99_000  # 1,000 msg/s for 100 s, all acknowledged with acks=all
