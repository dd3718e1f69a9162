"""KIP-704 in the controller: an unclean election makes the leader RECOVERING; the leader's AlterPartition
asking RECOVERED ends it; Kafka's checks on the recovery state an AlterPartition asks for."""

from __future__ import annotations

import pytest
from ctrl_harness import Harness

from insync import errors
from insync.controller.election import build_partition_change
from insync.controller.replication_control import AlterPartitionData
from insync.controller.store import MemoryStore
from insync.metadata.image import PartitionRegistration
from insync.metadata.records import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

TID = "00000000-0000-4000-8000-000000000001"


def test_an_unclean_election_marks_the_new_leader_recovering() -> None:
    current = PartitionRegistration((1, 2), (1,), 1, 4, 7)
    change = build_partition_change(TID, 0, current, None, lambda b: b == 2, unclean_allowed=True)
    assert change is not None and change.unclean and change.record.leader_recovery_state == LEADER_RECOVERING
    clean = build_partition_change(TID, 0, PartitionRegistration((1, 2), (1, 2), 1, 4, 7), None,
                                   lambda b: b == 2, unclean_allowed=True)
    assert clean is not None and clean.record.leader_recovery_state is None


def _recovering_leader() -> Harness:
    """Broker 1 leads t-0 (replicas 1, 2), elected uncleanly: ISR (1,), RECOVERING."""
    store = MemoryStore()
    store.append([RegisterBrokerRecord(1, 0, "inc-1", "h", 9001), RegisterBrokerRecord(2, 1, "inc-2", "h", 9002),
                  UnfenceBrokerRecord(1, 0), UnfenceBrokerRecord(2, 1), TopicRecord("t", TID),
                  PartitionRecord(TID, 0, (1, 2), (1,), 1, 3, 5, leader_recovery_state=LEADER_RECOVERING)])
    h = Harness(store=store)
    h.epochs.update({1: 0, 2: 1})
    return h


def _alter(h: Harness, isr: tuple[int, ...], state: int):  # type: ignore[no-untyped-def]
    reg = h.partition("t")
    item = AlterPartitionData(TID, 0, reg.leader_epoch, reg.partition_epoch, isr, state)
    return h.controller.alter_partition(1, h.epochs[1], [item], h.now).response[0]


def test_the_leaders_alter_partition_asking_recovered_ends_recovery() -> None:
    h = _recovering_leader()
    result = _alter(h, (1,), LEADER_RECOVERED)
    assert result.error is errors.NONE and result.leader_recovery_state == LEADER_RECOVERED
    reg = h.partition("t")
    assert not reg.is_recovering and reg.isr == (1,) and reg.partition_epoch == 6 and reg.leader_epoch == 3


@pytest.mark.parametrize(("isr", "recovering_first"), [((1, 2), True), ((1,), False)])
def test_recovering_is_refused_with_more_than_the_leader_or_after_recovered(isr: tuple[int, ...],
                                                                            recovering_first: bool) -> None:
    h = _recovering_leader()
    if not recovering_first:
        assert _alter(h, (1,), LEADER_RECOVERED).error is errors.NONE
    assert _alter(h, isr, LEADER_RECOVERING).error is errors.INVALID_REQUEST
    assert h.partition("t").is_recovering is recovering_first
