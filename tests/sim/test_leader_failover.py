"""Scenario 8: random kills (losing unflushed writes: logs never fsync), restarts on an empty disk, clean stops,
pauses, isolations, clogs and slow disks; nothing acknowledged with acks=all may be lost.

The CLI sweep runs 1,000 seeds (`insync sim sweep leader-failover --seeds 1000`); the suite runs a dozen.
"""

from __future__ import annotations

import pytest

from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario

SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_leader_failover_loses_nothing(seed: int) -> None:
    result = run_scenario(load_scenario("leader-failover", seed=seed))
    assert not result.invariant_violations, (result.reproduce_command(), result.invariant_violations[:5])
    assert result.lost_acked == 0, result.reproduce_command()
    assert result.divergent_logs == 0
    assert result.unclean_elections == 0
    assert result.acked_records > 6_000  # the workload really ran through the faults
    assert result.trace, "the chaos plan injected faults"
    assert not result.expectation_failures, result.expectation_failures


def test_a_run_is_a_pure_function_of_its_seed() -> None:
    first = run_scenario(load_scenario("leader-failover", seed=5)).to_dict()
    again = run_scenario(load_scenario("leader-failover", seed=5)).to_dict()
    other = run_scenario(load_scenario("leader-failover", seed=6)).to_dict()
    for volatile in ("wall_s", "cpu_s", "speedup"):
        for result in (first, again, other):
            result.pop(volatile)
    assert first == again
    assert first["events"] != other["events"]


def test_random_faults_include_clean_stops() -> None:
    result = run_scenario(load_scenario("leader-failover", seed=91))
    stops = [line for line in result.trace if "fault stop" in line]
    assert stops, result.trace
    assert result.lost_acked == 0 and not result.invariant_violations
    # The stopped broker came back: it registered again after its restart.
    broker = int(stops[0].split("on broker ")[1].split()[0])
    assert [e for e in result.events if e["type"] == "broker_registered" and e["broker_id"] == broker][1:]
