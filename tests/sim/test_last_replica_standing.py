"""KIP-966's case (scenario last-replica-standing): the ISR shrinks to the leader, the leader crashes losing its
unflushed tail, the followers come back. With ELR no acknowledged write is lost and the partition comes back
online the moment the eligible follower returns; with the Kafka 3.x election the restarted leader is elected
again with what it had fsynced (nothing) and the acknowledged writes are gone, though no election was unclean."""

from __future__ import annotations

from typing import Any

import pytest

from insync.sim.result import SimResult
from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario

SEEDS = range(4)
KAFKA_3 = {"broker.eligible.leader.replicas.enable": "false"}


def _controller_events(result: SimResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind and e["broker"] == 0]


def _killed_broker(result: SimResult) -> int:
    [kill] = [line for line in result.trace if "fault kill" in line]
    return int(kill.split("on broker ")[1].split()[0])


@pytest.mark.parametrize("seed", SEEDS)
def test_with_elr_nothing_acknowledged_is_lost_and_the_eligible_replica_leads_once_back(seed: int) -> None:
    result = run_scenario(load_scenario("last-replica-standing", seed=seed))
    replay = result.reproduce_command()
    assert not result.invariant_violations, (replay, result.invariant_violations[:3])
    assert result.lost_acked == 0 and result.unclean_elections == 0, replay
    assert result.acked_records > 1_000 and not result.expectation_failures, (replay, result.expectation_failures)
    [offline] = _controller_events(result, "partition_offline")
    [online] = _controller_events(result, "partition_online")
    [went_offline] = [e for e in _controller_events(result, "leader_change") if e["ts_ms"] == offline["ts_ms"]]
    [elected] = [e for e in _controller_events(result, "leader_change") if e["ts_ms"] == online["ts_ms"]]
    leader = elected["leader_after"]
    assert leader != _killed_broker(result), (replay, "the crashed leader came back without its tail")
    assert leader in went_offline["elr"], (replay, went_offline)
    unfenced = [e["ts_ms"] for e in _controller_events(result, "broker_unfenced") if e["broker_id"] == leader]
    assert online["ts_ms"] in unfenced, (replay, "online as soon as the eligible replica returned")


@pytest.mark.parametrize("seed", SEEDS)
def test_with_the_kafka_3_election_the_restarted_leader_loses_acknowledged_writes(seed: int) -> None:
    result = run_scenario(load_scenario("last-replica-standing", KAFKA_3, seed=seed), KAFKA_3)
    replay = result.reproduce_command()
    assert result.lost_acked > 0, replay
    assert result.unclean_elections == 0, replay
    assert any("leader completeness" in text for text in result.invariant_violations), replay
    [elected] = [e for e in _controller_events(result, "leader_change") if e["reason"] == "unfenced"]
    assert elected["leader_after"] == _killed_broker(result), replay
