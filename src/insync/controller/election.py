"""Leader election as a pure function, after Kafka's `PartitionChangeBuilder`.

`build_partition_change(...)` takes a registration, the target ISR, which brokers may lead and whether an
unclean election is allowed, and returns the `PartitionChangeRecord` (or None); callers differ only in arguments.
ELR (KIP-966, with `elr_min_isr`): while the target ISR is below min ISR the high watermark cannot advance, so the
replicas that leave the ISR keep all committed data and stay in the ELR (minus one that shut down uncleanly),
`last_known_elr` remembering those that leave it; both are cleared at min ISR, and the ISR may become empty.
insync keeps `last_known_elr` as KIP-966 describes it, where Kafka 4.x stores the last leader there and elects it
even after it lost its tail. Leader choice, in Kafka's order: the preferred replica if valid, the current leader
if still valid, the first valid replica (from the ELR, it becomes the ISR alone), then if allowed
`choose_unclean` (ISR that replica alone, ELR cleared, leader RECOVERING), else offline (-1). A leadership change
bumps the leader epoch, every change the partition epoch. Any change completes a reassignment whose targets are
all in the target ISR, dropping the removing replicas, with a new leader epoch so every replica learns the set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from insync.controller.reassignment_replicas import ReplicaAssignment
from insync.metadata.image import PartitionRegistration
from insync.metadata.records import LEADER_RECOVERING, PartitionChangeRecord
from insync.types import NO_LEADER, BrokerId

# Picks the unclean leader among the eligible out-of-sync replicas (never empty, in assignment order), or
# NO_LEADER to stay offline. The unclean recovery strategy plugs in here.
UncleanChooser = Callable[[PartitionRegistration, tuple[BrokerId, ...]], BrokerId]


def first_out_of_sync(current: PartitionRegistration, candidates: tuple[BrokerId, ...]) -> BrokerId:
    """Kafka's `unclean.leader.election.enable`: the first eligible replica in assignment order."""
    return candidates[0]


@dataclass(frozen=True, slots=True)
class PartitionChange:
    record: PartitionChangeRecord
    leader_before: BrokerId
    leader_after: BrokerId
    isr_after: tuple[BrokerId, ...]
    unclean: bool
    elr_after: tuple[BrokerId, ...] = ()


def _target_elr(current: PartitionRegistration, isr: tuple[BrokerId, ...], min_isr: int,
                unclean_shutdown: BrokerId | None) -> tuple[tuple[BrokerId, ...], tuple[BrokerId, ...]]:
    """(ELR, last known ELR) for the target ISR, in assignment order (Kafka's `maybePopulateTargetElr`)."""
    if len(isr) >= min_isr:
        return (), ()
    candidates = set(current.elr) | set(current.isr)
    elr = tuple(r for r in current.replicas if r in candidates and r not in isr and r != unclean_shutdown)
    remembered = candidates | set(current.last_known_elr)
    last_known = tuple(r for r in current.replicas if r in remembered and r not in isr and r not in elr)
    return elr, last_known


def _elect(current: PartitionRegistration, isr: tuple[BrokerId, ...], elr: tuple[BrokerId, ...],
           is_eligible: Callable[[BrokerId], bool], preferred: bool) -> BrokerId:
    """The clean choice (steps 1-3 of the module docstring), or NO_LEADER."""
    valid = [r for r in current.replicas if (r in isr or (not isr and r in elr)) and is_eligible(r)]
    if preferred and valid and valid[0] == current.replicas[0]:
        return current.replicas[0]
    if current.leader in valid:
        return current.leader
    return valid[0] if valid else NO_LEADER


def _elect_unclean(current: PartitionRegistration, isr: tuple[BrokerId, ...], is_eligible: Callable[[BrokerId], bool],
                   choose: UncleanChooser) -> BrokerId:
    """Step 4: an eligible replica outside the ISR, as `choose` decides, or NO_LEADER."""
    candidates = tuple(r for r in current.replicas if r not in isr and is_eligible(r))
    if not candidates:
        return NO_LEADER
    leader = choose(current, candidates)
    assert leader == NO_LEADER or leader in candidates, (leader, candidates)
    return leader


def build_partition_change(
    topic_id: str,
    partition: int,
    current: PartitionRegistration,
    target_isr: tuple[BrokerId, ...] | None,
    is_eligible: Callable[[BrokerId], bool],
    unclean_allowed: bool,
    preferred: bool = False,
    *,
    elr_min_isr: int | None = None,
    unclean_shutdown: BrokerId | None = None,
    recovery_state: int | None = None,
    choose_unclean: UncleanChooser = first_out_of_sync,
    assignment: ReplicaAssignment | None = None,
) -> PartitionChange | None:
    """The record moving `current` to `target_isr` (None: keep the ISR) with a leader elected as above.

    `elr_min_isr`: ELR on, with this effective min ISR (None: off, and any ELR left from before is cleared).
    `unclean_shutdown`: a broker that restarted after a crash; it leaves the ISR and ELR, and may not lead.
    `recovery_state`: the leader recovery state an AlterPartition asks for (None: unchanged).
    `assignment`: the replicas to have, with a reassignment's adding and removing ones (None: as they are)."""
    if assignment is None:
        assignment = ReplicaAssignment(current.replicas, current.adding_replicas, current.removing_replicas)
    isr = current.isr if target_isr is None else target_isr
    if unclean_shutdown is not None:
        isr = tuple(b for b in isr if b != unclean_shutdown)
    completed = assignment.completed(isr)
    if completed is not None:
        assignment, isr = completed
    assert isr or elr_min_isr is not None or not current.isr, f"{topic_id}-{partition}: an empty ISR needs ELR on"
    assert set(isr) <= set(assignment.replicas), (isr, assignment.replicas)
    original, current = current, replace(current, replicas=assignment.replicas)  # elections run on the new replicas

    def eligible(b: BrokerId) -> bool:
        return b != unclean_shutdown and is_eligible(b)

    elr, last_known = ((), ()) if elr_min_isr is None else _target_elr(current, isr, elr_min_isr, unclean_shutdown)
    leader = _elect(current, isr, elr, eligible, preferred)
    unclean = False
    if leader == NO_LEADER and unclean_allowed:
        leader = _elect_unclean(current, isr, eligible, choose_unclean)
        unclean = leader != NO_LEADER
    recovery = current.leader_recovery_state if recovery_state is None else recovery_state
    if unclean:
        isr, elr, last_known, recovery = (leader,), (), (), LEADER_RECOVERING
    elif leader != current.leader and leader in elr:
        isr, elr = (leader,), tuple(r for r in elr if r != leader)
    return _change_record(topic_id, partition, original, assignment, leader, (isr, elr, last_known), recovery,
                          unclean)


def _change_record(topic_id: str, partition: int, current: PartitionRegistration, assignment: ReplicaAssignment,
                   leader: BrokerId, sets: tuple[tuple[BrokerId, ...], tuple[BrokerId, ...], tuple[BrokerId, ...]],
                   recovery: int, unclean: bool) -> PartitionChange | None:
    """The record of what differs from `current` (None when nothing does); `sets` are the ISR, ELR and last known
    ELR. ELR sets compare unordered."""
    isr, elr, last_known = sets
    assert leader == NO_LEADER or leader in isr, (leader, isr)
    leader_changed = leader != current.leader
    isr_changed = isr != current.isr
    elr_changed = set(elr) != set(current.elr)
    last_known_changed = set(last_known) != set(current.last_known_elr)
    recovery_changed = recovery != current.leader_recovery_state
    replicas_changed = assignment.replicas != current.replicas
    reassignment_changed = (assignment.adding != current.adding_replicas
                            or assignment.removing != current.removing_replicas)
    if not (leader_changed or isr_changed or elr_changed or last_known_changed or recovery_changed
            or replicas_changed or reassignment_changed):
        return None
    epoch_bump = leader_changed or not set(current.replicas) <= set(assignment.replicas)
    record = PartitionChangeRecord(
        topic_id=topic_id,
        partition=partition,
        isr=isr if isr_changed else None,
        leader=leader if epoch_bump else None,
        leader_epoch=current.leader_epoch + 1 if epoch_bump else current.leader_epoch,
        partition_epoch=current.partition_epoch + 1,
        eligible_leader_replicas=elr if elr_changed else None,
        last_known_elr=last_known if last_known_changed else None,
        leader_recovery_state=recovery if recovery_changed else None,
        replicas=assignment.replicas if replicas_changed else None,
        removing_replicas=assignment.removing if reassignment_changed else None,
        adding_replicas=assignment.adding if reassignment_changed else None,
    )
    return PartitionChange(record, current.leader, leader, isr, unclean, elr)
