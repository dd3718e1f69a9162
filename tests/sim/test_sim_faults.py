"""Fault plans (insync.sim.faults): the `stop` kind's restart when the run's faults end mid-stop."""

from __future__ import annotations

from collections.abc import Callable

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
