"""A partition's replica sets during a reassignment, after Kafka's `PartitionReassignmentReplicas` and
`PartitionReassignmentRevert`: pure arithmetic on broker lists, no image.

A reassignment from replicas C to target T keeps, until it completes, `replicas` = T followed by the members
of C not in T; those are `removing`, and the members of T not in C are `adding`. It completes once every target
replica is in the ISR (the ISR without the removing replicas, which must not be empty): the replicas become T
and the removing ones leave the ISR. Cancelling reverts: the adding replicas leave the replicas and the ISR,
the removing ones stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync.types import BrokerId


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas with the reassignment in progress (both tuples empty when none is)."""

    replicas: tuple[BrokerId, ...]
    adding: tuple[BrokerId, ...] = ()
    removing: tuple[BrokerId, ...] = ()

    def __post_init__(self) -> None:
        assert self.replicas and set(self.adding) | set(self.removing) <= set(self.replicas), self
        assert not set(self.adding) & set(self.removing), self

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[BrokerId, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def completed(self, isr: Sequence[BrokerId]) -> tuple[ReplicaAssignment, tuple[BrokerId, ...]] | None:
        """The assignment and ISR once the reassignment completes with `isr` (Kafka's
        `maybeCompleteReassignment`), or None: none in progress, or some target replica not yet in sync."""
        if not self.is_reassigning:
            return None
        new_isr = tuple(r for r in isr if r not in self.removing)
        target = self.target
        if not new_isr or any(r not in new_isr for r in target):
            return None
        return ReplicaAssignment(target), new_isr


def reassign(current: Sequence[BrokerId], target: Sequence[BrokerId]) -> ReplicaAssignment:
    """The assignment moving from `current` replicas (those of the partition now, removing ones included) to
    `target` (Kafka's `PartitionReassignmentReplicas` constructor)."""
    assert current and target and len(set(target)) == len(target), (current, target)
    removing = tuple(r for r in current if r not in target)
    adding = tuple(r for r in target if r not in current)
    return ReplicaAssignment((*target, *removing), adding, removing)


def revert(assignment: ReplicaAssignment, isr: Sequence[BrokerId]) -> tuple[ReplicaAssignment, tuple[BrokerId, ...]]:
    """The assignment and ISR after cancelling (Kafka's `PartitionReassignmentRevert`): without the adding
    replicas. The ISR may come out empty (only adding replicas were in sync): the caller decides."""
    assert assignment.is_reassigning, assignment
    replicas = tuple(r for r in assignment.replicas if r not in assignment.adding)
    return ReplicaAssignment(replicas), tuple(r for r in isr if r not in assignment.adding)
