"""A simulated broker hears its connections close, as the server does: a follower whose leader stops cleanly
fails its fetch at once and backs off, instead of waiting out `replica.socket.timeout.ms`."""

from __future__ import annotations

from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler
from insync.types import BrokerId

SOCKET_TIMEOUT_MS = 30_000


def test_a_fetch_to_a_leader_that_stopped_cleanly_fails_at_once() -> None:
    scheduler = Scheduler(seed=3)
    config: dict[str, object] = {"replica.socket.timeout.ms": SOCKET_TIMEOUT_MS, "controlled.shutdown.enable": False,
                                 "replica.fetch.wait.max.ms": 5_000}
    cluster = SimCluster(scheduler, 2, config, "t", LinkConfig(latency_ms=1))
    scheduler.run_until(scheduler.now_ms + 5_000)
    cluster.create_topic("t", 1, 2, {})
    scheduler.run_until(scheduler.now_ms + 5_000)
    (view,) = cluster.controller.controller.image.all_partitions()
    leader = view.registration.leader
    follower = next(b for b in cluster.brokers if b != leader)
    core = cluster.brokers[follower].core
    assert core is not None
    session = core.fetchers.sessions[BrokerId(leader)]
    # A long poll is parked on the leader (nothing to read): the fetch is in flight when the leader stops.
    assert session.in_flight is not None
    cluster.brokers[leader].kill(torn_tail=False, clean=True)
    scheduler.run_until(scheduler.now_ms + 50)
    assert session.in_flight is None, "the follower gave the fetch up when its connection closed"
