"""AlterPartitionReassignments (v0-1) and ListPartitionReassignments (v0) through the translators and a real
controller: each partition answered with Kafka's error and words, the ongoing reassignments listed with their
replicas, adding and removing replicas, and the whole request refused when no controller answers."""

from __future__ import annotations

import pytest
from apis_helpers import client_request, request_entity, running_controller, wire

from insync import errors
from insync.controller.batch import excessive_batch
from insync.controller.controller import Controller
from insync.controller.reassignment import ReassignmentTarget
from insync.errors import KafkaException
from insync.wire import reassignments
from insync.wire.versions import ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS


def alter_request(version: int, topics: dict[str, dict[int, tuple[int, ...] | None]], **fields: object):  # type: ignore[no-untyped-def]
    entities = tuple(request_entity(ALTER_PARTITION_REASSIGNMENTS, version, "ReassignableTopic", name=name, partitions=tuple(
        request_entity(ALTER_PARTITION_REASSIGNMENTS, version, "ReassignablePartition", partition_index=p, replicas=r)
        for p, r in partitions.items())) for name, partitions in topics.items())
    return client_request(ALTER_PARTITION_REASSIGNMENTS, version, topics=entities, **fields)


def list_request(topics: dict[str, tuple[int, ...]] | None):  # type: ignore[no-untyped-def]
    entities = None if topics is None else tuple(
        request_entity(LIST_PARTITION_REASSIGNMENTS, 0, "ListPartitionReassignmentsTopics", name=name,
                       partition_indexes=partitions) for name, partitions in topics.items())
    return client_request(LIST_PARTITION_REASSIGNMENTS, 0, topics=entities)


def with_fourth_broker() -> Controller:
    controller = running_controller()
    epoch = controller.register_broker(4, "inc-4", "127.0.0.1", 9094, 40).response
    controller.heartbeat(4, epoch, 50, controller.published_offset)
    return controller


def answers(body) -> dict[tuple[str, int], tuple[int, str | None]]:  # type: ignore[no-untyped-def]
    return {(t.name, int(p.partition_index)): (int(p.error_code), p.error_message)
            for t in body.responses for p in t.partitions}


@pytest.mark.parametrize("version", [0, 1])
def test_each_partition_is_answered_and_the_accepted_ones_are_listed(version: int) -> None:
    controller = with_fourth_broker()
    request = alter_request(version, {"orders": {0: (2, 3, 4), 1: (1, 9), 7: (1,)}, "nope": {0: (1,)}})
    body = wire(reassignments.alter_partition_reassignments(
        request, lambda targets: controller.alter_partition_reassignments(targets, 60).response))
    assert int(body.error_code) == 0 and body.error_message is None
    assert answers(body) == {
        ("orders", 0): (0, None),
        ("orders", 1): (errors.INVALID_REPLICA_ASSIGNMENT.code,
                        "The manual partition assignment includes broker 9, but no such broker is registered."),
        ("orders", 7): (errors.UNKNOWN_TOPIC_OR_PARTITION.code, "Unable to find partition orders:7."),
        ("nope", 0): (errors.UNKNOWN_TOPIC_OR_PARTITION.code, "Unable to find a topic named nope."),
    }
    listed = wire(reassignments.list_partition_reassignments(list_request(None), controller.image))
    [topic] = listed.topics
    [partition] = topic.partitions
    reg = controller.image.topic("orders").partitions[0]  # type: ignore[union-attr]
    assert (topic.name, int(partition.partition_index)) == ("orders", 0)
    assert (tuple(partition.replicas), tuple(partition.adding_replicas), tuple(partition.removing_replicas)) == (
        reg.replicas, (4,), reg.removing_replicas)
    assert wire(reassignments.list_partition_reassignments(list_request({"orders": (1, 2), "x": (0,)}),
                                                           controller.image)).topics == ()


def test_v1_forbids_a_replication_factor_change_when_asked_and_echoes_the_flag() -> None:
    controller = with_fourth_broker()
    request = alter_request(1, {"orders": {0: (1, 2, 3, 4)}}, allow_replication_factor_change=False)
    body = wire(reassignments.alter_partition_reassignments(
        request, lambda targets: controller.alter_partition_reassignments(targets, 60).response))
    assert body.allow_replication_factor_change is False
    assert answers(body) == {("orders", 0): (errors.INVALID_REPLICATION_FACTOR.code,
                                             "The replication factor is changed from 3 to 4")}


def test_cancelling_where_nothing_is_in_progress_is_refused() -> None:
    controller = with_fourth_broker()
    body = wire(reassignments.alter_partition_reassignments(
        alter_request(0, {"orders": {2: None}}),
        lambda targets: controller.alter_partition_reassignments(targets, 60).response))
    assert answers(body) == {("orders", 2): (errors.BY_NAME["NO_REASSIGNMENT_IN_PROGRESS"].code,
                                             "No partition reassignment is in progress.")}


@pytest.mark.parametrize("api_key", [ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS])
def test_without_a_controller_the_whole_request_is_refused_not_controller(api_key: int) -> None:
    request = (alter_request(0, {"orders": {0: (1,)}}) if api_key == ALTER_PARTITION_REASSIGNMENTS
               else list_request(None))
    body = wire(reassignments.refuse(request, errors.NOT_CONTROLLER, "the controller did not answer"))
    assert (int(body.error_code), body.error_message) == (errors.NOT_CONTROLLER.code, "the controller did not answer")


def test_a_request_the_controller_refuses_whole_gets_its_error_at_the_top() -> None:
    def too_large(targets: list[ReassignmentTarget]) -> list[KafkaException | None]:
        raise excessive_batch()

    body = wire(reassignments.alter_partition_reassignments(alter_request(0, {"orders": {0: (1,), 1: (2,)}}),
                                                            too_large))
    assert (int(body.error_code), body.error_message) == (errors.BY_NAME["POLICY_VIOLATION"].code,
                                                          "Unable to perform excessively large batch operation.")
    assert body.responses == ()
