"""KIP-966 in the simulator: a killed broker (power loss) registers again as after an unclean shutdown and
leaves the ELR; a broker stopped cleanly keeps its place in it."""

from __future__ import annotations

import pytest

from insync.metadata.records import PartitionChangeRecord
from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler

SESSION_MS = 3_000


def _removed_from_elr_as_unclean(cluster: SimCluster, broker: int) -> bool:
    """Whether a change record put `broker` in the last known ELR, which only an unclean shutdown does here."""
    records, _ = cluster.controller.controller.records_since(0, 100_000)
    return any(isinstance(r, PartitionChangeRecord) and broker in (r.last_known_elr or ()) for _, r in records)


@pytest.mark.parametrize("clean", [False, True])
def test_a_killed_follower_leaves_the_elr_and_a_stopped_one_stays(clean: bool) -> None:
    scheduler = Scheduler(seed=5)
    config: dict[str, object] = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 500,
                                 "min.insync.replicas": 2}
    cluster = SimCluster(scheduler, 2, config, "t", LinkConfig(latency_ms=1))
    scheduler.run_until(scheduler.now_ms + 3_000)
    cluster.create_topic("t", 1, 2, {})
    scheduler.run_until(scheduler.now_ms + 3_000)
    (view,) = cluster.controller.controller.image.all_partitions()
    follower = next(b for b in view.registration.replicas if b != view.registration.leader)
    if clean:
        cluster.stop(follower, lambda: None)
    else:
        cluster.kill(follower, torn_tail=False)
    scheduler.run_until(scheduler.now_ms + 2 * SESSION_MS)
    (view,) = cluster.controller.controller.image.all_partitions()
    assert view.registration.elr == (follower,)  # the ISR fell below min ISR without it: still eligible
    cluster.restart(follower)
    scheduler.run_until(scheduler.now_ms + 3_000)
    assert _removed_from_elr_as_unclean(cluster, follower) is not clean
