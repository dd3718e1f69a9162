from __future__ import annotations

from insync import errors
from insync.broker.controller_channel import (
    ALTER_RETRY_BACKOFF_MS,
    REQUEST_TIMEOUT_MS,
    SHUTDOWN_HEARTBEAT_INTERVAL_MS,
    ControllerChannel,
)
from insync.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    MetadataFetchRequest,
)
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.types import BrokerEpoch, BrokerId, TopicPartition


def _registered(now: int = 1000) -> ControllerChannel:
    channel = ControllerChannel(BrokerId(1), incarnation_id=1, heartbeat_interval_ms=2000)
    [out] = channel.tick(now, applied_offset=0)
    assert isinstance(out.message, BrokerRegistrationRequest)
    assert channel.on_registration(now, BrokerRegistrationResponse(out.message.correlation_id, errors.NONE,
                                                                    BrokerEpoch(7)))
    return channel


def test_registers_then_heartbeats_every_interval() -> None:
    channel = _registered()
    assert channel.broker_epoch == 7
    [hb] = channel.tick(1000, applied_offset=3)
    assert isinstance(hb.message, BrokerHeartbeatRequest) and hb.message.metadata_offset == 3
    assert channel.tick(2999, applied_offset=3) == []
    assert channel.next_deadline_ms() == 3000


def test_stale_epoch_sends_the_broker_back_to_registration() -> None:
    channel = _registered()
    channel.on_heartbeat(BrokerHeartbeatResponse(1, errors.STALE_BROKER_EPOCH, True, 0))
    assert not channel.registered
    [out] = channel.tick(5000, applied_offset=0)
    assert isinstance(out.message, BrokerRegistrationRequest)


def test_behind_the_published_offset_fetches_metadata_once() -> None:
    channel = _registered()
    channel.on_heartbeat(BrokerHeartbeatResponse(1, errors.NONE, False, 10))
    out = channel.tick(1000, applied_offset=4)
    fetches = [o.message for o in out if isinstance(o.message, MetadataFetchRequest)]
    assert len(fetches) == 1 and fetches[0].from_offset == 4
    assert channel.fetch_metadata(1001, 4) == []


def test_one_alter_partition_in_flight_and_retry_after_timeout() -> None:
    channel = _registered()
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    [first] = channel.propose(1000, tp0, AlterPartitionData("id", 0, 0, 0, (1, 2)))
    assert isinstance(first.message, AlterPartitionRequest) and len(first.message.items) == 1
    assert channel.propose(1001, tp1, AlterPartitionData("id", 1, 0, 0, (1,))) == []
    result = AlterPartitionDataResult("id", 0, errors.NONE, 1, (1, 2), 0, 1)
    matched, nxt = channel.on_alter_partition(1002, AlterPartitionResponse(first.message.correlation_id,
                                                                           errors.NONE, (result,)))
    assert [(tp, r) for tp, _, r in matched] == [(tp0, result)]
    assert len(nxt) == 1 and isinstance(nxt[0].message, AlterPartitionRequest)
    # The second request is lost: after the timeout and the back-off its item is sent again.
    lost_at = 1002 + REQUEST_TIMEOUT_MS
    assert not [o for o in channel.tick(lost_at, 0) if isinstance(o.message, AlterPartitionRequest)]
    out = channel.tick(lost_at + ALTER_RETRY_BACKOFF_MS, applied_offset=0)
    resent = [o.message for o in out if isinstance(o.message, AlterPartitionRequest)]
    assert len(resent) == 1 and resent[0].items[0].partition == 1


def test_a_refused_request_is_retried_after_the_back_off_not_in_a_loop() -> None:
    channel = _registered()
    [first] = channel.propose(1000, TopicPartition("t", 0), AlterPartitionData("id", 0, 0, 0, (1, 2)))
    assert isinstance(first.message, AlterPartitionRequest)
    refused = AlterPartitionResponse(first.message.correlation_id, errors.STALE_BROKER_EPOCH, ())
    assert channel.on_alter_partition(1001, refused) == ([], [])
    early = channel.tick(1001 + ALTER_RETRY_BACKOFF_MS - 1, applied_offset=0)
    assert not [o for o in early if isinstance(o.message, AlterPartitionRequest)]
    out = channel.tick(1001 + ALTER_RETRY_BACKOFF_MS, applied_offset=0)
    assert [type(o.message) for o in out].count(AlterPartitionRequest) == 1


def test_controlled_shutdown_heartbeats_at_once_asking_to_go_until_the_controller_lets_it() -> None:
    channel = _registered()
    [hb] = channel.tick(1000, applied_offset=3)
    assert isinstance(hb.message, BrokerHeartbeatRequest) and not hb.message.want_shutdown
    channel.begin_shutdown(1500)
    [ask] = channel.tick(1500, applied_offset=3)  # at once, not at the next interval (3000)
    assert isinstance(ask.message, BrokerHeartbeatRequest) and ask.message.want_shutdown
    assert channel.next_deadline_ms() == 1500 + SHUTDOWN_HEARTBEAT_INTERVAL_MS
    channel.on_heartbeat(BrokerHeartbeatResponse(ask.message.correlation_id, errors.NONE, False, 0))
    assert not channel.shutdown_granted  # leaderships being moved
    [again] = channel.tick(1500 + SHUTDOWN_HEARTBEAT_INTERVAL_MS, applied_offset=3)
    assert isinstance(again.message, BrokerHeartbeatRequest) and again.message.want_shutdown
    channel.on_heartbeat(BrokerHeartbeatResponse(again.message.correlation_id, errors.NONE, True, 0,
                                                 should_shut_down=True))
    assert channel.shutdown_granted


def test_controlled_shutdown_of_a_broker_the_controller_does_not_count_needs_no_answer() -> None:
    unregistered = ControllerChannel(BrokerId(1), incarnation_id=1, heartbeat_interval_ms=2000)
    unregistered.begin_shutdown(1000)
    assert unregistered.shutdown_granted and unregistered.tick(1000, applied_offset=0) == []  # no registration
    assert unregistered.next_deadline_ms() > 1000  # and no timer spinning on a past deadline
    stale = _registered()
    stale.begin_shutdown(1000)
    stale.tick(1000, applied_offset=0)
    stale.on_heartbeat(BrokerHeartbeatResponse(2, errors.STALE_BROKER_EPOCH, True, 0))
    assert stale.shutdown_granted and not stale.registered
    assert stale.tick(1000 + SHUTDOWN_HEARTBEAT_INTERVAL_MS, applied_offset=0) == []


def test_registration_names_the_previous_epoch_then_this_life_s_own() -> None:
    channel = ControllerChannel(BrokerId(1), incarnation_id=1, heartbeat_interval_ms=2000, previous_broker_epoch=5)
    [out] = channel.tick(1000, applied_offset=0)
    assert isinstance(out.message, BrokerRegistrationRequest) and out.message.previous_broker_epoch == 5
    assert channel.epoch_to_remember == 5  # not registered yet: the marker must keep naming the last life
    channel.on_registration(1000, BrokerRegistrationResponse(out.message.correlation_id, errors.NONE,
                                                             BrokerEpoch(7)))
    assert channel.epoch_to_remember == 7
    channel.on_heartbeat(BrokerHeartbeatResponse(9, errors.STALE_BROKER_EPOCH, True, 0))
    [again] = channel.tick(1000, applied_offset=0)
    # Registering again without a restart: nothing was lost, so it names the epoch of this very life.
    assert isinstance(again.message, BrokerRegistrationRequest) and again.message.previous_broker_epoch == 7
