"""Failed log directories in heartbeats (KIP-858): the broker's leaderships move and it leaves the ISRs, once per
directory and life, without fencing it."""

from __future__ import annotations

import pytest
from ctrl_harness import three_broker_topic

from insync.controller.log_dirs import LOG_DIRS_MAX, OfflineLogDirs
from insync.events import EventType
from insync.types import BrokerId

DIR_A, DIR_B = "3b0c5a4e-1f0b-5d3c-9a51-8e0c4d2f1a6b", "7f1e2d3c-4b5a-5968-8776-a5b4c3d2e1f0"


def test_a_failed_log_dir_moves_the_leadership_and_shrinks_the_isr_without_fencing_the_broker() -> None:
    h = three_broker_topic()
    leader = h.partition("t").leader
    h.drain()
    response = h.controller.heartbeat(leader, h.epochs[leader], h.now, h.controller.published_offset,
                                      offline_log_dirs=(DIR_A,)).response
    reg = h.partition("t")
    assert not response.is_fenced and not h.controller.image.brokers[leader].fenced
    assert reg.leader not in (leader, -1) and leader not in reg.isr and len(reg.isr) == 2
    [change] = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert change.fields["leader_before"] == leader and change.fields["reason"] == "log_dir_failure"


def test_a_dir_already_acted_on_changes_nothing_and_a_new_life_starts_afresh() -> None:
    dirs = OfflineLogDirs()
    broker = BrokerId(1)
    assert dirs.newly_offline(broker, 10, (DIR_A,)) == (DIR_A,)
    assert dirs.newly_offline(broker, 10, (DIR_A,)) == ()  # the replica may have rejoined: no second shrink
    assert dirs.newly_offline(broker, 10, (DIR_A, DIR_B)) == (DIR_B,)
    assert dirs.newly_offline(broker, 42, (DIR_A,)) == (DIR_A,)  # restarted: its directories were recovered
    assert dirs.newly_offline(BrokerId(2), 5, ()) == ()


def test_more_offline_dirs_than_a_broker_can_have_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="broker 1 reports 65 offline log dirs"):
        OfflineLogDirs().newly_offline(BrokerId(1), 1, tuple(str(i) for i in range(LOG_DIRS_MAX + 1)))
