"""Replication throttles (Kafka's leader/follower.replication.throttled.rate and the topics'
*.replication.throttled.replicas): which replicas they act on, that in-sync replicas are never held back, and, in
broker cores under a controller, that a throttled reassignment copies nothing while the rate is over its bound
although acks=all producers go on, then completes once the throttle is lifted."""

from __future__ import annotations

import pytest
from broker_harness import TP, Harness

from insync.broker.throttles import ReplicationThrottles
from insync.config import BrokerConfig, ConfigChange, ConfigError, ConfigOp, validate_topic_configs
from insync.controller.reassignment import ReassignmentTarget
from insync.types import BrokerId, TopicPartition
from insync.wire.configs import topic_configs


def throttles(rate: int | None, replicas: str) -> ReplicationThrottles:
    config = BrokerConfig({} if rate is None else {"leader.replication.throttled.rate": rate,
                                                   "follower.replication.throttled.rate": rate})
    return ReplicationThrottles(BrokerId(2), lambda: config,
                                lambda topic: {"leader.replication.throttled.replicas": replicas,
                                               "follower.replication.throttled.replicas": replicas})


@pytest.mark.parametrize(("rate", "replicas", "partition", "applies"), [
    (100, "*", 0, True),
    (100, "0:1, 3:2", 3, True),
    (100, "0:1,3:2", 0, False),  # partition 0 is throttled on broker 1, not here
    (100, "", 0, False),
    (None, "*", 0, False),  # no rate set: nothing is throttled, nothing is counted
])
def test_a_throttle_acts_on_the_replicas_its_topic_lists_on_this_broker(rate: int | None, replicas: str,
                                                                         partition: int, applies: bool) -> None:
    t = throttles(rate, replicas)
    assert t.applies(TopicPartition("t", partition), leader=True) is applies
    assert t.applies(TopicPartition("t", partition), leader=False) is applies


def test_only_out_of_sync_replicas_are_held_back_and_only_over_the_rate() -> None:
    t = throttles(100, "*")
    assert not t.holds_back(TP, False, 0, leader=True)
    t.record(TP, 5_000, 0, leader=True)
    assert t.holds_back(TP, False, 0, leader=True) and not t.holds_back(TP, True, 0, leader=True)
    assert not t.holds_back(TP, False, 0, leader=False)  # the follower quota counted nothing


def test_throttled_replica_lists_are_validated_with_kafkas_words_and_described_as_defaults() -> None:
    assert validate_topic_configs({"leader.replication.throttled.replicas": "0:1,1:2"})[
        "leader.replication.throttled.replicas"] == ("0:1", "1:2")
    assert validate_topic_configs({"follower.replication.throttled.replicas": "*"})
    with pytest.raises(ConfigError, match="must be the literal '\\*' or a list of replicas"):
        validate_topic_configs({"leader.replication.throttled.replicas": "0-1"})
    entries = {e.name: e for e in topic_configs({"leader.replication.throttled.replicas": "*"}, BrokerConfig())}
    assert (entries["leader.replication.throttled.replicas"].value, entries["follower.replication.throttled.replicas"]
            .value) == ("*", "")


def _throttled_move(leader_side: bool) -> Harness:
    """Brokers 1 and 2 hold "t" with broker 1 leading; the throttle of one side is set to 1 byte/s over "*", data
    is produced (its replication to broker 2 counts toward the leader's rate), then broker 3 is added. Followers
    fetch one batch at a time, so broker 3's first fetch, before its own rate has measured anything, copies one."""
    h = Harness({"min.insync.replicas": 2}, brokers=3, broker_config={"replica.fetch.max.bytes": 1})
    h.run(3_000)
    replicas = "leader.replication.throttled.replicas" if leader_side else "follower.replication.throttled.replicas"
    h.controller.create_topic("t", 1, 0, {replicas: "*"}, h.clock.now, assignments=[(0, (1, 2))])
    rate = "leader.replication.throttled.rate" if leader_side else "follower.replication.throttled.rate"
    h.controller.alter_broker_configs("", [ConfigChange(rate, ConfigOp.SET, "1")], h.clock.now)
    h.run(1_000)
    for correlation in range(5):
        h.produce(-1, correlation)
    h.run(1_000)
    assert h.cores[1].high_watermark(TP) == 15
    [outcome] = h.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, (1, 2, 3))],
                                                           h.clock.now).response
    assert outcome is None
    return h


@pytest.mark.parametrize("leader_side", [True, False])
def test_a_throttled_reassignment_copies_no_more_over_the_rate_while_producers_go_on(leader_side: bool) -> None:
    h = _throttled_move(leader_side)
    h.run(4_000)
    reg = h.controller.image.topic("t").partitions[0]  # type: ignore[union-attr]
    assert reg.adding_replicas == (3,) and 3 not in reg.isr
    assert h.cores[3].partitions[TP].log_end_offset == (0 if leader_side else 3)  # held back
    h.produce(-1, 9)  # acks=all waits only for the in-sync replicas 1 and 2
    h.run(1_000)
    assert h.cores[1].high_watermark(TP) == 18
    rate = "leader.replication.throttled.rate" if leader_side else "follower.replication.throttled.rate"
    h.controller.alter_broker_configs("", [ConfigChange(rate, ConfigOp.DELETE)], h.clock.now)
    h.run(3_000)
    reg = h.controller.image.topic("t").partitions[0]  # type: ignore[union-attr]
    assert (reg.replicas, set(reg.isr), reg.adding_replicas) == ((1, 2, 3), {1, 2, 3}, ())
    assert h.cores[3].partitions[TP].log_end_offset == 18
