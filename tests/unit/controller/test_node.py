"""The controller node core: broker messages in, answers out, metadata long polls parked until publication."""

from __future__ import annotations

from ctrl_harness import Harness

from insync import errors
from insync.controller.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Heartbeat,
    MetadataFetchRequest,
    MetadataUpdate,
    Registration,
    ReplicaLogReportRequest,
)
from insync.controller.node import METADATA_WAIT_MAX_MS, ControllerCore
from insync.types import BrokerEpoch, BrokerId, Outgoing


def _core() -> tuple[Harness, ControllerCore]:
    harness = Harness()
    return harness, ControllerCore(harness.controller, harness.now)


def _registration(broker: int, error: errors.KafkaError = errors.NONE) -> Registration:
    return Registration(BrokerRegistrationRequest(7, BrokerId(broker), 1), "inc", "h", 9000 + broker, None, error)


def _poll(correlation: int, from_offset: int, wait_ms: int) -> MetadataFetchRequest:
    return MetadataFetchRequest(correlation, BrokerId(1), from_offset, 100, wait_ms)


def test_registration_and_heartbeat_are_answered_to_their_source() -> None:
    harness, core = _core()
    [answer] = core.handle(harness.now, "b1", _registration(1))
    assert answer.destination == "b1"
    assert isinstance(answer.message, BrokerRegistrationResponse) and answer.message.error is errors.NONE
    epoch = answer.message.broker_epoch
    [beat] = core.handle(harness.now, "b1", Heartbeat(BrokerHeartbeatRequest(8, BrokerId(1), epoch, 0), False))
    assert isinstance(beat.message, BrokerHeartbeatResponse)
    assert beat.message.correlation_id == 8 and beat.message.error is errors.NONE
    assert beat.message.published_offset == harness.controller.published_offset


def test_refusals_travel_as_errors() -> None:
    harness, core = _core()
    [refused] = core.handle(harness.now, "b1", _registration(1, errors.BY_NAME["INCONSISTENT_CLUSTER_ID"]))
    assert refused.message == BrokerRegistrationResponse(7, errors.BY_NAME["INCONSISTENT_CLUSTER_ID"],
                                                         BrokerEpoch(-1))
    [stale] = core.handle(harness.now, "b2", Heartbeat(BrokerHeartbeatRequest(9, BrokerId(2), BrokerEpoch(5), 0),
                                                        False))
    assert isinstance(stale.message, BrokerHeartbeatResponse) and stale.message.is_fenced
    assert stale.message.error is errors.BROKER_ID_NOT_REGISTERED
    assert core.handle(harness.now, "b2", ReplicaLogReportRequest(9, BrokerId(2), BrokerEpoch(5), ())) == []


def test_a_fetch_behind_the_published_offset_is_answered_at_once() -> None:
    harness, core = _core()
    published = harness.controller.published_offset
    [answer] = core.handle(harness.now, "b1", _poll(3, 0, 500))
    assert isinstance(answer.message, MetadataUpdate)
    assert answer.message.published_offset == published and len(answer.message.records) == published


def test_a_long_poll_is_parked_until_the_controller_publishes() -> None:
    harness, core = _core()
    published = harness.controller.published_offset
    assert core.handle(harness.now, "b1", _poll(3, published, 500)) == []
    assert core.parked_fetches == 1
    harness.advance(10)
    out = core.handle(harness.now, "b2", _registration(2))  # a registration publishes at once
    assert core.parked_fetches == 0
    [update] = [o for o in out if isinstance(o.message, MetadataUpdate)]
    assert update == Outgoing("b1", update.message)
    assert update.message.correlation_id == 3 and update.message.records[0][0] == published
    assert update.message.published_offset == harness.controller.published_offset > published


def test_a_long_poll_ends_empty_after_its_wait_capped_by_the_controller() -> None:
    harness, core = _core()
    published = harness.controller.published_offset
    assert core.handle(harness.now, "b1", _poll(3, published, 60_000)) == []
    assert core.next_deadline_ms() == harness.now + METADATA_WAIT_MAX_MS
    assert core.tick(harness.now + METADATA_WAIT_MAX_MS - 1) == []
    [answer] = core.tick(harness.now + METADATA_WAIT_MAX_MS)
    assert answer.message == MetadataUpdate(3, (), published)


def test_a_publication_by_a_direct_controller_call_wakes_parked_polls() -> None:
    harness, core = _core()
    harness.start(1)
    assert core.handle(harness.now, "b1", _poll(3, harness.controller.published_offset, 500)) == []
    assert core.wake(harness.now) == []
    harness.controller.create_topic("t", 1, 1, {}, harness.now)
    [answer] = core.wake(harness.now)
    assert isinstance(answer.message, MetadataUpdate) and answer.message.records
