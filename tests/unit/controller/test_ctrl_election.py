from __future__ import annotations

from insync.controller.election import build_partition_change
from insync.controller.image import PartitionRegistration

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
