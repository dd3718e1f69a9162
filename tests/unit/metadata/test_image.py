from __future__ import annotations

import pytest

from insync.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration
from insync.metadata.records import (
    BrokerConfigRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ControllerChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

A = "00000000-0000-4000-8000-00000000000a"
B = "00000000-0000-4000-8000-00000000000b"

RECORDS: list[Record] = [
    ControllerChangeRecord(100, 1),
    RegisterBrokerRecord(1, 1, "i1", "h1", 9001),
    RegisterBrokerRecord(2, 2, "i2", "h2", 9002, "r2"),
    RegisterBrokerRecord(3, 3, "i3", "h3", 9003),
    UnfenceBrokerRecord(1, 1),
    UnfenceBrokerRecord(2, 2),
    UnfenceBrokerRecord(3, 3),
    TopicRecord("a", A),
    ConfigRecord("a", "min.insync.replicas", "2"),
    PartitionRecord(A, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0),
    PartitionRecord(A, 1, (2, 3, 1), (2, 3, 1), 2, 0, 0),
    TopicRecord("b", B),
    PartitionRecord(B, 0, (3,), (3,), 3, 0, 0),
    PartitionChangeRecord(A, 0, (1, 2), None, 0, 1),  # ISR shrink
    FenceBrokerRecord(3, 3),
    PartitionChangeRecord(B, 0, None, -1, 1, 1),  # offline
    PartitionChangeRecord(A, 1, (2, 1), None, 0, 1),
    BrokerRegistrationChangeRecord(2, 2, True),
]


def test_replay_builds_the_expected_image() -> None:
    image = MetadataImage.from_records(RECORDS)
    assert image.offset == len(RECORDS)
    assert (image.controller_id, image.controller_epoch) == (100, 1)
    assert image.topic_ids_by_name == {"a": A, "b": B}
    assert set(image.topics_by_id) == {A, B}
    assert image.partition(A, 0) == PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 1)
    assert image.partition(A, 1) == PartitionRegistration((2, 3, 1), (2, 1), 2, 0, 1)
    assert image.partition(B, 0) == PartitionRegistration((3,), (3,), -1, 1, 1)
    assert image.brokers[1] == BrokerRegistration(1, 1, "i1", "h1", 9001, None, False, False)
    assert image.brokers[2] == BrokerRegistration(2, 2, "i2", "h2", 9002, "r2", False, True)
    assert image.brokers[3].fenced
    assert image.configs("a") == {"min.insync.replicas": "2"}
    assert image.eligible_brokers() == [1]  # 2 is shutting down, 3 fenced


def test_helpers_scan_partitions() -> None:
    image = MetadataImage.from_records(RECORDS)
    assert [(v.topic, v.partition) for v in image.partitions_led_by(2)] == [("a", 1)]
    assert [(v.topic, v.partition) for v in image.offline_partitions()] == [("b", 0)]
    assert [(v.topic, v.partition) for v in image.under_replicated_partitions()] == [("a", 0), ("a", 1)]


def test_replay_returns_a_new_image_and_leaves_the_old_one_alone() -> None:
    before = MetadataImage.from_records(RECORDS[:13])
    after = before.replay(RECORDS[13])
    assert before.partition(A, 0) == PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0)
    assert after.partition(A, 0) is not None and after.partition(A, 0).isr == (1, 2)  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        before.brokers[9] = before.brokers[1]  # type: ignore[index]


def test_remove_topic_forgets_name_partitions_and_configs() -> None:
    image = MetadataImage.from_records([*RECORDS, RemoveTopicRecord(A)])
    assert image.topic("a") is None and A not in image.topics_by_id
    assert image.configs("a") == {}
    assert image.topic("b") is not None


def test_config_record_with_null_value_deletes_the_override() -> None:
    image = MetadataImage.from_records([*RECORDS, ConfigRecord("a", "min.insync.replicas", None)])
    assert image.configs("a") == {}


def test_broker_config_records_set_and_delete_per_broker_and_cluster_wide() -> None:
    image = MetadataImage.from_records([*RECORDS, BrokerConfigRecord("", "log.retention.ms", "60000"),
                                        BrokerConfigRecord("1", "min.insync.replicas", "2"),
                                        BrokerConfigRecord("1", "log.roll.ms", "1000"),
                                        BrokerConfigRecord("1", "min.insync.replicas", None)])
    assert image.dynamic_configs("") == {"log.retention.ms": "60000"}
    assert image.dynamic_configs("1") == {"log.roll.ms": "1000"} and image.dynamic_configs("2") == {}
    assert image.configs("a") == {"min.insync.replicas": "2"}  # topic configs are apart


def test_replay_refuses_a_change_with_the_wrong_partition_epoch() -> None:
    image = MetadataImage.from_records(RECORDS)
    with pytest.raises(AssertionError):
        image.replay(PartitionChangeRecord(A, 0, (1,), None, 0, 5))
    with pytest.raises(AssertionError):  # a leadership change must bump the leader epoch
        image.replay(PartitionChangeRecord(A, 0, None, 2, 0, 2))


def test_replay_is_deterministic() -> None:
    assert MetadataImage.from_records(RECORDS) == MetadataImage.from_records(list(RECORDS))


def test_replaying_a_batch_is_replaying_its_records_one_by_one() -> None:
    records = [*RECORDS, PartitionRecord(A, 2, (1, 2, 3), (1, 2), 1, 0, 0), RemoveTopicRecord(B),
               PartitionChangeRecord(A, 2, (1,), None, 0, 1)]
    one_by_one = MetadataImage()
    for record in records:
        one_by_one = one_by_one.replay(record)
    for split in (0, 9, 13, 17, len(records)):  # batches cut inside and between runs of partition records
        start = MetadataImage.from_records(records[:split])
        assert start.replay_all(records[split:]) == one_by_one
        assert start == MetadataImage.from_records(records[:split])  # the image it started from is unchanged


def test_replay_fills_the_elr_fields_and_a_change_record_leaves_unset_ones_alone() -> None:
    image = MetadataImage.from_records(RECORDS[:10])
    shrink = PartitionChangeRecord(A, 0, (1,), None, 0, 1, eligible_leader_replicas=(2, 3))
    image = image.replay(shrink)
    reg = image.partition(A, 0)
    assert reg is not None and (reg.isr, reg.elr, reg.last_known_elr) == ((1,), (2, 3), ())
    empty = PartitionChangeRecord(A, 0, (), -1, 1, 2, eligible_leader_replicas=(1, 2, 3))
    image = image.replay(empty)
    reg = image.partition(A, 0)
    assert reg is not None and (reg.isr, reg.leader, reg.elr) == ((), -1, (1, 2, 3)) and reg.is_offline
    uncleanly = PartitionChangeRecord(A, 0, (3,), 3, 2, 3, eligible_leader_replicas=(), last_known_elr=(),
                                      leader_recovery_state=1)
    image = image.replay(uncleanly)
    reg = image.partition(A, 0)
    assert reg is not None and (reg.isr, reg.leader, reg.elr, reg.is_recovering) == ((3,), 3, (), True)
    assert [v.partition for v in image.partitions_with_replica_in_isr_or_elr(3) if v.topic == "a"] == [0]


def test_replay_refuses_an_elr_member_that_is_also_in_the_isr() -> None:
    image = MetadataImage.from_records(RECORDS[:10])
    with pytest.raises(AssertionError):
        image.replay(PartitionChangeRecord(A, 0, None, None, 0, 1, eligible_leader_replicas=(1,)))
