"""Reassignment through real broker cores and a controller (broker_harness.py): an added broker follows
from the leader outside the ISR, joins it once caught up, and the reassignment then completes, the removed leader
handing over and deleting its log; a broker that was down while its replica was moved away deletes the stray log
once it has caught up with the metadata."""

from __future__ import annotations

from broker_harness import TP, Harness

from insync.broker.core import BrokerCore
from insync.config import BrokerConfig
from insync.controller.reassignment import ReassignmentTarget
from insync.storage.log_manager import LogManager
from insync.types import BrokerId


def three_brokers(replicas: tuple[int, ...]) -> Harness:
    h = Harness({"min.insync.replicas": 2}, brokers=3)
    h.run(3_000)
    h.controller.create_topic("t", 1, 0, {}, h.clock.now, assignments=[(0, replicas)])
    h.run(1_000)
    return h


def reassign(h: Harness, replicas: tuple[int, ...]) -> None:
    [outcome] = h.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, replicas)], h.clock.now).response
    assert outcome is None


def test_an_added_broker_catches_up_joins_the_isr_and_the_removed_leader_hands_over_and_deletes_its_log() -> None:
    h = three_brokers((1, 2))
    for correlation in range(5):
        h.produce(-1, correlation)
    h.run(1_000)
    assert h.cores[1].high_watermark(TP) == 15
    reassign(h, (2, 3))
    h.run(3_000)
    reg = h.controller.image.topic("t").partitions[0]  # type: ignore[union-attr]
    assert (reg.replicas, set(reg.isr), reg.leader, reg.adding_replicas, reg.removing_replicas) == (
        (2, 3), {2, 3}, 2, (), ())
    assert h.cores[3].partitions[TP].log_end_offset == 15 and h.cores[2].high_watermark(TP) == 15
    assert TP not in h.cores[1].partitions and TP not in h.cores[1].log_manager.all_logs()
    h.produce(-1, 9)  # acks=all on the new replicas
    h.run(1_000)
    assert h.cores[2].high_watermark(TP) == 18


def test_a_broker_down_while_its_replica_moved_away_deletes_the_stray_log_after_catching_up() -> None:
    h = three_brokers((1, 2))
    h.produce(-1, 1)
    h.run(1_000)
    stopped = h.cores.pop(2)
    assert TP in stopped.log_manager.all_logs()
    h.run(12_000)  # its session expires: fenced, out of the ISR
    reassign(h, (1, 3))
    h.run(3_000)
    assert h.controller.image.topic("t").partitions[0].replicas == (1, 3)  # type: ignore[union-attr]
    config = BrokerConfig({"replica.lag.time.max.ms": 10_000, "min.insync.replicas": 2, "node.id": 2})
    manager = LogManager.open("/b2", config, h.disks[2], h.clock)
    assert TP in manager.all_logs()  # the old copy, found on disk
    restarted = BrokerCore(BrokerId(2), config, manager, 2, h.clock.now)
    h.cores[2] = restarted
    h._send(2, restarted.start(h.clock.now))
    h.run(5_000)
    assert restarted.caught_up and TP not in manager.all_logs() and not h.disks[2].exists("/b2/t-0")
