"""Metadata reaches simulated brokers as it reaches real ones: each broker long-polls the controller's metadata
log, and the controller node core (`controller.node`, which the server drives too) parks the polls and answers
them when it publishes."""

from __future__ import annotations

from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler

LATENCY_MS = 5
STEPS_MAX = 1_000


def test_a_parked_metadata_poll_is_answered_when_the_controller_publishes() -> None:
    scheduler = Scheduler(seed=11)
    # Heartbeats far apart: nothing but the long poll can bring the new topic within the test's few milliseconds.
    config: dict[str, object] = {"broker.heartbeat.interval.ms": 5_000, "broker.session.timeout.ms": 30_000}
    cluster = SimCluster(scheduler, 3, config, "t", LinkConfig(latency_ms=LATENCY_MS, jitter_ms=0))
    scheduler.run_until(scheduler.now_ms + 12_000)
    assert cluster.all_registered()
    core = cluster.controller.core
    for _ in range(STEPS_MAX):  # a poll is out of the controller for one round trip every wait: find them all in
        if core.parked_fetches == len(cluster.brokers):
            break
        scheduler.run_until(scheduler.now_ms + 1)
    assert core.parked_fetches == len(cluster.brokers), "every broker's poll waits at the controller"
    published = cluster.controller.controller.published_offset
    assert all(node.core is not None and node.core.metadata.applied_offset == published
               for node in cluster.brokers.values())

    cluster.create_topic("t", 3, 3, {})

    assert core.parked_fetches == 0, "the publication answered every parked poll at once"
    scheduler.run_until(scheduler.now_ms + LATENCY_MS)
    for node in cluster.brokers.values():
        assert node.core is not None and node.core.metadata.image.topic("t") is not None
        assert node.core.metadata.applied_offset == cluster.controller.controller.published_offset > published
