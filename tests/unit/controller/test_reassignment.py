"""AlterPartitionReassignments and ListPartitionReassignments in the controller, as Kafka's ReplicationControlManager
runs them: target replicas recorded with adding/removing replicas, completion only once every target replica is in
the ISR (then the removing ones leave and leadership moves off a removed leader), cancelling reverts, and Kafka's
errors and words for each refusal."""

from __future__ import annotations

import pytest
from ctrl_harness import Harness, expire, set_isr

from insync import errors
from insync.controller.reassignment import ReassignmentTarget, ongoing_reassignments
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import PartitionChangeRecord, record_from_dict


def four_brokers(assignment: tuple[int, ...] = (1, 2, 3)) -> Harness:
    h = Harness()
    h.start(1, 2, 3, 4)
    h.controller.create_topic("t", 1, 0, {}, h.now, assignments=[(0, assignment)])
    return h


def reassign(h: Harness, replicas: tuple[int, ...] | None, topic: str = "t", partition: int = 0,
             allow_rf_change: bool = True) -> KafkaException | None:
    target = ReassignmentTarget(topic, partition, replicas, allow_rf_change)
    [outcome] = h.controller.alter_partition_reassignments([target], h.now).response
    return outcome


def test_a_move_records_the_target_then_the_removing_replicas_and_leaves_the_isr_alone() -> None:
    h = four_brokers()
    assert reassign(h, (2, 3, 4)) is None
    reg = h.partition("t")
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert (reg.isr, reg.leader, reg.leader_epoch) == ((1, 2, 3), 1, 0)  # 4 bootstraps outside the ISR
    [listed] = ongoing_reassignments(h.controller.image, None)
    assert (listed.topic, listed.partition, listed.replicas, listed.adding_replicas, listed.removing_replicas) == (
        "t", 0, (2, 3, 4, 1), (4,), (1,))


def test_the_move_completes_when_the_added_replica_joins_the_isr_and_leadership_leaves_the_removed_leader() -> None:
    h = four_brokers()
    reassign(h, (2, 3, 4))
    h.drain()
    set_isr(h, "t", (1, 2, 3, 4))  # the leader lets 4 in once it caught up
    reg = h.partition("t")
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((2, 3, 4), (), ())
    assert reg.isr == (2, 3, 4) and reg.leader == 2 and reg.leader_epoch == 1
    [change] = [e for e in h.drain() if e.type.value == "leader_change"]
    assert (change.fields["leader_before"], change.fields["leader_after"], change.fields["reason"]) == (1, 2, "reassignment")
    assert ongoing_reassignments(h.controller.image, None) == []


def test_removing_a_follower_keeps_the_leader_but_bumps_its_epoch() -> None:
    h = four_brokers()
    reassign(h, (1, 2, 4))
    set_isr(h, "t", (1, 2, 3, 4))
    reg = h.partition("t")
    assert (reg.replicas, reg.isr, reg.leader, reg.leader_epoch) == ((1, 2, 4), (1, 2, 4), 1, 1)


def test_increasing_the_replication_factor_completes_without_a_new_leader_epoch() -> None:
    h = four_brokers((1,))
    reassign(h, (1, 2, 3))
    assert h.partition("t").adding_replicas == (2, 3)
    set_isr(h, "t", (1, 2))
    assert h.partition("t").adding_replicas == (2, 3)  # 3 is not in sync yet
    set_isr(h, "t", (1, 2, 3))
    reg = h.partition("t")
    assert (reg.replicas, reg.isr, reg.adding_replicas, reg.leader_epoch) == ((1, 2, 3), (1, 2, 3), (), 0)


def test_a_target_already_in_sync_completes_at_once() -> None:
    h = four_brokers()
    assert reassign(h, (3, 2)) is None
    reg = h.partition("t")
    assert (reg.replicas, reg.isr, reg.leader, reg.adding_replicas, reg.removing_replicas) == (
        (3, 2), (2, 3), 3, (), ())  # the first target replica in sync leads, as in Kafka


def test_cancelling_reverts_the_added_replicas_and_keeps_the_removing_ones() -> None:
    h = four_brokers()
    reassign(h, (2, 3, 4))
    assert reassign(h, None) is None
    reg = h.partition("t")
    assert (reg.replicas, reg.isr, reg.leader, reg.adding_replicas, reg.removing_replicas) == (
        (2, 3, 1), (1, 2, 3), 1, (), ())


def test_a_new_target_replaces_the_reassignment_in_progress() -> None:
    h = four_brokers()
    reassign(h, (2, 3, 4))
    reassign(h, (1, 2))
    reg = h.partition("t")  # 4 leaves again; 1 and 2 are in sync so the new one completes at once
    assert (reg.replicas, reg.isr, reg.adding_replicas, reg.removing_replicas) == ((1, 2), (1, 2), (), ())


def test_an_unchanged_target_writes_nothing() -> None:
    h = four_brokers()
    assert h.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, (1, 2, 3))], h.now).records == ()


@pytest.mark.parametrize(("topic", "partition", "replicas", "error", "message"), [
    ("nope", 0, (1, 2), "UNKNOWN_TOPIC_OR_PARTITION", "Unable to find a topic named nope."),
    ("t", 5, (1, 2), "UNKNOWN_TOPIC_OR_PARTITION", "Unable to find partition t:5."),
    ("t", 0, (), "INVALID_REPLICA_ASSIGNMENT", "The manual partition assignment includes an empty replica list."),
    ("t", 0, (1, 9), "INVALID_REPLICA_ASSIGNMENT",
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    ("t", 0, (2, 2), "INVALID_REPLICA_ASSIGNMENT",
     "The manual partition assignment includes the broker 2 more than once."),
    ("t", 0, None, "NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress."),
])
def test_refusals_have_kafkas_codes_and_words(topic: str, partition: int, replicas: tuple[int, ...] | None,
                                              error: str, message: str) -> None:
    h = four_brokers()
    before = h.controller.image
    outcome = reassign(h, replicas, topic, partition)
    assert outcome is not None and (outcome.error, outcome.detail) == (errors.BY_NAME[error], message)
    assert h.controller.image is before


def test_a_changed_replication_factor_is_refused_when_the_request_forbids_it() -> None:
    h = four_brokers()
    outcome = reassign(h, (1, 2, 3, 4), allow_rf_change=False)
    assert outcome is not None and (outcome.error, outcome.detail) == (
        errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 4")
    assert reassign(h, (2, 3, 4), allow_rf_change=False) is None


def test_one_refused_partition_leaves_the_others_of_the_request_to_commit() -> None:
    h = four_brokers()
    h.controller.create_partitions("t", 2, h.now, assignments=((1, 2, 3),))
    targets = [ReassignmentTarget("t", 0, (9,)), ReassignmentTarget("t", 1, (2, 3, 4))]
    refused, accepted = h.controller.alter_partition_reassignments(targets, h.now).response
    assert refused is not None and refused.error is errors.INVALID_REPLICA_ASSIGNMENT and accepted is None
    assert h.partition("t", 1).adding_replicas == (4,)
    assert [(o.partition, o.adding_replicas) for o in ongoing_reassignments(h.controller.image, [("t", [1, 0, 7])])] == [
        (1, (4,))]
    assert ongoing_reassignments(h.controller.image, [("missing", [0])]) == []


def test_a_cancel_that_would_need_an_unclean_election_is_refused() -> None:
    h = four_brokers((1,))
    reassign(h, (2, 3))
    set_isr(h, "t", (1, 2))  # 3 is not in sync: the reassignment goes on
    expire(h, {1}, (2, 3, 4))  # the removing leader goes: 2, an adding replica, leads alone
    assert (h.partition("t").isr, h.partition("t").leader) == ((2,), 2)
    outcome = reassign(h, None)
    assert outcome is not None and (outcome.error, outcome.detail) == (
        errors.INVALID_REPLICA_ASSIGNMENT,
        "Unable to revert partition assignment for t:0 because it would require an unclean leader election.")


def test_a_fenced_target_broker_is_accepted_and_the_reassignment_waits_for_it() -> None:
    h = four_brokers()
    expire(h, {4}, (1, 2, 3))
    assert reassign(h, (2, 3, 4)) is None
    reg = h.partition("t")
    assert (reg.adding_replicas, reg.removing_replicas, reg.leader) == ((4,), (1,), 1)


def test_reassignment_fields_survive_the_records_json_and_a_replay() -> None:
    h = four_brokers()
    reassign(h, (2, 3, 4))
    records = h.store.load()
    change = next(r for r in records if isinstance(r, PartitionChangeRecord))
    assert record_from_dict(change.to_dict()) == change
    assert MetadataImage.from_records(records).topics_by_id == h.controller.image.topics_by_id
