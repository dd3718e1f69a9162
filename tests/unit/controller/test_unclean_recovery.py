from __future__ import annotations

from dataclasses import replace

import pytest
from ctrl_harness import Harness, expire, set_isr

from insync import errors
from insync.controller.unclean_recovery import (
    Loss,
    RecoveryReports,
    ReplicaLog,
    ReplicaLogReport,
    UncleanRecoveryStrategy,
    best,
    choice,
    chooser,
    effective_strategy,
    plan,
    recovery_due,
    truncation_offset,
)
from insync.events import EventType
from insync.metadata.image import PartitionRegistration
from insync.types import NO_LEADER

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
    reports.forget_all_but({("u", 0)})  # "t" has a leader again
    assert reports.logs("t", 0, reg, {1: 10}) == {}


def test_the_chooser_waits_for_every_candidate_unless_an_operator_asks() -> None:
    reg = registration(())
    logs = {1: R1, 3: R3}
    assert chooser(logs, wait_for_all=True)(reg, (1, 2, 3)) == NO_LEADER
    assert chooser(logs, wait_for_all=True)(reg, (1, 3)) == 3
    assert chooser(logs, wait_for_all=False)(reg, (1, 2, 3)) == 3
    assert chooser({}, wait_for_all=False)(reg, (1, 2)) == NO_LEADER


# ---- the controller: reports, strategies, ElectLeaders UNCLEAN


def offline_partition(overrides: dict[str, object]) -> tuple[Harness, int, tuple[int, int]]:
    """3 brokers, topic "t" (RF 3); the ISR shrinks to the leader, which dies: (harness, dead leader, others)."""
    h = Harness(overrides)
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 3, {}, h.now)
    leader = h.partition("t").leader
    b, c = (x for x in (1, 2, 3) if x != leader)
    set_isr(h, "t", (leader,))
    expire(h, {leader}, (b, c))
    assert h.partition("t").leader == NO_LEADER
    h.drain()
    return h, leader, (b, c)


def report(h: Harness, broker: int, log: ReplicaLog) -> None:
    reg = h.partition("t")
    item = ReplicaLogReport(h.topic_id("t"), 0, reg.leader_epoch, replace(log, broker=broker))
    h.controller.report_replica_logs(broker, h.epochs[broker], [item], h.now)


def test_aggressive_recovery_elects_the_best_reported_replica_once_all_reported() -> None:
    h, _, (b, c) = offline_partition({"unclean.recovery.strategy": "Aggressive"})
    report(h, b, R1)  # 1's log: epoch 1, up to 150
    assert h.partition("t").leader == NO_LEADER  # c has not reported yet
    report(h, c, R3)  # 3's log: epoch 2, up to 140
    reg = h.partition("t")
    assert (reg.leader, reg.isr, reg.is_recovering) == (c, (c,), True)
    (event,) = [e for e in h.drain() if e.type is EventType.UNCLEAN_RECOVERY]
    assert event.fields["strategy"] == "Aggressive" and event.fields["leader_after"] == c
    assert event.fields["lost"] == [{"broker": b, "from_offset": 130, "to_offset": 150, "records": 20}]
    assert event.fields["records_lost"] == 20


def test_unclean_leader_election_enable_recovers_by_the_rule_with_the_default_strategy() -> None:
    h, _, (b, c) = offline_partition({"unclean.leader.election.enable": True})
    assert h.partition("t").leader == NO_LEADER  # not the first live replica at once: the reports decide
    report(h, b, R3)
    report(h, c, R2)
    assert h.partition("t").leader == b


def test_balanced_waits_for_every_last_known_elr_member() -> None:
    # ELR on, min ISR 3: the followers leave the ISR into the ELR, the leader last; then all crash.
    h = Harness({"min.insync.replicas": 3})
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 3, {}, h.now)
    expire(h, {1, 2, 3}, ())
    assert h.partition("t").leader == NO_LEADER and h.partition("t").elr
    for broker in (1, 2):  # back from a crash: out of the ELR, into the last known ELR
        h.register(broker, incarnation=f"crashed-{broker}", clean=False)
        h.heartbeat(broker)
    reg = h.partition("t")
    assert not reg.isr and reg.elr == (3,) and reg.leader == NO_LEADER
    report(h, 1, R1)
    report(h, 2, R2)
    assert h.partition("t").leader == NO_LEADER  # 3 may still come back cleanly: wait
    h.register(3, incarnation="crashed-3", clean=False)
    h.heartbeat(3)
    assert not h.partition("t").elr and set(h.partition("t").last_known_elr) == {1, 2, 3}
    report(h, 1, R1)
    report(h, 2, R2)
    assert h.partition("t").leader == NO_LEADER  # 3 has not reported
    report(h, 3, R3)
    assert h.partition("t").leader == 3


def test_no_strategy_no_recovery_but_an_operator_may_elect_uncleanly() -> None:
    h, dead, (b, c) = offline_partition({"unclean.recovery.strategy": "None"})
    report(h, b, R2)
    assert h.partition("t").leader == NO_LEADER
    outcomes = h.controller.elect_unclean_leaders(h.now, [("t", 0), ("nope", 0)]).response
    assert outcomes == {("t", 0): errors.NONE, ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.partition("t").leader == b  # the only one that reported
    (event,) = [e for e in h.drain() if e.type is EventType.UNCLEAN_RECOVERY]
    assert event.fields["strategy"] == "ElectLeaders"
    again = h.controller.elect_unclean_leaders(h.now, [("t", 0)]).response
    assert again == {("t", 0): errors.ELECTION_NOT_NEEDED}


def test_an_operator_election_without_reports_finds_no_eligible_leader() -> None:
    h, _, _ = offline_partition({"unclean.recovery.strategy": "None"})
    outcomes = h.controller.elect_unclean_leaders(h.now).response
    assert outcomes == {("t", 0): errors.BY_NAME["ELIGIBLE_LEADERS_NOT_AVAILABLE"]}


def test_a_report_from_an_older_broker_epoch_does_not_count() -> None:
    h, _, (b, c) = offline_partition({"unclean.recovery.strategy": "Aggressive"})
    report(h, b, R3)
    expire(h, {b}, (c,))  # b restarts after reporting (its log may have changed)
    h.register(b, incarnation="again")
    h.heartbeat(b)
    report(h, c, R2)
    assert h.partition("t").leader == NO_LEADER  # b's report is from its previous life
    report(h, b, R3)
    assert h.partition("t").leader == b
