"""The checker catches what it must: HW regressions, two leaders in one epoch, a log start above the HW, leaders
missing committed records, ISR and ELR overlapping, lost acks, divergent logs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from insync.sim.checker import BatchInfo, Checker, LeaderState
from insync.sim.history import Ack, History
from insync.types import Offset, TopicPartition

TP = TopicPartition("t", 0)


class FakeView:
    def __init__(self) -> None:
        self.leaders: dict[int, list[LeaderState]] = {}
        self.logs: dict[int, list[BatchInfo]] = {}
        self.hws: dict[int, int] = {}
        self.leader = 1
        self.candidates: dict[int, list[tuple[TopicPartition, int]]] = {}

    def leader_states(self, broker_id: int) -> Iterable[LeaderState]:
        return self.leaders.get(broker_id, [])

    def candidate_log_ends(self, broker_id: int) -> Iterable[tuple[TopicPartition, int]]:
        return self.candidates.get(broker_id, [])

    def replica_brokers(self, topic_partition: TopicPartition) -> list[int]:
        return sorted(self.logs)

    def high_watermark(self, broker_id: int, topic_partition: TopicPartition) -> int:
        return self.hws[broker_id]

    def batches(self, broker_id: int, topic_partition: TopicPartition, end_offset: int,
                start_offset: int = 0) -> list[BatchInfo]:
        return [b for b in self.logs[broker_id] if start_offset <= b.last_offset and b.base_offset < end_offset]

    def current_leader(self, topic_partition: TopicPartition) -> int:
        return self.leader


def state(epoch: int, hw: int, log_start: int = 0, leo: int | None = None) -> LeaderState:
    return LeaderState(TP, epoch, hw, log_start, hw if leo is None else leo)


def test_hw_going_backwards_within_an_epoch_is_a_violation_but_not_across_epochs() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100)]
    checker.check_broker(0, 1)
    view.leaders[1] = [state(4, 90, leo=100)]  # a new epoch may start lower
    checker.check_broker(1, 1)
    assert checker.violations == []
    view.leaders[1] = [state(4, 80, leo=100)]
    checker.check_broker(2, 1)
    assert len(checker.violations) == 1 and "backwards" in checker.violations[0]


def test_two_leaders_for_one_epoch_is_a_violation() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100)]
    view.leaders[2] = [state(3, 100)]
    checker.check_broker(0, 1)
    checker.check_broker(0, 2)
    assert any("both led epoch 3" in v for v in checker.violations)


def _batch(offset: int, crc: int, ident: int) -> BatchInfo:
    return BatchInfo(offset, offset + 9, crc, (7, ident))


def test_lost_ack_and_divergence_are_reported() -> None:
    view = FakeView()
    view.logs = {1: [_batch(0, 11, 0), _batch(10, 12, 10)], 2: [_batch(0, 11, 0), _batch(10, 99, 10)]}
    view.hws = {1: 20, 2: 20}
    history = History()
    history.record_ack(Ack(TP, (7, 0), Offset(0), 10, -1, 0))
    history.record_ack(Ack(TP, (7, 20), Offset(20), 10, -1, 0))  # never made it into the log
    checker = Checker(view)
    report = checker.final_check(0, history, [TP], unclean_elections=0)
    assert report.lost_acked == 1
    assert report.divergent and "diverge at offset 10" in report.divergent[0]
    assert len(checker.violations) == 2


def test_lost_writes_after_an_unclean_election_are_reported_not_violations() -> None:
    view = FakeView()
    view.logs = {1: [_batch(0, 11, 0)]}
    view.hws = {1: 10}
    history = History()
    history.record_ack(Ack(TP, (7, 10), Offset(10), 10, -1, 0))
    checker = Checker(view)
    report = checker.final_check(0, history, [TP], unclean_elections=1)
    assert report.lost_acked == 1 and checker.violations == []


def test_periodic_prefix_check_compares_only_what_was_committed_since_the_last() -> None:
    view = FakeView()
    view.logs = {1: [_batch(0, 11, 0)], 2: [_batch(0, 11, 0)]}
    view.hws = {1: 10, 2: 10}
    checker = Checker(view)
    checker.check_prefixes(0, [TP])
    assert checker.violations == []
    view.logs[1].append(_batch(10, 12, 10))
    view.logs[2].append(_batch(10, 13, 10))  # diverges above the old HW, below the new one
    view.hws = {1: 20, 2: 20}
    checker.check_prefixes(1, [TP])
    assert len(checker.violations) == 1 and "diverge at offset 10" in checker.violations[0]


def test_a_log_start_above_the_high_watermark_is_a_violation() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100, log_start=100, leo=500)]
    checker.check_broker(0, 1)
    assert checker.violations == []
    view.leaders[1] = [state(3, 100, log_start=120, leo=500)]
    checker.check_broker(1, 1)
    assert len(checker.violations) == 1 and "log start offset 120 above the high watermark 100" in checker.violations[0]


def test_a_new_leader_missing_committed_records_violates_leader_completeness_unless_unclean() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100)]
    checker.check_broker(0, 1)
    view.leaders = {2: [state(4, 0, leo=90)]}  # elected with a log ending below the committed offset 100
    checker.check_broker(1, 2)
    assert len(checker.violations) == 1 and "leader completeness" in checker.violations[0]
    checker.unclean_election(TP, 5)
    view.leaders = {3: [state(5, 0, leo=50)]}
    checker.check_broker(2, 3)
    view.leaders = {1: [state(3, 100)]}  # the deposed leader of epoch 3 no longer sets what is committed
    checker.check_broker(3, 1)
    assert len(checker.violations) == 1


def test_a_leader_losing_committed_records_later_is_a_violation() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100, leo=120)]
    checker.check_broker(0, 1)
    view.leaders[1] = [state(3, 100, leo=80)]
    checker.check_broker(1, 1)
    assert any("committed records lost" in v for v in checker.violations)


@dataclass(frozen=True)
class Registration:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


def test_isr_and_elr_must_be_disjoint_the_elr_empty_at_min_isr_and_the_leader_in_the_isr() -> None:
    checker = Checker(FakeView())
    checker.check_image(0, [(TP, Registration(1, (1, 2, 3), (1,), (2, 3)), 2)])
    assert checker.violations == []
    checker.check_image(1, [(TP, Registration(1, (1, 2, 3), (1, 2), (2,)), 3)])
    checker.check_image(2, [(TP, Registration(1, (1, 2, 3), (1, 2), (3,)), 2)])
    checker.check_image(3, [(TP, Registration(3, (1, 2, 3), (1, 2)), 2)])
    assert len(checker.violations) == 3
    assert "disjoint" in checker.violations[0] and "empty at min ISR 2" in checker.violations[1]
    assert "not in the ISR" in checker.violations[2]


def test_an_isr_or_elr_member_missing_committed_records_violates_leader_candidate_completeness() -> None:
    view = FakeView()
    checker = Checker(view)
    view.leaders[1] = [state(3, 100)]
    view.candidates[2] = [(TP, 100)]
    checker.check_broker(0, 1)
    checker.check_broker(0, 2)
    assert checker.violations == []
    view.candidates[2] = [(TP, 40)]  # back from a crash that cost it its tail, still named in the ISR
    checker.check_broker(1, 2)
    checker.check_broker(2, 2)
    assert len(checker.violations) == 1 and "leader candidate completeness" in checker.violations[0]


def test_a_committed_batch_gone_after_a_change_of_leader_is_a_violation() -> None:
    view = FakeView()
    view.logs = {1: [_batch(0, 11, 0), _batch(10, 12, 10)], 2: [_batch(0, 11, 0)]}
    view.hws = {1: 20, 2: 10}
    checker = Checker(view)
    checker.check_prefixes(0, [TP])
    assert checker.violations == []
    view.leader = 2  # its log lacks the batch at 10, committed on broker 1; then it takes new writes there
    view.logs = {2: [_batch(0, 11, 0), _batch(10, 77, 99)]}
    view.hws = {2: 20}
    checker.check_prefixes(1, [TP])
    assert len(checker.violations) == 1 and "committed batch at offset 10 changed" in checker.violations[0]
