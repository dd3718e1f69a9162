"""Unclean recovery (KIP-966) in the simulator: the replicas of an offline partition report their logs with their
heartbeats, and the controller elects by the recovery rule, or (strategy None) leaves the partition offline."""

from __future__ import annotations

import pytest

from insync.events import EventType
from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler

SESSION_MS = 3_000


@pytest.mark.parametrize("strategy", ["Aggressive", "None"])
def test_a_dead_last_isr_member_is_replaced_by_a_reported_replica(strategy: str) -> None:
    scheduler = Scheduler(seed=11)
    config: dict[str, object] = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 500,
                                 "replica.lag.time.max.ms": 2_000, "unclean.recovery.strategy": strategy}
    cluster = SimCluster(scheduler, 3, config, "t", LinkConfig(latency_ms=1))
    scheduler.run_until(scheduler.now_ms + 3_000)
    cluster.create_topic("t", 1, 3, {})
    scheduler.run_until(scheduler.now_ms + 3_000)
    (view,) = cluster.controller.controller.image.all_partitions()
    leader = view.registration.leader
    followers = [b for b in view.registration.replicas if b != leader]
    for follower in followers:
        cluster.kill(follower, torn_tail=False)
    scheduler.run_until(scheduler.now_ms + 2 * SESSION_MS)
    (view,) = cluster.controller.controller.image.all_partitions()
    assert view.registration.isr == (leader,)
    cluster.kill(leader, torn_tail=False)
    for follower in followers:
        cluster.restart(follower)
    scheduler.run_until(scheduler.now_ms + 3 * SESSION_MS)
    (view,) = cluster.controller.controller.image.all_partitions()
    recoveries = [e for e in cluster.events if e.type is EventType.UNCLEAN_RECOVERY]
    if strategy == "None":
        assert view.registration.leader == -1 and not recoveries
        return
    assert view.registration.leader in followers
    (event,) = recoveries
    assert event.fields["strategy"] == "Aggressive" and event.fields["leader_after"] == view.registration.leader
    assert sorted(r["broker"] for r in event.fields["reported"]) == sorted(followers)
