from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from apis_helpers import (
    OTHER_ID,
    TOPIC_ID,
    UNKNOWN_ID,
    client_request,
    cluster_image,
    request_entity,
    running_controller,
    wire,
)

from insync import errors
from insync.config import BrokerConfig
from insync.errors import KafkaException
from insync.protocol.kio import ERROR_MESSAGE_MAX
from insync.wire import topics
from insync.wire.internal import (
    CreateTopicResult,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsResponse,
    created,
)

CONFIG = BrokerConfig({"default.replication.factor": 3})
NEW_ID = "11111111-2222-4333-8444-555555555555"


def creatable(version: int, name: str, partitions: int, rf: int, assignments: tuple[object, ...] = (),
              configs: tuple[tuple[str, str | None], ...] = ()) -> object:
    config_entities = tuple(request_entity(19, version, "CreatableTopicConfig", name=k, value=v) for k, v in configs)
    return request_entity(19, version, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=rf,
                          assignments=assignments, configs=config_entities)


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_round_trip(version: int) -> None:
    assignment = request_entity(19, version, "CreatableReplicaAssignment", partition_index=0, broker_ids=(1,))
    wire_topics = (creatable(version, "events", 3, -1, configs=(("min.insync.replicas", "2"),)),
                   creatable(version, "defaults", -1, 2),
                   creatable(version, "manual", 1, 1, assignments=(assignment,)),
                   creatable(version, "dup", 1, 1), creatable(version, "dup", 2, 1))
    request = client_request(19, version, topics=wire_topics, timeout=datetime.timedelta(seconds=30),
                             validate_only=False)
    decoded = topics.decode_create_topics(request, CONFIG)
    events, defaults = decoded.request.topics
    assert (events.name, events.num_partitions, events.replication_factor) == ("events", 3, 3)
    assert events.configs == (("min.insync.replicas", "2"),)
    assert (defaults.num_partitions, defaults.replication_factor) == (1, 2)
    assert decoded.request.timeout_ms == 30_000 and not decoded.request.validate_only
    assert [(r.topic.name, r.error) for r in decoded.rejected] == [("manual", errors.INVALID_REQUEST),
                                                                   ("dup", errors.INVALID_REQUEST)]

    response = CreateTopicsResponse(42, (created(events, NEW_ID), CreateTopicResult(
        "defaults", errors.TOPIC_ALREADY_EXISTS, "topic 'defaults' already exists")))
    body = wire(topics.encode_create_topics(response, decoded, CONFIG))
    results = {t.name: t for t in body.topics}
    assert set(results) == {"events", "defaults", "manual", "dup"}
    assert results["events"].error_code == 0
    assert (results["defaults"].error_code, results["defaults"].error_message) == (
        errors.TOPIC_ALREADY_EXISTS.code, "topic 'defaults' already exists")
    assert "assignment" in results["manual"].error_message
    if version >= 5:
        new = results["events"]
        assert (new.num_partitions, new.replication_factor) == (3, 3)
        by_name = {c.name: c for c in new.configs}
        assert (by_name["min.insync.replicas"].value, by_name["min.insync.replicas"].config_source) == ("2", 1)
        assert results["defaults"].configs == () and results["manual"].configs == ()  # refused: Kafka's []
    if version >= 7:
        assert results["events"].topic_id == uuid.UUID(NEW_ID)


def test_a_refusal_quoting_a_longest_string_still_fits_a_v4_answer() -> None:
    """A name or config value of 32,767 bytes quoted in an error message would overflow a non-flexible string."""
    name = "x" * 32_767
    request = client_request(19, 4, topics=(creatable(4, name, 1, 1, configs=(("cleanup.policy", name),)),),
                             timeout=datetime.timedelta(seconds=30), validate_only=False)
    decoded = topics.decode_create_topics(request, CONFIG)
    response = CreateTopicsResponse(42, (CreateTopicResult(name, errors.INVALID_CONFIG, f"Invalid value {name} for "
                                                           f"configuration cleanup.policy of topic {name}"),))
    [result] = wire(topics.encode_create_topics(response, decoded, CONFIG)).topics
    assert result.name == name and result.error_code == errors.INVALID_CONFIG.code
    assert result.error_message == f"Invalid value {name}"[:ERROR_MESSAGE_MAX]


def test_create_topics_with_replica_assignments_needs_both_counts_at_minus_one() -> None:
    def assigned(partition: int, *brokers: int) -> object:
        return request_entity(19, 7, "CreatableReplicaAssignment", partition_index=partition, broker_ids=brokers)

    wire_topics = (creatable(7, "placed", -1, -1, assignments=(assigned(1, 3, 1), assigned(0, 2, 3))),
                   creatable(7, "rf-set", -1, 2, assignments=(assigned(0, 1, 2),)),
                   creatable(7, "count-set", 1, -1, assignments=(assigned(0, 1, 2),)))
    decoded = topics.decode_create_topics(client_request(19, 7, topics=wire_topics, validate_only=False,
                                                         timeout=datetime.timedelta(seconds=30)), CONFIG)
    [placed] = decoded.request.topics
    assert (placed.num_partitions, placed.replication_factor) == (2, 2)
    assert placed.assignments == ((1, (3, 1)), (0, (2, 3)))  # as sent: the controller checks the numbering
    assert [(r.topic.name, r.error, r.message) for r in decoded.rejected] == [
        ("rf-set", errors.INVALID_REQUEST,
         "A manual partition assignment was specified, but replication factor was not set to -1."),
        ("count-set", errors.INVALID_REQUEST,
         "A manual partition assignment was specified, but numPartitions was not set to -1.")]


@pytest.mark.parametrize("version", [1, 5, 6])
def test_delete_topics_round_trip(version: int) -> None:
    if version < 6:
        fields: dict[str, object] = {"topic_names": ("orders", "nope")}
    else:
        fields = {"topics": (request_entity(20, 6, "DeleteTopicState", name="orders", topic_id=None),
                             request_entity(20, 6, "DeleteTopicState", name=None, topic_id=uuid.UUID(OTHER_ID)),
                             request_entity(20, 6, "DeleteTopicState", name=None, topic_id=uuid.UUID(UNKNOWN_ID)))}
    request = client_request(20, version, 42, timeout=datetime.timedelta(seconds=5), **fields)
    decoded = topics.decode_delete_topics(request, cluster_image())
    expected = ("orders", "nope") if version < 6 else ("orders", "logs")
    assert decoded.request.topics == expected and decoded.request.timeout_ms == 5000
    response = DeleteTopicsResponse(42, (DeleteTopicResult("orders", errors.NONE, None, TOPIC_ID),
                                         DeleteTopicResult(expected[1], errors.UNKNOWN_TOPIC_OR_PARTITION, "no such")))
    body = wire(topics.encode_delete_topics(response, decoded))
    codes = [(r.name, r.error_code) for r in body.responses]
    assert codes[:2] == [("orders", 0), (expected[1], errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
    if version >= 6:
        assert body.responses[0].topic_id == uuid.UUID(TOPIC_ID)
        assert (body.responses[2].topic_id, body.responses[2].error_code) == (uuid.UUID(UNKNOWN_ID),
                                                                              errors.UNKNOWN_TOPIC_ID.code)
    if version >= 5:
        assert body.responses[1].error_message == "no such"


def test_create_and_delete_through_the_controller() -> None:
    """The decoded shapes are the controller's call shapes; its exceptions become per-topic results."""
    controller, now = running_controller(), 100
    request = client_request(19, 7, topics=(creatable(7, "events", 2, 3, configs=(("retention.ms", "1000"),)),
                                            creatable(7, "orders", 1, 1), creatable(7, "big", 1, 9)),
                             timeout=datetime.timedelta(seconds=30), validate_only=False)
    decoded = topics.decode_create_topics(request, CONFIG)
    results = []
    for topic in decoded.request.topics:
        try:
            outcome = controller.create_topic(topic.name, topic.num_partitions, topic.replication_factor,
                                              dict(topic.configs), now)
            results.append(created(topic, outcome.response.topic_id))
        except KafkaException as exc:
            results.append(CreateTopicResult(topic.name, exc.error, exc.detail))
    body = wire(topics.encode_create_topics(CreateTopicsResponse(42, tuple(results)), decoded, CONFIG))
    by_name = {t.name: t for t in body.topics}
    events_id = controller.image.topic_ids_by_name["events"]
    assert (by_name["events"].error_code, by_name["events"].topic_id) == (0, uuid.UUID(events_id))
    assert by_name["orders"].error_code == errors.TOPIC_ALREADY_EXISTS.code
    assert by_name["big"].error_code == errors.INVALID_REPLICATION_FACTOR.code

    delete = client_request(20, 6, timeout=datetime.timedelta(seconds=5), topics=(
        request_entity(20, 6, "DeleteTopicState", name=None, topic_id=uuid.UUID(events_id)),))
    decoded_delete = topics.decode_delete_topics(delete, controller.image)
    (name,) = decoded_delete.request.topics
    deleted_id = controller.delete_topic(name, now).response
    answer = wire(topics.encode_delete_topics(DeleteTopicsResponse(42, (
        DeleteTopicResult(name, errors.NONE, None, deleted_id),)), decoded_delete))
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [("events", uuid.UUID(events_id), 0)]


# CreatePartitions

def grow_request(version: int, *topics: tuple[str, int, tuple[tuple[int, ...], ...] | None],
                 validate_only: bool = False) -> Any:
    entities = tuple(request_entity(37, version, "CreatePartitionsTopic", name=name, count=count, assignments=None
                                    if assigned is None else tuple(request_entity(
                                        37, version, "CreatePartitionsAssignment", broker_ids=ids) for ids in assigned))
                     for name, count, assigned in topics)
    return client_request(37, version, topics=entities, timeout=datetime.timedelta(seconds=5),
                          validate_only=validate_only)


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_per_topic_with_refusals(version: int) -> None:
    grown: list[tuple[str, int, bool, tuple[tuple[int, ...], ...] | None]] = []

    def grow(name: str, count: int, validate_only: bool, assignments: tuple[tuple[int, ...], ...] | None) -> None:
        if name == "small":
            raise KafkaException(errors.INVALID_PARTITIONS, "Topic already has 4 partitions.")
        grown.append((name, count, validate_only, assignments))

    request = grow_request(version, ("orders", 6, None), ("small", 4, None), ("twice", 2, None), ("twice", 3, None),
                           ("placed", 3, ((1, 2), (2, 3))), validate_only=True)
    body = wire(topics.create_partitions(request, grow))
    answers = {r.name: (r.error_code, r.error_message) for r in body.results}
    assert answers == {
        "orders": (0, None),
        "small": (errors.INVALID_PARTITIONS.code, "Topic already has 4 partitions."),
        "twice": (errors.INVALID_REQUEST.code, "Duplicate topic name."),
        "placed": (0, None),
    }
    assert grown == [("orders", 6, True, None), ("placed", 3, True, ((1, 2), (2, 3)))]  # assignments in order


def test_create_partitions_refused_without_a_controller() -> None:
    request = grow_request(2, ("a", 2, None), ("b", 3, None))
    body = wire(topics.refuse_all(request, BrokerConfig({"node.id": 1}), cluster_image(), errors.NOT_CONTROLLER, "no"))
    assert [(r.name, r.error_code) for r in body.results] == [("a", errors.NOT_CONTROLLER.code),
                                                              ("b", errors.NOT_CONTROLLER.code)]


# ElectLeaders

def elect_request(version: int, partitions: dict[str, tuple[int, ...]] | None, election_type: int = 0) -> Any:
    entities = None if partitions is None else tuple(
        request_entity(43, version, "TopicPartitions", topic=t, partitions=ps) for t, ps in partitions.items())
    return client_request(43, version, election_type=election_type, topic_partitions=entities,
                          timeout=datetime.timedelta(seconds=5))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_answers_each_partition(version: int) -> None:
    asked: list[list[tuple[str, int]] | None] = []

    def elect(election_type: int, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], errors.KafkaError]:
        assert election_type == topics.PREFERRED_ELECTION
        asked.append(partitions)
        return {("orders", 0): errors.NONE, ("orders", 1): errors.ELECTION_NOT_NEEDED,
                ("logs", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE}

    body = wire(topics.elect_leaders(elect_request(version, {"orders": (0, 1, 0), "logs": (0,)}), elect))
    assert asked == [[("orders", 0), ("orders", 1), ("logs", 0)]]  # each partition once
    results = {(r.topic, p.partition_id): p.error_code for r in body.replica_election_results
               for p in r.partition_result}
    assert results == {("orders", 0): 0, ("orders", 1): errors.ELECTION_NOT_NEEDED.code,
                       ("logs", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE.code}
    wire(topics.elect_leaders(elect_request(version, None), elect))
    assert asked[-1] is None  # every partition


def test_unclean_elections_go_to_the_unclean_election_and_unknown_types_are_refused() -> None:
    called: list[tuple[int, object]] = []

    def elect(election_type: int, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], errors.KafkaError]:
        called.append((election_type, partitions))
        return {("orders", 0): errors.BY_NAME["ELIGIBLE_LEADERS_NOT_AVAILABLE"]}

    body = wire(topics.elect_leaders(elect_request(2, {"orders": (0,)}, election_type=1), elect))
    [[result]] = [r.partition_result for r in body.replica_election_results]
    assert result.error_code == errors.BY_NAME["ELIGIBLE_LEADERS_NOT_AVAILABLE"].code
    assert called == [(topics.UNCLEAN_ELECTION, [("orders", 0)])]
    unknown = wire(topics.elect_leaders(elect_request(2, None, election_type=7), elect))
    assert unknown.error_code == errors.INVALID_REQUEST.code and len(called) == 1


def test_elect_leaders_refused_without_a_controller() -> None:
    body = wire(topics.refuse_all(elect_request(1, {"a": (0, 1)}), BrokerConfig({"node.id": 1}), cluster_image(),
                                  errors.NOT_CONTROLLER, "no"))
    assert [(p.partition_id, p.error_code) for r in body.replica_election_results for p in r.partition_result] == [
        (0, errors.NOT_CONTROLLER.code), (1, errors.NOT_CONTROLLER.code)]


def test_an_election_the_controller_refuses_whole_gets_its_error_at_the_top_and_for_each_partition() -> None:
    def too_large(election_type: int, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], Any]:
        raise KafkaException(errors.BY_NAME["POLICY_VIOLATION"], "Unable to perform excessively large batch operation.")

    body = wire(topics.elect_leaders(elect_request(2, {"a": (0, 1)}), too_large))
    assert body.error_code == errors.BY_NAME["POLICY_VIOLATION"].code
    assert [(p.partition_id, p.error_code, p.error_message) for r in body.replica_election_results
            for p in r.partition_result] == [(p, 44, "Unable to perform excessively large batch operation.")
                                             for p in (0, 1)]
