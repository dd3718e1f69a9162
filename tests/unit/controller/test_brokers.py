from __future__ import annotations

import pytest
from ctrl_harness import CONTROLLER_ID, Harness

from insync import errors
from insync.controller.brokers import BrokerSessions, BrokerState, next_broker_state
from insync.errors import KafkaException
from insync.events import EventType
from insync.metadata.image import BrokerRegistration

SESSION_MS = 9000  # broker.session.timeout.ms default


def test_controller_elected_on_start_and_epoch_grows_with_each_activation() -> None:
    h = Harness()
    events = h.drain()
    assert [e.type for e in events][:1] == [EventType.CONTROLLER_ELECTED]
    assert events[0].broker == CONTROLLER_ID and events[0].fields["controller_epoch"] == 1
    assert h.controller.image.controller_epoch == 1


def test_registration_gives_a_new_increasing_epoch_and_the_broker_starts_fenced() -> None:
    h = Harness()
    e1 = h.register(1)
    e2 = h.register(2)
    e1_again = h.register(1)
    assert e1 < e2 < e1_again
    image = h.controller.image
    assert image.brokers[1].broker_epoch == e1_again and image.brokers[1].fenced
    assert image.brokers[1].host == "127.0.0.1" and image.brokers[1].port == 9001
    registered = [e for e in h.drain() if e.type is EventType.BROKER_REGISTERED]
    assert [(e.fields["broker_id"], e.fields["broker_epoch"]) for e in registered] == [(1, e1), (2, e2), (1, e1_again)]


def test_broker_is_unfenced_by_the_first_heartbeat_that_has_caught_up_with_its_registration() -> None:
    h = Harness()
    epoch = h.register(1)
    behind = h.controller.heartbeat(1, epoch, h.now, current_metadata_offset=epoch).response
    assert behind.is_fenced and not behind.is_caught_up  # it has not applied its own registration yet
    caught_up = h.controller.heartbeat(1, epoch, h.now, current_metadata_offset=epoch + 1).response
    assert not caught_up.is_fenced and caught_up.is_caught_up and not caught_up.should_shut_down
    assert not h.controller.image.brokers[1].fenced
    assert any(e.type is EventType.BROKER_UNFENCED and e.fields["broker_id"] == 1 for e in h.drain())


def test_want_fence_keeps_a_caught_up_broker_fenced() -> None:
    h = Harness()
    h.register(1)
    assert h.heartbeat(1, want_fence=True).is_fenced
    assert not h.heartbeat(1).is_fenced
    assert h.heartbeat(1, want_fence=True).is_fenced  # an unfenced broker may ask to be fenced again


def test_heartbeat_errors() -> None:
    h = Harness()
    with pytest.raises(KafkaException) as unknown:
        h.controller.heartbeat(9, 0, h.now, 0)
    assert unknown.value.error is errors.BROKER_ID_NOT_REGISTERED
    old = h.register(1)
    h.register(1)
    with pytest.raises(KafkaException) as stale:
        h.controller.heartbeat(1, old, h.now, 100)
    assert stale.value.error is errors.STALE_BROKER_EPOCH


def test_a_live_broker_id_cannot_be_taken_by_another_incarnation_until_its_session_expires() -> None:
    h = Harness()
    h.start(1)
    h.advance(SESSION_MS)  # last contact exactly one session ago: still valid
    with pytest.raises(KafkaException) as dup:
        h.register(1, incarnation="other")
    assert dup.value.error.name == "DUPLICATE_BROKER_REGISTRATION"


def test_a_fenced_broker_holds_no_session_so_its_next_incarnation_registers_at_once() -> None:
    h = Harness()
    h.start(1)
    assert h.heartbeat(1, want_shutdown=True).should_shut_down  # leads nothing: fenced at once
    h.advance(1)  # well inside the session timeout
    epoch = h.register(1, incarnation="restarted")
    assert h.controller.image.brokers[1].incarnation_id == "restarted"
    assert h.controller.image.brokers[1].broker_epoch == epoch
    h.advance(1)
    h.register(1, incarnation="other")
    assert h.controller.image.brokers[1].incarnation_id == "other"


def test_session_expiry_fences_in_tick_exactly_after_the_timeout() -> None:
    h = Harness()
    h.start(1, 2)
    h.drain()
    h.advance(SESSION_MS)
    h.heartbeat(2)
    assert h.controller.tick(h.now).records == ()
    assert h.controller.next_deadline_ms() <= h.now + 1
    h.advance(1)
    h.controller.tick(h.now)
    assert h.controller.image.brokers[1].fenced and not h.controller.image.brokers[2].fenced
    fenced = [e for e in h.drain() if e.type is EventType.BROKER_FENCED]
    assert [(e.fields["broker_id"], e.ts_ms, e.broker) for e in fenced] == [(1, h.now, CONTROLLER_ID)]


def test_next_deadline_is_the_earlier_of_session_expiry_and_propagation_check() -> None:
    h = Harness({"isr.change.propagation.check.interval.ms": 60000})
    h.start(1)
    assert h.controller.next_deadline_ms() == h.now + SESSION_MS + 1
    h2 = Harness()
    assert h2.controller.next_deadline_ms() == h2.now + 2500  # no brokers: only the check


def test_controlled_shutdown_moves_leadership_first_then_lets_the_broker_go() -> None:
    h = Harness()
    h.start(1, 2, 3)
    h.controller.create_topic("t", 3, 3, {}, h.now)
    led_by_1 = [v.partition for v in h.controller.image.partitions_led_by(1)]
    assert led_by_1
    h.drain()
    first = h.heartbeat(1, want_shutdown=True)
    assert not first.should_shut_down and not first.is_fenced
    image = h.controller.image
    assert image.partitions_led_by(1) == [] and image.brokers[1].in_controlled_shutdown
    assert all(1 not in v.registration.isr for v in image.all_partitions())
    moves = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert sorted(e.partition for e in moves) == led_by_1  # type: ignore[type-var]
    assert {e.fields["reason"] for e in moves} == {"shutdown"}
    second = h.heartbeat(1, want_shutdown=True)
    assert second.should_shut_down and second.is_fenced
    assert h.controller.image.brokers[1].fenced


def test_shutdown_of_a_broker_without_leaderships_is_immediate() -> None:
    h = Harness()
    h.start(1)
    response = h.heartbeat(1, want_shutdown=True)
    assert response.should_shut_down and response.is_fenced


def test_re_registration_of_a_live_broker_moves_its_leaderships() -> None:
    h = Harness()
    h.start(1, 2)
    h.controller.create_topic("t", 2, 2, {}, h.now)
    assert h.controller.image.partitions_led_by(1)
    h.register(1)  # restarted faster than its session could expire
    assert h.controller.image.partitions_led_by(1) == []
    assert h.controller.image.brokers[1].fenced


def registration(fenced: bool, shutting_down: bool = False) -> BrokerRegistration:
    return BrokerRegistration(1, 10, "i", "h", 1, None, fenced, shutting_down)


@pytest.mark.parametrize(("broker", "offset", "fence", "shutdown", "leads", "expected"), [
    (registration(True), 10, False, False, False, BrokerState.FENCED),
    (registration(True), 11, False, False, False, BrokerState.UNFENCED),
    (registration(True), 11, True, False, False, BrokerState.FENCED),
    (registration(True), 0, False, True, False, BrokerState.SHUTDOWN_NOW),
    (registration(False), 11, True, False, True, BrokerState.FENCED),
    (registration(False), 11, False, True, True, BrokerState.CONTROLLED_SHUTDOWN),
    (registration(False), 11, False, True, False, BrokerState.SHUTDOWN_NOW),
    (registration(False, True), 11, False, True, True, BrokerState.CONTROLLED_SHUTDOWN),
    (registration(False, True), 11, False, True, False, BrokerState.SHUTDOWN_NOW),
    (registration(False), 11, False, False, True, BrokerState.UNFENCED),
])
def test_next_broker_state_table(broker: BrokerRegistration, offset: int, fence: bool, shutdown: bool,
                                 leads: bool, expected: BrokerState) -> None:
    assert next_broker_state(broker, offset, fence, shutdown, leads) is expected


def test_sessions() -> None:
    sessions = BrokerSessions(100)
    sessions.touch(1, 1000)
    sessions.touch(2, 1050)
    assert sessions.has_valid_session(1, 1100) and not sessions.has_valid_session(1, 1101)
    assert not sessions.has_valid_session(3, 0)
    assert sessions.expired([1, 2, 3], 1101) == [1, 3]
    assert sessions.next_expiry_ms([1, 2]) == 1101
    assert sessions.next_expiry_ms([3]) is None
