"""Automatic leader balancing (`auto.leader.rebalance.enable`, Kafka's KRaft schedule): an imbalance left by a
write is balanced one `leader.imbalance.check.interval.seconds` later, only where the preferred replica is in the
ISR; rounds of at most MAX_ELECTIONS_PER_IMBALANCE; off when the switch is off."""

from __future__ import annotations

import pytest
from ctrl_harness import Harness, expire, set_isr, three_broker_topic

from insync import errors
from insync.config import BrokerConfig, ConfigError
from insync.controller.leader_balance import LeaderBalance, is_imbalanced
from insync.events import EventType

INTERVAL_MS = 300_000  # leader.imbalance.check.interval.seconds' default


def _preferred_back_in_the_isr(h: Harness) -> int:
    """The preferred replica fenced (leadership moves off it), then back and in the ISR again."""
    preferred = h.partition("t").replicas[0]
    expire(h, {preferred}, tuple(b for b in (1, 2, 3) if b != preferred))
    assert h.partition("t").leader != preferred
    h.register(preferred, incarnation="back")
    h.heartbeat(preferred)
    set_isr(h, "t", (*h.partition("t").isr, preferred))
    h.drain()
    return preferred


def _tick_until(h: Harness, until_ms: int) -> None:
    """Heartbeat every broker and tick, a second at a time, as the server's timer does."""
    while h.now < until_ms:
        h.advance(1000)
        h.heartbeat_all(1, 2, 3)
        h.controller.tick(h.now)


def test_leadership_returns_to_the_preferred_replica_one_interval_after_the_imbalance() -> None:
    h = three_broker_topic()
    before = h.now
    preferred = _preferred_back_in_the_isr(h)  # the imbalance began between `before` and now
    assert h.controller.next_deadline_ms() <= h.now + INTERVAL_MS
    _tick_until(h, before + INTERVAL_MS - 1000)
    assert h.partition("t").leader != preferred  # not before the interval
    _tick_until(h, h.now + 60_000)
    assert h.partition("t").leader == preferred
    changes = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert [(e.fields["reason"], e.fields["leader_after"]) for e in changes] == [("preferred", preferred)]
    assert not is_imbalanced(h.controller.image)
    _tick_until(h, h.now + 2 * INTERVAL_MS)  # balanced: nothing more is scheduled or moved
    assert [e for e in h.drain() if e.type is EventType.LEADER_CHANGE] == []


def test_nothing_moves_with_the_switch_off() -> None:
    h = three_broker_topic({"auto.leader.rebalance.enable": False})
    preferred = _preferred_back_in_the_isr(h)
    _tick_until(h, h.now + 2 * INTERVAL_MS)
    assert h.partition("t").leader != preferred
    assert h.controller.elect_preferred_leaders(h.now).response == {("t", 0): errors.NONE}  # by hand, as ever


def test_a_preferred_replica_out_of_the_isr_is_left_and_checked_again_an_interval_later() -> None:
    h = three_broker_topic({"leader.imbalance.check.interval.seconds": 10})
    preferred = h.partition("t").replicas[0]
    expire(h, {preferred}, tuple(b for b in (1, 2, 3) if b != preferred))
    h.register(preferred, incarnation="back")
    h.heartbeat(preferred)  # alive, but not yet back in the ISR
    _tick_until(h, h.now + 25_000)  # two balances came and went
    assert h.partition("t").leader != preferred
    assert h.controller.next_deadline_ms() <= h.now + 10_000  # and the next is scheduled
    set_isr(h, "t", (*h.partition("t").isr, preferred))
    _tick_until(h, h.now + 12_000)
    assert h.partition("t").leader == preferred


def test_the_schedule_runs_rounds_back_to_back_while_elections_wait() -> None:
    balance = LeaderBalance(INTERVAL_MS, due_ms=5_000)
    assert not balance.is_due(4_999) and balance.is_due(5_000)
    assert balance.after_balance(True, 5_000).due_ms == 5_000  # more than one round's worth: the next at once
    assert balance.after_balance(False, 5_000).due_ms is None
    off = BrokerConfig({"auto.leader.rebalance.enable": False})
    assert LeaderBalance.from_config(off.controller) == LeaderBalance(None)
    assert LeaderBalance.from_config(BrokerConfig({}).controller) == LeaderBalance(INTERVAL_MS)


def test_bad_balance_settings_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="leader.imbalance.per.broker.percentage"):
        BrokerConfig({"leader.imbalance.per.broker.percentage": 101})
    with pytest.raises(ConfigError, match="leader.imbalance.check.interval.seconds"):
        BrokerConfig({"leader.imbalance.check.interval.seconds": 0})
