"""KIP-966: altering a topic's min.insync.replicas judges its ELRs again, as Kafka does."""

from __future__ import annotations

from ctrl_harness import Harness

from insync import errors
from insync.config import ConfigChange, ConfigOp
from insync.controller.replication_control import AlterPartitionData


def _below_min_isr() -> tuple[Harness, int]:
    h = Harness({"min.insync.replicas": 2})
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 3, {}, h.now)
    reg = h.partition("t")
    item = AlterPartitionData(h.topic_id("t"), 0, reg.leader_epoch, reg.partition_epoch, (reg.leader,))
    assert h.controller.alter_partition(reg.leader, h.epochs[reg.leader], [item], h.now).response[0].error \
        is errors.NONE
    assert len(h.partition("t").elr) == 2
    return h, reg.leader


def test_a_lower_min_isr_clears_the_elr_since_the_high_watermark_may_now_advance_without_it() -> None:
    h, leader = _below_min_isr()
    h.controller.alter_topic_configs("t", [ConfigChange("min.insync.replicas", ConfigOp.SET, "1")], h.now)
    reg = h.partition("t")
    assert (reg.leader, reg.isr, reg.elr, reg.last_known_elr) == (leader, (leader,), (), ())


def test_a_higher_min_isr_keeps_the_elr() -> None:
    h, _ = _below_min_isr()
    elr = h.partition("t").elr
    h.controller.alter_topic_configs("t", [ConfigChange("min.insync.replicas", ConfigOp.SET, "3")], h.now)
    assert h.partition("t").elr == elr
