from __future__ import annotations

from dataclasses import replace

import pytest

from insync.controller.image import PartitionRegistration
from insync.controller.records import NO_LEADER
from insync.controller.unclean_recovery import (
    Loss,
    RecoveryReports,
    ReplicaLog,
    UncleanRecoveryStrategy,
    best,
    choice,
    chooser,
    effective_strategy,
    plan,
    recovery_due,
    truncation_offset,
)

# Three replicas after an ISR that shrank and a leader that crashed:
# - 1 led epoch 1 from offset 100 and wrote up to 150, then fell out;
# - 2 stayed at epoch 0 and has 0-119;
# - 3 followed 1 up to 130, then led epoch 2 from 130 and wrote up to 140.
R1 = ReplicaLog(1, 0, 150, ((0, 0), (1, 100)))
R2 = ReplicaLog(2, 0, 120, ((0, 0),))
R3 = ReplicaLog(3, 0, 140, ((0, 0), (1, 100), (2, 130)))


def test_the_rule_elects_the_highest_last_epoch_then_the_longest_log() -> None:
    assert best([R1, R2, R3]) is R3
    assert best([R1, R2]) is R1
    longer = ReplicaLog(4, 0, 160, ((0, 0), (1, 100)))
    assert best([R1, longer]) is longer
    assert best([R1, replace(R1, broker=5)]).broker == 1  # a tie goes to the first in assignment order


def test_followers_truncate_where_their_logs_diverge_from_the_new_leaders() -> None:
    # Under 3: 1's epoch 1 ends at 130 in 3's log; 2's epoch 0 ends at 100.
    assert truncation_offset(R3, R1) == 130
    assert truncation_offset(R3, R2) == 100
    # Under 1, which never saw epoch 2: 3 keeps what 1 also has of epoch 1 (up to 130).
    assert truncation_offset(R1, R3) == 130
    # Same last epoch, shorter log: a prefix of the leader's, nothing lost.
    assert truncation_offset(R1, ReplicaLog(6, 0, 120, ((0, 0), (1, 100)))) == 120


def test_a_choice_lists_the_offsets_every_other_replica_gives_up() -> None:
    assert choice(R3, [R1, R2, R3]).losses == (Loss(1, 130, 150), Loss(2, 100, 120))
    assert choice(R3, [R1, R2, R3]).records_lost == 40
    assert choice(R2, [R1, R2, R3]).losses == (Loss(1, 100, 150), Loss(3, 100, 140))
    first, *others = plan([R1, R2, R3])
    assert first.leader == 3 and [c.leader for c in others] == [1, 2]
    assert [c.records_lost for c in others] == [10 + 20, 50 + 40]


def test_an_empty_leader_or_follower_and_a_log_start_above_the_divergence() -> None:
    empty = ReplicaLog(7, 0, 0, ())
    assert choice(empty, [R2, empty]).losses == (Loss(2, 0, 120),)
    assert choice(R2, [R2, empty]).losses == (Loss(7, 0, 0),)
    retained = ReplicaLog(8, 110, 125, ((0, 110),))  # retention moved its start past where it diverges
    assert choice(R3, [R3, retained]).losses == (Loss(8, 110, 125),)


def registration(isr: tuple[int, ...], elr: tuple[int, ...] = (), last_known_elr: tuple[int, ...] = (),
                 leader: int = NO_LEADER) -> PartitionRegistration:
    return replace(PartitionRegistration((1, 2, 3), isr, leader, 5, 9), elr=elr, last_known_elr=last_known_elr)


@pytest.mark.parametrize(("strategy", "reg", "live", "due"), [
    (UncleanRecoveryStrategy.NONE, registration(()), {1, 2, 3}, False),
    (UncleanRecoveryStrategy.AGGRESSIVE, registration((1,)), {2, 3}, True),  # the ISR member is down
    (UncleanRecoveryStrategy.AGGRESSIVE, registration((), elr=(1,)), {2, 3}, True),
    (UncleanRecoveryStrategy.AGGRESSIVE, registration((), elr=(1,)), {1, 2}, False),  # 1 can lead cleanly
    (UncleanRecoveryStrategy.BALANCED, registration((1,)), {2, 3}, False),  # waits for the ISR member
    (UncleanRecoveryStrategy.BALANCED, registration((), elr=(1,)), {2, 3}, False),  # and for ELR members
    (UncleanRecoveryStrategy.BALANCED, registration((), last_known_elr=(1, 2)), {2, 3}, False),  # 1 is down
    (UncleanRecoveryStrategy.BALANCED, registration((), last_known_elr=(1, 2)), {1, 2, 3}, True),
    (UncleanRecoveryStrategy.AGGRESSIVE, registration((1,), leader=1), {1, 2, 3}, False),  # online
])
def test_when_each_strategy_recovers(strategy: UncleanRecoveryStrategy, reg: PartitionRegistration,
                                     live: set[int], due: bool) -> None:
    assert recovery_due(strategy, reg, live.__contains__) is due


def test_unclean_leader_election_enable_means_aggressive_unless_recovery_is_off() -> None:
    assert effective_strategy(UncleanRecoveryStrategy.BALANCED, True) is UncleanRecoveryStrategy.AGGRESSIVE
    assert effective_strategy(UncleanRecoveryStrategy.BALANCED, False) is UncleanRecoveryStrategy.BALANCED
    assert effective_strategy(UncleanRecoveryStrategy.NONE, True) is UncleanRecoveryStrategy.NONE


def test_reports_hold_for_the_brokers_epoch_and_the_partitions_leader_epoch_only() -> None:
    reports = RecoveryReports()
    reg = registration(())
    reports.record("t", 0, broker_epoch=10, leader_epoch=5, log=R1)
    reports.record("t", 0, broker_epoch=20, leader_epoch=5, log=R2)
    reports.record("t", 0, broker_epoch=30, leader_epoch=4, log=R3)  # from before the partition went offline
    assert reports.logs("t", 0, reg, {1: 10, 2: 21, 3: 30}) == {1: R1}  # 2 restarted since
    reports.forget("t", 0)
    assert reports.logs("t", 0, reg, {1: 10}) == {}


def test_the_chooser_waits_for_every_candidate_unless_an_operator_asks() -> None:
    reg = registration(())
    logs = {1: R1, 3: R3}
    assert chooser(logs, wait_for_all=True)(reg, (1, 2, 3)) == NO_LEADER
    assert chooser(logs, wait_for_all=True)(reg, (1, 3)) == 3
    assert chooser(logs, wait_for_all=False)(reg, (1, 2, 3)) == 3
    assert chooser({}, wait_for_all=False)(reg, (1, 2)) == NO_LEADER
