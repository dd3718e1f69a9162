"""Partition reassignment, after Kafka's `ReplicationControlManager.alterPartitionReassignment` and
`listPartitionReassignments`: pure functions of an image, as `replication_control` is.

`reassignment_changes` turns a partition's target replicas into the change to commit: the replicas become the
target followed by those being removed, with Kafka's `adding_replicas` and `removing_replicas`. An added broker
fetches as a follower outside the ISR until the leader lets it in; the change that brings the last target
replica into the ISR completes the reassignment (`election.build_partition_change`): the removing replicas leave
and leadership moves off a removed leader. Until then they stay in the ISR, so acks=all waits for them and
nothing is lost. A null target cancels (`reassignment_replicas.revert`). Refusals use Kafka's codes and words
(UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR per KIP-860,
NO_REASSIGNMENT_IN_PROGRESS). One departure: a cancel whose revert leaves no ISR member would need an unclean
election, which Kafka makes where the topic allows it; insync refuses it with INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync import errors
from insync.controller.election import build_partition_change
from insync.controller.reassignment_replicas import ReplicaAssignment, reassign, revert
from insync.controller.replication_control import (
    REASON_REASSIGNMENT,
    ElectionPolicy,
    TopicPartitionChange,
    check_replicas,
)
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage, PartitionRegistration, PartitionView
from insync.types import BrokerId


@dataclass(frozen=True, slots=True)
class ReassignmentTarget:
    """One partition of an AlterPartitionReassignments request; `replicas` None cancels its reassignment."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None
    allow_replication_factor_change: bool = True  # v1 (KIP-860); v0 allows it


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition of a ListPartitionReassignments answer."""

    topic: str
    partition: int
    replicas: tuple[BrokerId, ...]
    adding_replicas: tuple[BrokerId, ...]
    removing_replicas: tuple[BrokerId, ...]


def _registration(image: MetadataImage, topic: str, partition: int) -> PartitionView:
    found = image.topic(topic)
    if found is None:
        raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    registration = found.partitions.get(partition)
    if registration is None:
        raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Unable to find partition {topic}:{partition}.")
    return PartitionView(topic, found.topic_id, partition, registration)


def _assignment(registration: PartitionRegistration) -> ReplicaAssignment:
    return ReplicaAssignment(registration.replicas, registration.adding_replicas, registration.removing_replicas)


def reassignment_changes(image: MetadataImage, target: ReassignmentTarget,
                         policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """The change starting (or replacing, or cancelling) `target`'s reassignment; none when the partition already
    stands so. Raises KafkaException with Kafka's code and words for a refused partition."""
    view = _registration(image, target.topic, target.partition)
    current = view.registration
    if target.replicas is None:
        if not current.is_reassigning:
            raise KafkaException(errors.BY_NAME["NO_REASSIGNMENT_IN_PROGRESS"],
                                 "No partition reassignment is in progress.")
        assignment, isr = revert(_assignment(current), current.isr)
        if not isr:
            raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unable to revert partition assignment for {target.topic}:{target.partition} "
                                 "because it would require an unclean leader election.")
    else:
        check_replicas(image, target.partition, target.replicas, None, need_eligible=False)
        if not target.allow_replication_factor_change:
            _check_replication_factor(current, target.replicas)
        assignment = reassign(current.replicas, tuple(BrokerId(b) for b in target.replicas))
        isr = current.isr
    change = build_partition_change(view.topic_id, view.partition, current, isr, image.is_eligible,
                                    unclean_allowed=False, elr_min_isr=policy.elr_min_isr(image, view),
                                    assignment=assignment)
    return [] if change is None else [TopicPartitionChange(view.topic, change, REASON_REASSIGNMENT)]


def _check_replication_factor(current: PartitionRegistration, target: Sequence[int]) -> None:
    """KIP-860's check (Kafka's `validatePartitionReplicationFactorUnchanged`): the target's size must be that of
    the replicas, or of the replicas an ongoing reassignment is heading for."""
    if len(target) not in (len(current.replicas), len(current.target_replicas)):
        raise KafkaException(errors.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from "
                             f"{len(current.replicas)} to {len(target)}")


def ongoing_reassignments(image: MetadataImage,
                          asked: Sequence[tuple[str, Sequence[int]]] | None) -> list[OngoingReassignment]:
    """ListPartitionReassignments: the partitions of `asked` (topic, partitions) being reassigned, or all of them
    (None). Topics and partitions that do not exist, or are not being reassigned, are left out, as Kafka does."""
    if asked is None:
        views = [v for v in image.all_partitions() if v.registration.is_reassigning]
    else:
        views = []
        for name, partitions in asked:
            topic = image.topic(name)
            if topic is None:
                continue
            for partition in dict.fromkeys(partitions):
                registration = topic.partitions.get(partition)
                if registration is not None and registration.is_reassigning:
                    views.append(PartitionView(name, topic.topic_id, partition, registration))
    return [OngoingReassignment(v.topic, v.partition, v.registration.replicas, v.registration.adding_replicas,
                                v.registration.removing_replicas) for v in views]
