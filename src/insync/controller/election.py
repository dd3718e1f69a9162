"""Leader election as a pure function, after Kafka's `PartitionChangeBuilder`.

`build_partition_change(...)` takes a partition's registration, the ISR it should have (`target_isr`), which
brokers may lead, and whether an unclean election is allowed, and returns the `PartitionChangeRecord` that gets
there (or None when nothing changes). It reads no state and writes none; the callers (fencing, controlled
shutdown, unfencing, AlterPartition, preferred election) differ only in their arguments.

Leader choice, in Kafka's order:
1. preferred election: the first replica, if it is in the target ISR and eligible;
2. the current leader, if it is still in the target ISR and eligible (leadership does not move needlessly);
3. the first replica (assignment order) in the target ISR that is eligible (a clean election);
4. if allowed, the first eligible replica outside the ISR (an unclean election: the ISR becomes that replica
   alone, and data acknowledged by the old ISR may be lost);
5. otherwise no leader (-1): the partition is offline, and the ISR stays as the target says.
A leadership change bumps the leader epoch; every change bumps the partition epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from insync.controller.image import PartitionRegistration
from insync.controller.records import NO_LEADER, PartitionChangeRecord


@dataclass(frozen=True, slots=True)
class PartitionChange:
    record: PartitionChangeRecord
    leader_before: int
    leader_after: int
    isr_after: tuple[int, ...]
    unclean: bool


def _elect(current: PartitionRegistration, target_isr: tuple[int, ...], is_eligible: Callable[[int], bool],
           unclean_allowed: bool, preferred: bool) -> tuple[int, bool]:
    """(leader, unclean) for the target ISR."""
    in_isr = [r for r in current.replicas if r in target_isr and is_eligible(r)]
    if preferred and in_isr and in_isr[0] == current.replicas[0]:
        return current.replicas[0], False
    if current.leader in in_isr:
        return current.leader, False
    if in_isr:
        return in_isr[0], False
    if unclean_allowed:
        outside = [r for r in current.replicas if r not in target_isr and is_eligible(r)]
        if outside:
            return outside[0], True
    return NO_LEADER, False


def build_partition_change(
    topic_id: str,
    partition: int,
    current: PartitionRegistration,
    target_isr: tuple[int, ...] | None,
    is_eligible: Callable[[int], bool],
    unclean_allowed: bool,
    preferred: bool = False,
) -> PartitionChange | None:
    """The record moving `current` to `target_isr` (None: keep the ISR) with a leader elected as above."""
    isr = current.isr if target_isr is None else target_isr
    assert isr, f"{topic_id}-{partition}: the target ISR may not be empty"
    assert set(isr) <= set(current.replicas), (isr, current.replicas)
    leader, unclean = _elect(current, isr, is_eligible, unclean_allowed, preferred)
    if unclean:
        isr = (leader,)
    leader_changed = leader != current.leader
    isr_changed = isr != current.isr
    if not leader_changed and not isr_changed:
        return None
    assert leader == NO_LEADER or leader in isr, (leader, isr)
    record = PartitionChangeRecord(
        topic_id=topic_id,
        partition=partition,
        isr=isr if isr_changed else None,
        leader=leader if leader_changed else None,
        leader_epoch=current.leader_epoch + 1 if leader_changed else current.leader_epoch,
        partition_epoch=current.partition_epoch + 1,
    )
    return PartitionChange(record, current.leader, leader, isr, unclean)
