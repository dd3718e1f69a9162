from __future__ import annotations

from insync.broker.metadata import BrokerMetadata, DeltaKind
from insync.metadata.records import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from insync.types import BrokerId, TopicPartition

TP = TopicPartition("t", 0)


def _setup() -> list[tuple[int, Record]]:
    records: list[Record] = [RegisterBrokerRecord(b, b - 1, f"i{b}", "h", 1) for b in (1, 2, 3)]
    records += [TopicRecord("t", "id-t"), PartitionRecord("id-t", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0)]
    return list(enumerate(records))


def test_leader_and_follower_deltas_on_creation() -> None:
    leader, follower = BrokerMetadata(BrokerId(1)), BrokerMetadata(BrokerId(2))
    assert [d.kind for d in leader.apply(_setup()) or []] == [DeltaKind.LEADER]
    deltas = follower.apply(_setup()) or []
    assert [(d.kind, d.topic_partition) for d in deltas] == [(DeltaKind.FOLLOWER, TP)]
    assert follower.applied_offset == 5


def test_isr_only_change_and_leader_change_and_stop() -> None:
    meta = BrokerMetadata(BrokerId(1))
    meta.apply(_setup())
    isr_only = PartitionChangeRecord("id-t", 0, (1, 2), None, 0, 1)
    assert [d.kind for d in meta.apply([(5, isr_only)]) or []] == [DeltaKind.ISR]
    moved = PartitionChangeRecord("id-t", 0, None, 2, 1, 2)
    deltas = meta.apply([(6, moved)]) or []
    assert [d.kind for d in deltas] == [DeltaKind.FOLLOWER]
    assert deltas[0].registration is not None and deltas[0].registration.leader == 2
    assert [d.kind for d in meta.apply([(7, RemoveTopicRecord("id-t"))]) or []] == [DeltaKind.STOP]


def test_a_topic_deleted_and_created_again_in_one_batch_stops_the_old_partition_first() -> None:
    """The new topic's partition is a new partition: the old one (led here at a later epoch) is stopped and its log
    deleted before the new one starts, or the broker would apply the new epoch 0 to the old partition."""
    meta = BrokerMetadata(BrokerId(2))
    meta.apply(_setup())
    meta.apply([(5, PartitionChangeRecord("id-t", 0, None, 2, 1, 1))])  # led here at epoch 1
    recreated = [(6, RemoveTopicRecord("id-t")), (7, TopicRecord("t", "id-t2")),
                 (8, PartitionRecord("id-t2", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0))]
    deltas = meta.apply(recreated) or []
    assert [(d.kind, d.topic_id, d.topic_partition) for d in deltas] == [(DeltaKind.STOP, "id-t", TP),
                                                                           (DeltaKind.FOLLOWER, "id-t2", TP)]


def test_a_gap_is_refused_and_a_replay_is_ignored() -> None:
    meta = BrokerMetadata(BrokerId(3))
    records = _setup()
    assert meta.apply(records[2:]) is None
    assert meta.applied_offset == 0
    meta.apply(records)
    assert meta.apply(records) == []
    assert meta.applied_offset == 5


def test_config_changes_of_an_existing_topic_reach_the_partitions_hosted_here() -> None:
    hosting, elsewhere = BrokerMetadata(BrokerId(2)), BrokerMetadata(BrokerId(4))
    created = _setup() + [(5, ConfigRecord("t", "retention.ms", "1000"))]  # a new topic's configs: no CONFIG delta
    assert [d.kind for d in hosting.apply(created) or []] == [DeltaKind.FOLLOWER]
    elsewhere.apply(created)
    altered = [(6, ConfigRecord("t", "min.insync.replicas", "2")), (7, ConfigRecord("t", "retention.ms", None))]
    deltas = hosting.apply(altered) or []
    assert [(d.kind, d.topic_partition) for d in deltas] == [(DeltaKind.CONFIG, TP)]
    assert hosting.image.configs("t") == {"min.insync.replicas": "2"}
    assert elsewhere.apply(altered) == []


def test_a_reassignment_makes_an_added_broker_a_follower_and_stops_a_removed_one() -> None:
    records = [(0, RegisterBrokerRecord(BrokerId(4), 3, "i4", "h", 1)), *((o + 1, r) for o, r in _setup())]
    added, removed, leader = BrokerMetadata(BrokerId(4)), BrokerMetadata(BrokerId(1)), BrokerMetadata(BrokerId(2))
    for meta in (added, removed, leader):
        meta.apply(records)
    started = PartitionChangeRecord("id-t", 0, None, None, 0, 1, replicas=(2, 3, 4, 1), removing_replicas=(1,),
                                    adding_replicas=(4,))
    deltas = added.apply([(6, started)]) or []
    assert [(d.kind, d.topic_partition) for d in deltas] == [(DeltaKind.FOLLOWER, TP)]
    assert deltas[0].registration is not None and deltas[0].registration.adding_replicas == (4,)
    assert [d.kind for d in leader.apply([(6, started)]) or []] == [DeltaKind.ISR]  # same epoch, new replicas
    done = PartitionChangeRecord("id-t", 0, (2, 3, 4), 2, 1, 2, replicas=(2, 3, 4), removing_replicas=(),
                                 adding_replicas=())
    removed.apply([(6, started)])
    assert [d.kind for d in removed.apply([(7, done)]) or []] == [DeltaKind.STOP]
    assert [d.kind for d in leader.apply([(7, done)]) or []] == [DeltaKind.LEADER]
