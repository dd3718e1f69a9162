"""Fault plans (insync.sim.faults): the `stop` kind's restart when the run's faults end mid-stop, a drawn power
loss waiting until the last one is made good, and the `latency` kind's figures and end."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from insync.config import ConfigError
from insync.sim.faults import FaultPlan
from insync.sim.scheduler import Scheduler
from insync.types import TopicPartition


class _StoppingCluster:
    """The part of a FaultTarget a stop uses; records stops and restarts; a stop ends when the test says so."""

    topic = "t"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.finish_stop: Callable[[], None] | None = None

    def resolve(self, target: object, topic_partition: TopicPartition) -> int:
        return int(str(target))

    def stop(self, broker_id: int, then: Callable[[], None]) -> None:
        self.calls.append(f"stop {broker_id}")
        self.finish_stop = then

    def restart(self, broker_id: int) -> None:
        self.calls.append(f"restart {broker_id}")

    def note(self, text: str) -> None:
        pass

    def heal_network(self) -> None:
        pass

    def broker_ids(self) -> list[int]:
        return [1]

    def clear_disk_faults(self, broker_id: int) -> None:
        pass


def test_a_broker_healed_while_it_is_still_stopping_restarts_once_stopped() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _StoppingCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 60_000)  # type: ignore[arg-type]  # a stop's part
    plan.apply({"kind": "stop", "target": 1, "restart_after_s": 30})
    plan.heal_all()  # the run's faults end before the controller has let the broker go
    # A simulated broker ignores a restart while it is still up, so this one does nothing...
    assert cluster.calls == ["stop 1", "restart 1"]
    assert cluster.finish_stop is not None
    cluster.finish_stop()
    assert cluster.calls == ["stop 1", "restart 1", "restart 1"]  # ...and it is back at once, not 30 s later


def test_a_stop_restarts_the_broker_its_restart_delay_after_it_stopped() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _StoppingCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 60_000)  # type: ignore[arg-type]  # a stop's part
    plan.apply({"kind": "stop", "target": 1, "restart_after_s": 5})
    scheduler.run_until(scheduler.start_ms + 2_000)
    assert cluster.finish_stop is not None
    cluster.finish_stop()  # stopped at 2 s
    scheduler.run_until(scheduler.start_ms + 6_900)
    assert cluster.calls == ["stop 1"]
    scheduler.run_until(scheduler.start_ms + 7_000)
    assert cluster.calls == ["stop 1", "restart 1"]


class _PowerCluster(_StoppingCluster):
    """A cluster whose brokers rejoin every ISR when the test says so; records kills."""

    def __init__(self) -> None:
        super().__init__()
        self.behind: set[int] = set()

    def kill(self, broker_id: int, torn_tail: bool, empty_disk: bool = False) -> None:
        self.calls.append(f"kill {broker_id}")
        self.behind.add(broker_id)

    def in_every_isr(self, broker_id: int) -> bool:
        return broker_id not in self.behind


def test_a_drawn_power_loss_waits_until_the_last_one_is_back_in_every_isr() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _PowerCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 60_000)  # type: ignore[arg-type]  # a kill's part
    plan.apply({"kind": "kill", "target": 1, "restart_after_s": 1}, drawn=True)
    scheduler.run_until(scheduler.start_ms + 2_000)  # broker 1 restarted, still catching up
    plan.apply({"kind": "kill", "target": 2, "restart_after_s": 1}, drawn=True)
    scheduler.run_until(scheduler.start_ms + 5_000)
    assert cluster.calls == ["kill 1", "restart 1"]  # the second power loss waits
    cluster.behind.discard(1)
    scheduler.run_until(scheduler.start_ms + 5_600)
    assert cluster.calls[:3] == ["kill 1", "restart 1", "kill 2"]


def test_a_scripted_power_loss_does_not_wait() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _PowerCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 60_000)  # type: ignore[arg-type]  # a kill's part
    plan.apply({"kind": "kill", "target": 1, "restart_after_s": 10})
    plan.apply({"kind": "kill", "target": 2, "restart_after_s": 10})  # last-replica-standing kills on purpose
    assert cluster.calls == ["kill 1", "kill 2"]


def test_a_drawn_power_loss_that_cannot_wait_past_the_chaos_window_is_dropped() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _PowerCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 3_000)  # type: ignore[arg-type]  # a kill's part
    plan.apply({"kind": "kill", "target": 1, "restart_after_s": 1}, drawn=True)
    plan.apply({"kind": "kill", "target": 2, "restart_after_s": 1}, drawn=True)
    scheduler.run_until(scheduler.start_ms + 10_000)
    assert "kill 2" not in cluster.calls


class _LinkCluster(_StoppingCluster):
    """Records what a latency fault does to a broker's links."""

    def slow_links(self, broker_id: int, latency_ms: int, jitter_ms: int, one_way: bool) -> None:
        self.calls.append(f"slow {broker_id} {latency_ms}+{jitter_ms}{' one way' if one_way else ''}")

    def restore_links(self, broker_id: int) -> None:
        self.calls.append(f"restore {broker_id}")


def test_a_latency_fault_slows_the_links_as_netem_says_it_and_restores_them_at_its_end() -> None:
    scheduler = Scheduler(seed=0)
    cluster = _LinkCluster()
    plan = FaultPlan(scheduler, cluster, scheduler.start_ms + 60_000)  # type: ignore[arg-type]  # the links' part
    plan.schedule(({"kind": "latency", "target": 2, "at_s": 1, "duration_s": 5, "ms": 10, "jitter_ms": 3},
                   {"kind": "latency", "target": 3, "at_s": 2, "ms": 40, "one_way": True}))
    scheduler.run_until(scheduler.start_ms + 5_000)
    assert cluster.calls == ["slow 2 7+6", "slow 3 40+0 one way"]  # 10 +/- 3 ms: 7 ms plus up to 6
    scheduler.run_until(scheduler.start_ms + 6_000)
    assert cluster.calls[2:] == ["restore 2"]
    plan.heal_all()  # the one without a duration lasts until the quiesce phase
    assert cluster.calls[3:] == ["restore 3"]


@pytest.mark.parametrize("spec", [{"jitter_ms": 3}, {"ms": 2, "jitter_ms": 3}, {"ms": "ten"},
                                  {"ms": 60_000, "jitter_ms": 1}])
def test_a_latency_fault_with_bad_figures_is_refused_when_scheduled(spec: dict[str, object]) -> None:
    scheduler = Scheduler(seed=0)
    plan = FaultPlan(scheduler, _LinkCluster(), scheduler.start_ms + 60_000)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="a latency fault needs"):
        plan.schedule(({"kind": "latency", "target": 2, **spec},))
