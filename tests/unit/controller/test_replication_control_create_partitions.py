"""CreatePartitions and CreateTopics with replica assignments, checked as Kafka's ReplicationControlManager checks
them (its error and wording for each refusal), and the new partitions' ISR and leader from the assignment."""

from __future__ import annotations

import pytest
from ctrl_harness import expire, three_broker_topic

from insync import errors
from insync.errors import KafkaException
from insync.metadata.records import PartitionRecord


def test_assigned_partitions_take_the_replicas_given_in_order() -> None:
    h = three_broker_topic()
    assert h.controller.create_partitions("t", 3, h.now, validate_only=True,
                                          assignments=((3, 1, 2), (2, 3, 1))).records == ()
    result = h.controller.create_partitions("t", 3, h.now, assignments=((3, 1, 2), (2, 3, 1)))
    added = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [(r.partition, r.replicas, r.isr, r.leader) for r in added] == [
        (1, (3, 1, 2), (3, 1, 2), 3), (2, (2, 3, 1), (2, 3, 1), 2)]
    assert result.response == ((3, 1, 2), (2, 3, 1))


def test_a_fenced_replica_is_kept_out_of_the_isr_and_does_not_lead() -> None:
    h = three_broker_topic()
    expire(h, {3}, (1, 2))
    result = h.controller.create_partitions("t", 2, h.now, assignments=((3, 1, 2),))
    [added] = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert (added.replicas, added.isr, added.leader) == ((3, 1, 2), (1, 2), 1)


@pytest.mark.parametrize(("count", "assignments", "message"), [
    (3, ((1, 2, 3),), "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    (2, ((),), "The manual partition assignment includes an empty replica list."),
    (2, ((1, 9, 7),), "The manual partition assignment includes broker 7, but no such broker is registered."),
    (2, ((2, 1, 2),), "The manual partition assignment includes the broker 2 more than once."),
    (2, ((1, 2),), "The manual partition assignment includes a partition with 2 replica(s), but this is not "
                   "consistent with previous partitions, which have 3 replica(s)."),
    (3, ((1, 2, 3), (1, 2, -1)), "The manual partition assignment includes broker -1, but no such broker is "
                                 "registered."),
])
def test_bad_assignments_are_refused_with_kafkas_words(count: int, assignments: tuple[tuple[int, ...], ...],
                                                       message: str) -> None:
    h = three_broker_topic()
    before = h.controller.image
    with pytest.raises(KafkaException) as refused:
        h.controller.create_partitions("t", count, h.now, assignments=assignments)
    assert (refused.value.error, refused.value.detail) == (errors.INVALID_REPLICA_ASSIGNMENT, message)
    assert h.controller.image is before  # nothing written


def test_an_assignment_of_fenced_brokers_only_is_refused() -> None:
    h = three_broker_topic({"min.insync.replicas": 1})
    h.controller.create_topic("one", 1, 1, {}, h.now)
    expire(h, {3}, (1, 2))
    with pytest.raises(KafkaException) as refused:
        h.controller.create_partitions("one", 2, h.now, assignments=((3,),))
    assert (refused.value.error, refused.value.detail) == (
        errors.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled "
        "shutdown.")


def test_a_topic_created_on_assigned_replicas() -> None:
    h = three_broker_topic()
    result = h.controller.create_topic("placed", -1, -1, {}, h.now, assignments=((1, (3, 1)), (0, (2, 3))))
    added = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [(r.partition, r.replicas, r.leader) for r in added] == [(0, (2, 3), 2), (1, (3, 1), 3)]
    assert result.response.assignments == ((2, 3), (3, 1))


@pytest.mark.parametrize(("assignments", "message"), [
    (((0, (1, 2)), (0, (2, 3))), "Found multiple manual partition assignments for partition 0"),
    (((0, (1, 2)), (2, (2, 3))), "partitions should be a consecutive 0-based integer sequence"),
    (((0, (1, 2)), (1, (3,))), "The manual partition assignment includes a partition with 1 replica(s), but this is "
                               "not consistent with previous partitions, which have 2 replica(s)."),
    (((0, (4, 1)),), "The manual partition assignment includes broker 4, but no such broker is registered."),
])
def test_bad_topic_assignments_are_refused_with_kafkas_words(assignments: tuple[tuple[int, tuple[int, ...]], ...],
                                                             message: str) -> None:
    h = three_broker_topic()
    with pytest.raises(KafkaException) as refused:
        h.controller.create_topic("placed", -1, -1, {}, h.now, assignments=assignments)
    assert (refused.value.error, refused.value.detail) == (errors.INVALID_REPLICA_ASSIGNMENT, message)
    assert h.controller.image.topic("placed") is None
