from __future__ import annotations

import json

import pytest

from insync.metadata.records import (
    BrokerConfigRecord,
    BrokerRegistrationChangeRecord,
    ClusterIdRecord,
    ConfigRecord,
    ControllerChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RecordError,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    new_cluster_id,
    record_from_dict,
)

TID = "5f0e4c5e-62b4-4a57-8d35-8d5a6c1f8c11"

ALL = [
    TopicRecord("orders", TID),
    PartitionRecord(TID, 0, (1, 2, 3), (1, 2), 1, 4, 9),
    PartitionChangeRecord(TID, 0, (1,), None, 4, 10),
    PartitionChangeRecord(TID, 0, None, -1, 5, 11),
    PartitionRecord(TID, 1, (1, 2, 3), (1,), 1, 4, 9, (2, 3), (), 1),
    PartitionChangeRecord(TID, 1, (), -1, 5, 10, eligible_leader_replicas=(1, 2), last_known_elr=(3,)),
    PartitionChangeRecord(TID, 1, None, None, 5, 11, leader_recovery_state=0),
    RemoveTopicRecord(TID),
    RegisterBrokerRecord(1, 42, "inc-a", "10.0.0.1", 9092, "rack-1"),
    RegisterBrokerRecord(2, 43, "inc-b", "10.0.0.2", 9092),
    FenceBrokerRecord(1, 42),
    UnfenceBrokerRecord(1, 42),
    BrokerRegistrationChangeRecord(1, 42, True),
    ConfigRecord("orders", "min.insync.replicas", "2"),
    ConfigRecord("orders", "retention.ms", None),
    BrokerConfigRecord("", "log.retention.ms", "60000"),
    BrokerConfigRecord("2", "replica.lag.time.max.ms", None),
    ControllerChangeRecord(100, 3),
    ClusterIdRecord("MkU3OEVBNTcwNTJENDM2Qg"),
    FeatureLevelRecord("eligible.leader.replicas.version", 1),
]


@pytest.mark.parametrize("record", ALL, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_json(record: Record) -> None:
    encoded = json.dumps(record.to_dict())
    decoded = record_from_dict(json.loads(encoded))
    assert decoded == record
    assert json.loads(encoded)["type"] == type(record).TYPE


def test_partition_change_says_whether_it_is_isr_only() -> None:
    assert PartitionChangeRecord(TID, 0, (1,), None, 4, 10).is_isr_only
    assert not PartitionChangeRecord(TID, 0, (1,), 1, 5, 10).is_isr_only
    assert not PartitionChangeRecord(TID, 0, None, -1, 5, 10).is_isr_only


def test_optional_field_may_be_absent() -> None:
    data = RegisterBrokerRecord(2, 43, "inc-b", "h", 1).to_dict()
    del data["rack"]
    assert record_from_dict(data) == RegisterBrokerRecord(2, 43, "inc-b", "h", 1)


@pytest.mark.parametrize(("data", "message"), [
    ({"type": "partition", "topic_id": TID, "partition": 0, "replicas": [1], "isr": [1], "leader": 1,
      "leader_epoch": 0}, "PartitionRecord: missing field partition_epoch"),
    ({"type": "partition", "topic_id": TID, "partition": "0", "replicas": [1], "isr": [1], "leader": 1,
      "leader_epoch": 0, "partition_epoch": 0}, "PartitionRecord.partition: expected an integer"),
    ({"type": "partition", "topic_id": TID, "partition": 0, "replicas": [1, "x"], "isr": [1], "leader": 1,
      "leader_epoch": 0, "partition_epoch": 0}, r"PartitionRecord.replicas\[1\]: expected an integer"),
    ({"type": "partition", "topic_id": TID, "partition": 0, "replicas": [1], "isr": [2], "leader": 2,
      "leader_epoch": 0, "partition_epoch": 0}, "isr \\[2\\] not within replicas"),
    ({"type": "partition", "topic_id": TID, "partition": 0, "replicas": [1, 1], "isr": [1], "leader": 1,
      "leader_epoch": 0, "partition_epoch": 0}, "replicas \\[1, 1\\] has duplicates"),
    ({"type": "partition_change", "topic_id": TID, "partition": 0, "isr": None, "leader": None,
      "leader_epoch": 0, "partition_epoch": 1}, "changes nothing"),
    ({"type": "broker_registration_change", "broker_id": 1, "broker_epoch": 2, "in_controlled_shutdown": 1},
     "in_controlled_shutdown: expected true or false"),
    ({"type": "topic", "name": "t", "topic_id": TID, "colour": "red"}, "TopicRecord: unknown field colour"),
    ({"type": "nope"}, "unknown record type 'nope'"),
    ({"name": "t"}, "unknown record type None"),
    ([1, 2], "must be a JSON object"),
    ({"type": "config", "topic": "t", "key": "k", "value": 5}, "ConfigRecord.value: expected a string"),
    ({"type": "controller_change", "controller_id": 1, "controller_epoch": 0}, "controller_epoch 0 must be > 0"),
    ({"type": "broker_config", "broker": "-1", "key": "k", "value": "v"}, "broker '-1' is neither a broker id"),
    ({"type": "broker_config", "broker": "1", "key": "", "value": "v"}, "BrokerConfigRecord: empty key"),
])
def test_malformed_record_dict_is_a_clear_error(data: object, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        record_from_dict(data)


def test_an_old_partition_line_without_the_kip_966_fields_decodes_with_their_defaults() -> None:
    old = {"type": "partition", "topic_id": TID, "partition": 0, "replicas": [1, 2], "isr": [1, 2], "leader": 1,
           "leader_epoch": 0, "partition_epoch": 0}
    record = record_from_dict(old)
    assert isinstance(record, PartitionRecord)
    assert (record.eligible_leader_replicas, record.last_known_elr, record.leader_recovery_state) == ((), (), 0)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: PartitionRecord(TID, 0, (1, 2, 3), (1, 2), 1, 0, 0, (2,)), r"isr \[1, 2\] and eligible_leader_"),
    (lambda: PartitionRecord(TID, 0, (1, 2), (1,), 1, 0, 0, (3,)), "eligible_leader_replicas .* not within"),
    (lambda: PartitionChangeRecord(TID, 0, (1,), None, 0, 1, eligible_leader_replicas=(1,)), "overlap"),
    (lambda: PartitionChangeRecord(TID, 0, None, None, 0, 1, leader_recovery_state=2), "leader_recovery_state 2"),
    (lambda: PartitionChangeRecord(TID, 0, None, None, 0, 1, last_known_elr=(2, 2)), "duplicates"),
])
def test_elr_fields_are_checked_on_construction(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RecordError, match=message):
        build()


@pytest.mark.parametrize(("build", "message"), [
    (lambda: PartitionRecord(TID, 0, (1, 2), (1,), 1, 0, 0, adding_replicas=(3,)), "not within replicas"),
    (lambda: PartitionRecord(TID, 0, (1, 2), (1,), 1, 0, 0, removing_replicas=(2,), adding_replicas=(2,)),
     "overlap"),
    (lambda: PartitionChangeRecord(TID, 0, None, None, 0, 1, replicas=()), "replicas is empty"),
    (lambda: PartitionChangeRecord(TID, 0, None, None, 0, 1, replicas=(1, 2), removing_replicas=(3,)),
     "not within replicas"),
])
def test_reassignment_fields_are_checked_on_construction(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RecordError, match=message):
        build()


def test_a_replica_change_is_not_isr_only() -> None:
    assert not PartitionChangeRecord(TID, 0, None, None, 0, 1, replicas=(1, 2)).is_isr_only
    assert not PartitionChangeRecord(TID, 0, None, None, 0, 1, removing_replicas=(), adding_replicas=()).is_isr_only


def test_cluster_ids_are_random_uuids_as_kafka_prints_them() -> None:
    import base64
    import random
    import uuid

    ids = {new_cluster_id(random.Random(seed)) for seed in range(200)}
    assert len(ids) == 200 and new_cluster_id(random.Random(3)) == new_cluster_id(random.Random(3))
    for text in ids:
        assert len(text) == 22 and not text.startswith("-") and ClusterIdRecord(text).cluster_id == text
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")).version == 4


@pytest.mark.parametrize("bad", ["insync-cluster-0001", "", "MkU3OEVBNTcwNTJENDM2Q=", "MkU3OEVBNTcwNTJENDM2Qg/"])
def test_a_cluster_id_that_is_not_kafkas_form_is_refused(bad: str) -> None:
    with pytest.raises(RecordError, match="cluster_id"):
        ClusterIdRecord(bad)
