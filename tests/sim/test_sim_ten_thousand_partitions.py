"""10,000 partitions (RF 3 on 3 brokers) through a controller restart and a broker's power loss and restart.

Fencing the killed broker changes every partition (it leaves 10,000 ISRs and a third of them elect a new leader):
more records than one metadata batch holds, which the controller splits. Every partition must have a leader again,
on the controller and on the brokers. Follower fetches wait 5 s when idle, so that a quiet cluster of this size
costs few simulator steps.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from insync.sim.cluster import SimCluster
from insync.sim.network import LinkConfig
from insync.sim.scheduler import Scheduler
from insync.types import NO_LEADER, TopicPartition

STEP_MS = 250
WAIT_MS_MAX = 60_000
SESSION_MS = 4_000
HEARTBEAT_MS = 1_000
CONFIG: dict[str, object] = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": HEARTBEAT_MS,
                             "replica.fetch.wait.max.ms": 5_000}


def run_until(scheduler: Scheduler, done: Callable[[], bool], seed: int, what: str) -> int:
    """Virtual milliseconds until `done`, in steps; fails (with the seed) after WAIT_MS_MAX."""
    start = scheduler.now_ms
    for _ in range(WAIT_MS_MAX // STEP_MS):
        if done():
            return scheduler.now_ms - start
        scheduler.run_until(scheduler.now_ms + STEP_MS)
    raise AssertionError(f"seed {seed}: {what} not within {WAIT_MS_MAX} ms of virtual time")


def led_everywhere(cluster: SimCluster, dead: int | None = None) -> bool:
    """Every partition has a leader other than `dead` on the controller, and that broker leads it at that epoch."""
    for view in cluster.controller.controller.image.all_partitions():
        reg = view.registration
        if reg.leader in (NO_LEADER, dead):
            return False
        core = cluster.brokers[reg.leader].core
        partition = None if core is None else core.partitions.get(TopicPartition(view.topic, view.partition))
        if partition is None or not partition.is_leader or partition.leader_epoch != reg.leader_epoch:
            return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1])
def test_every_partition_is_led_again_after_the_controller_and_a_broker_restart(seed: int) -> None:
    scheduler = Scheduler(seed)
    cluster = SimCluster(scheduler, 3, CONFIG, "big", LinkConfig(latency_ms=1))
    run_until(scheduler, cluster.all_registered, seed, "registration")
    cluster.create_topic("big", 9_000, 3, {})
    cluster.create_topic("small", 1_000, 3, {})
    run_until(scheduler, lambda: led_everywhere(cluster), seed, "leaders for new topics")
    assert len(cluster.controller.controller.image.all_partitions()) == 10_000

    cluster.controller.kill()
    scheduler.run_until(scheduler.now_ms + 2 * HEARTBEAT_MS)  # brokers' heartbeats and metadata polls go unanswered
    cluster.controller.restart()
    run_until(scheduler, lambda: led_everywhere(cluster), seed, "leaders after the controller's restart")

    cluster.kill(1, torn_tail=False)
    failover_ms = run_until(scheduler, lambda: led_everywhere(cluster, dead=1), seed, "leaders after broker 1 died")
    assert failover_ms <= 2 * SESSION_MS, (seed, failover_ms)  # its session expires, then one fencing
    image = cluster.controller.controller.image
    assert image.brokers[1].fenced and not any(1 in v.registration.isr for v in image.all_partitions())

    cluster.restart(1)
    run_until(scheduler, cluster.all_registered, seed, "broker 1 back")
    run_until(scheduler, lambda: led_everywhere(cluster), seed, "leaders after broker 1's restart")
    assert not cluster.checker.violations, (seed, cluster.checker.violations[:5])
