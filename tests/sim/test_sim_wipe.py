"""The `wipe` fault: a broker killed and restarted on an empty disk (a replaced disk) rejoins only after it has
fetched everything again; nothing acknowledged is lost, even when it was the leader."""

from __future__ import annotations

import pytest

from insync.sim.run import run_scenario
from insync.sim.scenario import parse_scenario


@pytest.mark.parametrize("seed", [0, 1])
def test_a_leader_back_on_an_empty_disk_rejoins_the_isr_and_loses_nothing(seed: int) -> None:
    result = run_scenario(parse_scenario({
        "name": "wipe", "seed": seed, "duration_s": 40, "quiesce_s": 20, "cluster": {"brokers": 3},
        "broker": {"min.insync.replicas": 2, "broker.session.timeout.ms": 6000},
        "topic": {"name": "t", "partitions": 1, "replication_factor": 3},
        "producers": [{"acks": -1, "rate_msgs_per_s": 200, "batch_records": 10}],
        "faults": [{"at_s": 10, "kind": "wipe", "target": "leader", "restart_after_s": 2}]}))
    assert not result.invariant_violations and result.lost_acked == 0, (seed, result.invariant_violations[:3])
    wiped = int(result.trace[0].split("on broker ")[1].split()[0])
    leaders = [e["leader_after"] for e in result.events if e["type"] == "leader_change"]
    assert leaders[0] == wiped and wiped not in leaders[1:], seed
    rejoined = [e for e in result.events if e["type"] == "isr_expand" and wiped in e["isr_after"]]
    assert rejoined and result.acked_records > 6_000, seed
