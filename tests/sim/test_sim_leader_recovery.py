"""KIP-704 in the simulator: an uncleanly elected leader is recorded RECOVERING, asks for RECOVERED at once, and
the controller records it; its partition then serves consumers again."""

from __future__ import annotations

from insync.metadata.records import LEADER_RECOVERED, LEADER_RECOVERING, PartitionChangeRecord
from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler
from insync.types import TopicPartition

SESSION_MS = 3_000


def test_an_unclean_leader_is_recovering_then_recovered() -> None:
    scheduler = Scheduler(seed=11)
    config: dict[str, object] = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 500,
                                 "replica.lag.time.max.ms": 2_000}
    cluster = SimCluster(scheduler, 2, config, "t", LinkConfig(latency_ms=1))
    scheduler.run_until(scheduler.now_ms + 3_000)
    cluster.create_topic("t", 1, 2, {"unclean.leader.election.enable": "true"})
    scheduler.run_until(scheduler.now_ms + 3_000)
    (view,) = cluster.controller.controller.image.all_partitions()
    leader = view.registration.leader
    follower = next(b for b in view.registration.replicas if b != leader)
    cluster.kill(follower, torn_tail=False)
    scheduler.run_until(scheduler.now_ms + 3 * SESSION_MS)  # the ISR shrinks to the leader
    cluster.kill(leader, torn_tail=False)
    scheduler.run_until(scheduler.now_ms + 2 * SESSION_MS)
    cluster.restart(follower)  # out of sync, the only one alive: an unclean election
    scheduler.run_until(scheduler.now_ms + 30_000)
    records, _ = cluster.controller.controller.records_since(0, 100_000)
    states = [r.leader_recovery_state for _, r in records
              if isinstance(r, PartitionChangeRecord) and r.leader_recovery_state is not None]
    assert states == [LEADER_RECOVERING, LEADER_RECOVERED]
    (view,) = cluster.controller.controller.image.all_partitions()
    assert view.registration.leader == follower and not view.registration.is_recovering
    core = cluster.brokers[follower].core
    assert core is not None and not core.partitions[TopicPartition("t", 0)].recovering
