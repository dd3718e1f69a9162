from __future__ import annotations

from insync.controller.election import build_partition_change
from insync.metadata.image import PartitionRegistration

T = "00000000-0000-4000-8000-000000000001"


def alive(*brokers: int):  # type: ignore[no-untyped-def]
    return lambda b: b in brokers


def test_current_leader_stays_when_still_in_isr_and_eligible() -> None:
    current = PartitionRegistration((1, 2, 3), (1, 2, 3), 2, 4, 7)
    change = build_partition_change(T, 0, current, (2, 3), alive(1, 2, 3), unclean_allowed=False)
    assert change is not None and not change.unclean
    assert change.record.leader is None and change.record.isr == (2, 3)  # an ISR-only change
    assert (change.record.leader_epoch, change.record.partition_epoch) == (4, 8)


def test_clean_election_takes_the_first_eligible_isr_replica_in_assignment_order() -> None:
    current = PartitionRegistration((1, 2, 3), (1, 3, 2), 1, 4, 7)
    change = build_partition_change(T, 0, current, (3, 2), alive(2, 3), unclean_allowed=False)
    assert change is not None
    assert (change.leader_before, change.leader_after) == (1, 2)
    assert change.record.leader == 2 and change.record.isr == (3, 2)
    assert (change.record.leader_epoch, change.record.partition_epoch) == (5, 8)


def test_no_eligible_isr_member_means_no_leader_and_the_isr_is_kept() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), 1, 4, 7)
    change = build_partition_change(T, 0, current, None, alive(2, 3), unclean_allowed=False)
    assert change is not None and change.leader_after == -1 and not change.unclean
    assert change.record.isr is None and change.isr_after == (1,)
    assert change.record.leader_epoch == 5


def test_unclean_election_only_when_allowed_and_the_isr_becomes_the_new_leader() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), 1, 4, 7)
    change = build_partition_change(T, 0, current, None, alive(3, 2), unclean_allowed=True)
    assert change is not None and change.unclean
    assert change.leader_after == 2 and change.record.isr == (2,)


def test_unclean_allowed_but_nobody_alive_stays_offline() -> None:
    current = PartitionRegistration((1, 2), (1,), -1, 5, 8)
    assert build_partition_change(T, 0, current, None, alive(), unclean_allowed=True) is None


def test_an_isr_member_coming_back_brings_the_partition_online() -> None:
    offline = PartitionRegistration((1, 2, 3), (1,), -1, 5, 8)
    change = build_partition_change(T, 0, offline, None, alive(1, 2), unclean_allowed=False)
    assert change is not None and (change.leader_before, change.leader_after) == (-1, 1)
    assert change.record.leader_epoch == 6 and change.record.partition_epoch == 9


def test_preferred_election_moves_leadership_to_the_first_replica() -> None:
    current = PartitionRegistration((1, 2, 3), (1, 2, 3), 2, 4, 7)
    assert build_partition_change(T, 0, current, None, alive(1, 2, 3), False) is None
    change = build_partition_change(T, 0, current, None, alive(1, 2, 3), False, preferred=True)
    assert change is not None and change.leader_after == 1 and change.record.leader_epoch == 5
    # not when the preferred replica is out of sync or not eligible
    out_of_sync = PartitionRegistration((1, 2, 3), (2, 3), 2, 4, 7)
    assert build_partition_change(T, 0, out_of_sync, None, alive(1, 2, 3), False, preferred=True) is None
    assert build_partition_change(T, 0, current, None, alive(2, 3), False, preferred=True) is None


def test_nothing_to_change_gives_none() -> None:
    current = PartitionRegistration((1, 2), (1, 2), 1, 0, 0)
    assert build_partition_change(T, 0, current, (1, 2), alive(1, 2), unclean_allowed=True) is None


# ---- Eligible Leader Replicas (KIP-966)


def test_members_removed_below_min_isr_stay_eligible_and_those_removed_above_do_not() -> None:
    full = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0)
    at_min = build_partition_change(T, 0, full, (1, 2), alive(1, 2, 3), False, elr_min_isr=2)
    assert at_min is not None and at_min.record.eligible_leader_replicas is None  # HW could still advance
    below = build_partition_change(T, 0, PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 1), (1,), alive(1, 2, 3),
                                   False, elr_min_isr=2)
    assert below is not None and below.record.isr == (1,) and below.record.eligible_leader_replicas == (2,)
    assert below.elr_after == (2,)


def test_back_at_min_isr_the_elr_and_last_known_elr_are_cleared() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), 1, 0, 3, elr=(2,), last_known_elr=(3,))
    change = build_partition_change(T, 0, current, (1, 3), alive(1, 2, 3), False, elr_min_isr=2)
    assert change is not None
    assert (change.record.isr, change.record.eligible_leader_replicas, change.record.last_known_elr) == \
        ((1, 3), (), ())


def test_the_last_isr_member_fenced_joins_the_elr_and_the_isr_empties() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), 1, 4, 7, elr=(2,))
    change = build_partition_change(T, 0, current, (), alive(3), False, elr_min_isr=2)
    assert change is not None and change.leader_after == -1
    assert change.record.isr == () and set(change.elr_after) == {1, 2}


def test_with_an_empty_isr_an_unfenced_elr_member_leads_alone_and_leaves_the_elr() -> None:
    current = PartitionRegistration((1, 2, 3), (), -1, 5, 8, elr=(1, 2))
    change = build_partition_change(T, 0, current, None, alive(2, 3), False, elr_min_isr=2)
    assert change is not None and not change.unclean and change.leader_after == 2
    assert change.record.isr == (2,) and change.record.eligible_leader_replicas == (1,)
    assert change.record.leader_recovery_state is None  # a clean election: nothing to recover


def test_an_unclean_shutdown_leaves_isr_and_elr_and_is_remembered_in_the_last_known_elr() -> None:
    current = PartitionRegistration((1, 2, 3), (), -1, 5, 8, elr=(1, 2))
    change = build_partition_change(T, 0, current, None, alive(1, 2, 3), False, elr_min_isr=2,
                                    unclean_shutdown=1)
    assert change is not None and change.leader_after == 2  # 1 may not lead: its tail may be gone
    assert change.record.isr == (2,) and change.record.eligible_leader_replicas == ()
    assert change.record.last_known_elr == (1,)


def test_when_isr_and_elr_are_gone_the_partition_stays_offline_without_unclean_election() -> None:
    current = PartitionRegistration((1, 2, 3), (), -1, 5, 8, elr=(1,), last_known_elr=(2,))
    change = build_partition_change(T, 0, current, None, alive(1, 2, 3), False, elr_min_isr=2,
                                    unclean_shutdown=1)
    assert change is not None and change.leader_after == -1
    assert change.record.eligible_leader_replicas == () and set(change.record.last_known_elr or ()) == {1, 2}


def test_an_unclean_election_clears_elr_and_marks_the_leader_recovering() -> None:
    current = PartitionRegistration((1, 2, 3), (), -1, 5, 8, elr=(1,), last_known_elr=(2,))
    change = build_partition_change(T, 0, current, None, alive(3), True, elr_min_isr=2)
    assert change is not None and change.unclean and change.leader_after == 3
    record = change.record
    assert (record.isr, record.eligible_leader_replicas, record.last_known_elr) == ((3,), (), ())
    assert record.leader_recovery_state == 1


def test_the_unclean_choice_is_the_chooser_s() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), -1, 5, 8)
    seen: list[tuple[int, ...]] = []

    def last(reg: PartitionRegistration, candidates: tuple[int, ...]) -> int:
        seen.append(candidates)
        return candidates[-1]

    change = build_partition_change(T, 0, current, None, alive(2, 3), True, choose_unclean=last)
    assert change is not None and change.leader_after == 3 and seen == [(2, 3)]


def test_elr_off_keeps_the_isr_and_clears_an_elr_left_from_before() -> None:
    current = PartitionRegistration((1, 2, 3), (1,), 1, 4, 7, elr=(2,), last_known_elr=(3,))
    change = build_partition_change(T, 0, current, None, alive(2, 3), False)
    assert change is not None and change.leader_after == -1 and change.record.isr is None
    assert (change.record.eligible_leader_replicas, change.record.last_known_elr) == ((), ())


def test_an_alter_partition_asking_recovered_ends_recovery() -> None:
    current = PartitionRegistration((1, 2), (1,), 1, 4, 7, leader_recovery_state=1)
    change = build_partition_change(T, 0, current, (1,), alive(1, 2), False, recovery_state=0)
    assert change is not None and change.record.leader_recovery_state == 0 and change.record.isr is None
