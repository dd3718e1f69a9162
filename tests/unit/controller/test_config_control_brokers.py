"""Dynamic broker configs at the controller: BrokerConfigRecords per broker and cluster-wide, Kafka's refusals,
validate_only, and cluster-wide defaults that the controller's own elections follow."""

from __future__ import annotations

import random

import pytest
from ctrl_harness import (
    CONTROLLER_ID,
    RECOVERY_OFF,
    Harness,
    below_min_isr,
    expire,
    set_isr,
    three_broker_topic,
)

from insync import errors
from insync.config import BrokerConfig, ConfigChange, ConfigOp
from insync.controller.controller import Controller
from insync.controller.store import MemoryStore
from insync.errors import KafkaException
from insync.metadata.records import BrokerConfigRecord


def _set(key: str, value: str | None, op: ConfigOp = ConfigOp.SET) -> ConfigChange:
    return ConfigChange(key, op, value)


def test_broker_and_cluster_wide_configs_become_records_of_the_changed_keys() -> None:
    h = Harness()
    h.start(1, 2)
    assert h.controller.alter_broker_configs("1", [_set("log.retention.ms", "60000")], h.now,
                                             validate_only=True).records == ()
    assert h.controller.image.dynamic_configs("1") == {}
    records = h.controller.alter_broker_configs("1", [_set("log.retention.ms", "60000"),
                                                      _set("replica.lag.time.max.ms", "5000")], h.now).records
    assert records == (BrokerConfigRecord("1", "log.retention.ms", "60000"),
                       BrokerConfigRecord("1", "replica.lag.time.max.ms", "5000"))
    h.controller.alter_broker_configs("", [_set("min.insync.replicas", "2")], h.now)
    assert h.controller.image.dynamic_configs("") == {"min.insync.replicas": "2"}
    # Unchanged keys write nothing; DELETE removes; AlterConfigs (replace) sets the whole layer.
    assert h.controller.alter_broker_configs("1", [_set("log.retention.ms", "60000")], h.now).records == ()
    h.controller.alter_broker_configs("1", [_set("log.retention.ms", None, ConfigOp.DELETE)], h.now)
    assert h.controller.image.dynamic_configs("1") == {"replica.lag.time.max.ms": "5000"}
    h.controller.alter_broker_configs("1", [_set("log.segment.bytes", "1048576")], h.now, replace=True)
    assert h.controller.image.dynamic_configs("1") == {"log.segment.bytes": "1048576"}


@pytest.mark.parametrize(("broker", "change", "error", "words"), [
    ("1", _set("listeners", "PLAINTEXT://127.0.0.1:1"), "INVALID_REQUEST",
     "Cannot update these configs dynamically: listeners"),
    ("", _set("num.partitions", "3"), "INVALID_REQUEST", "Cannot update these configs dynamically: num.partitions"),
    ("1", _set("bogus.key", "1"), "INVALID_REQUEST", "Unknown broker configs: bogus.key"),
    ("one", _set("log.retention.ms", "1"), "INVALID_REQUEST", "Invalid broker name one"),
    ("7", _set("log.retention.ms", "1"), "BROKER_ID_NOT_REGISTERED", "No node with id 7 found."),
    ("1", _set("min.insync.replicas", "x"), "INVALID_CONFIG", "min.insync.replicas"),
    ("1", _set("log.retention.ms", "5", ConfigOp.APPEND), "INVALID_CONFIG", "list configs only"),
    # A lag below the (default) 500 ms fetch wait would make idle followers leave the ISR: Kafka's rule.
    ("", _set("replica.lag.time.max.ms", "100"), "INVALID_CONFIG", "replica.fetch.wait.max.ms"),
])
def test_refusals_name_the_key_and_write_nothing(broker: str, change: ConfigChange, error: str, words: str) -> None:
    h = Harness()
    h.start(1)
    before = h.controller.image.broker_configs
    with pytest.raises(KafkaException) as refused:
        h.controller.alter_broker_configs(broker, [_set("log.roll.ms", "60000"), change], h.now)
    assert refused.value.error is errors.BY_NAME[error] and words in refused.value.detail
    assert h.controller.image.broker_configs == before


def test_a_cluster_wide_unclean_election_default_elects_offline_partitions_at_once() -> None:
    h = three_broker_topic(RECOVERY_OFF)
    leader = h.partition("t").leader
    others = tuple(b for b in (1, 2, 3) if b != leader)
    set_isr(h, "t", (leader,))
    expire(h, {leader}, others)
    assert h.partition("t").leader == -1
    h.controller.alter_broker_configs("1", [_set("unclean.leader.election.enable", "true")], h.now)
    assert h.partition("t").leader == -1  # one broker's value does not govern the controller's elections
    h.controller.alter_broker_configs("", [_set("unclean.leader.election.enable", "true")], h.now)
    assert h.partition("t").leader in others


def test_a_cluster_wide_min_isr_judges_elrs_again() -> None:
    h, leader = below_min_isr()  # static min.insync.replicas=2, the ISR down to the leader
    h.controller.alter_broker_configs("", [_set("min.insync.replicas", "1")], h.now)
    reg = h.partition("t")
    assert (reg.leader, reg.isr, reg.elr) == (leader, (leader,), ())


@pytest.mark.parametrize("broker", ["1", ""])
def test_kafka_reassign_partitions_clearing_unset_throttles_succeeds_and_writes_nothing(broker: str) -> None:
    h = Harness()
    h.start(1)
    offset = h.controller.image.offset
    rates = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")
    result = h.controller.alter_broker_configs(broker, [ConfigChange(key, ConfigOp.DELETE) for key in rates], h.now)
    assert result.records == () and h.controller.image.offset == offset


def test_with_elr_on_min_isr_is_cluster_wide_as_in_kafka() -> None:
    """Kafka 4.x's ELR safety: the controller writes the cluster-wide min.insync.replicas (its static value) when
    it takes office and removes per-broker ones; a per-broker value and removing the cluster-wide one are refused."""
    store = MemoryStore()
    h = Harness({"min.insync.replicas": 2, "eligible.leader.replicas.enable": False}, store=store)
    h.start(1, 2)
    h.controller.alter_broker_configs("1", [_set("min.insync.replicas", "1")], h.now)  # allowed without ELR
    assert h.controller.image.broker_configs == {"1": {"min.insync.replicas": "1"}}
    elr = Controller(CONTROLLER_ID, BrokerConfig({"node.id": CONTROLLER_ID, "min.insync.replicas": 2}), store, h.now,
                     random.Random(1))
    assert elr.image.dynamic_configs("") == {"min.insync.replicas": "2"} and elr.image.dynamic_configs("1") == {}
    for broker, change, words in [
            ("2", _set("min.insync.replicas", "3"), "Broker-level min.insync.replicas cannot be altered while ELR"),
            ("", _set("min.insync.replicas", None, ConfigOp.DELETE),
             "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")]:
        with pytest.raises(KafkaException) as refused:
            elr.alter_broker_configs(broker, [change], h.now)
        assert refused.value.error is errors.INVALID_CONFIG and words in refused.value.detail
    elr.alter_broker_configs("", [_set("min.insync.replicas", "3")], h.now)  # changing it stays allowed
    assert elr.image.dynamic_configs("") == {"min.insync.replicas": "3"}
    again = Controller(CONTROLLER_ID, BrokerConfig({"node.id": CONTROLLER_ID}), store, h.now, random.Random(1))
    assert again.image.dynamic_configs("") == {"min.insync.replicas": "3"}  # kept: nothing to write


def test_a_standby_controller_takes_per_node_configs_as_kafka_accepts_any_controller_id() -> None:
    h = Harness({"controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:1,1001@127.0.0.1:2"})
    h.start(1)
    h.controller.alter_broker_configs("1001", [_set("log.retention.ms", "60000")], h.now)
    assert h.controller.image.dynamic_configs("1001") == {"log.retention.ms": "60000"}
    with pytest.raises(KafkaException, match="No node with id 1002 found."):
        h.controller.alter_broker_configs("1002", [_set("log.retention.ms", "60000")], h.now)
