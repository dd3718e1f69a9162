"""KIP-966: altering a topic's min.insync.replicas judges its ELRs again, as Kafka does."""

from __future__ import annotations

from ctrl_harness import below_min_isr

from insync.config import ConfigChange, ConfigOp


def test_a_lower_min_isr_clears_the_elr_since_the_high_watermark_may_now_advance_without_it() -> None:
    h, leader = below_min_isr()
    h.controller.alter_topic_configs("t", [ConfigChange("min.insync.replicas", ConfigOp.SET, "1")], h.now)
    reg = h.partition("t")
    assert (reg.leader, reg.isr, reg.elr, reg.last_known_elr) == (leader, (leader,), (), ())


def test_a_higher_min_isr_keeps_the_elr() -> None:
    h, _ = below_min_isr()
    elr = h.partition("t").elr
    h.controller.alter_topic_configs("t", [ConfigChange("min.insync.replicas", ConfigOp.SET, "3")], h.now)
    assert h.partition("t").elr == elr
