from __future__ import annotations

import uuid

import pytest
from apis_helpers import PLAIN, TOPIC_ID, arrive, wire

from insync import errors
from insync.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.security.listeners import Endpoint
from insync.types import BrokerEpoch, BrokerId
from insync.wire import controller_apis


@pytest.mark.parametrize("version", [0, 4])
def test_registration_both_ways(version: int) -> None:
    sent = BrokerRegistrationRequest(9, BrokerId(2), 0x1234)
    listeners = (Endpoint("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"), Endpoint("EXTERNAL", "h", 9094, "SASL_SSL"))
    body = controller_apis.registration_request(sent, version, "cluster-x", listeners, "r1")
    assert [int(e.security_protocol) for e in body.listeners] == [0, 3]
    registration = controller_apis.decode_registration(arrive(body), "cluster-x")
    assert registration.error is errors.NONE
    assert registration.request == sent
    assert (registration.host, registration.port, registration.rack) == ("127.0.0.1", 9092, "r1")
    assert registration.listeners == ("INTERNAL://127.0.0.1:9092", "EXTERNAL://h:9094")
    assert registration.incarnation_id == str(uuid.UUID(int=0x1234))
    answer = wire(controller_apis.encode_registration_response(
        BrokerRegistrationResponse(9, errors.NONE, BrokerEpoch(17)), version))
    assert controller_apis.registration_response_from_wire(answer, 9) == BrokerRegistrationResponse(
        9, errors.NONE, BrokerEpoch(17))


def test_registration_for_another_cluster_is_refused() -> None:
    body = controller_apis.registration_request(BrokerRegistrationRequest(1, BrokerId(2), 5), 4, "other", PLAIN)
    assert controller_apis.decode_registration(arrive(body), "cluster-x").error.name == "INCONSISTENT_CLUSTER_ID"


def test_a_broker_that_has_not_learnt_the_cluster_id_yet_registers() -> None:
    body = controller_apis.registration_request(BrokerRegistrationRequest(1, BrokerId(2), 5), 4, "", PLAIN)
    assert controller_apis.decode_registration(arrive(body), "cluster-x").error is errors.NONE


@pytest.mark.parametrize("version", [0, 2])
def test_heartbeat_both_ways(version: int) -> None:
    sent = BrokerHeartbeatRequest(9, BrokerId(2), BrokerEpoch(17), 120, want_shutdown=True)
    heartbeat = controller_apis.decode_heartbeat(arrive(controller_apis.heartbeat_request(sent, version)))
    assert heartbeat.request == sent and heartbeat.request.want_shutdown and not heartbeat.want_fence
    answer = wire(controller_apis.encode_heartbeat_response(
        BrokerHeartbeatResponse(9, errors.NONE, False, 0, should_shut_down=True, is_caught_up=True), version))
    assert (answer.is_caught_up, answer.is_fenced, answer.should_shut_down) == (True, False, True)
    received = controller_apis.heartbeat_response_from_wire(answer, 9, published_offset=130)
    assert (received.error, received.is_fenced, received.published_offset, received.should_shut_down) == (
        errors.NONE, False, 130, True)
    refused = wire(controller_apis.encode_heartbeat_response(
        BrokerHeartbeatResponse(9, errors.STALE_BROKER_EPOCH, True, 0), version))
    received = controller_apis.heartbeat_response_from_wire(refused, 9, published_offset=130)
    assert (received.error, received.is_fenced) == (errors.STALE_BROKER_EPOCH, True)


def test_heartbeat_names_failed_log_dirs_from_v1() -> None:
    """KIP-858's OfflineLogDirs, a tagged field of v1+: the ids arrive as sent."""
    dirs = (str(uuid.uuid4()), str(uuid.uuid4()))
    sent = BrokerHeartbeatRequest(9, BrokerId(2), BrokerEpoch(17), 120, offline_log_dirs=dirs)
    assert controller_apis.decode_heartbeat(arrive(controller_apis.heartbeat_request(sent, 1))).request == sent


@pytest.mark.parametrize("version", [2, 3])
def test_alter_partition_both_ways(version: int) -> None:
    other = str(uuid.UUID(int=77))
    # KIP-903: the members' broker epochs are the leader's (from their fetches), -1 where it knows none.
    items = (AlterPartitionData(TOPIC_ID, 0, 4, 7, (1, 2), new_isr_broker_epochs=(17, 30)),
             AlterPartitionData(other, 3, 0, 0, (1,)), AlterPartitionData(TOPIC_ID, 1, 0, 1, (2, 1)))
    sent = AlterPartitionRequest(9, BrokerId(1), BrokerEpoch(17), items)
    body = controller_apis.alter_partition_request(sent, version)
    decoded = controller_apis.decode_alter_partition(arrive(body))
    assert decoded.broker_id == 1 and decoded.broker_epoch == 17
    arrived = sorted((i for i in decoded.items if isinstance(i, AlterPartitionData)),
                     key=lambda i: (i.topic_id, i.partition))
    assert [(i.topic_id, i.partition, i.leader_epoch, i.partition_epoch, i.new_isr) for i in arrived] == sorted(
        (i.topic_id, i.partition, i.leader_epoch, i.partition_epoch, i.new_isr) for i in items)
    epochs = [i.new_isr_broker_epochs for i in arrived]
    assert epochs == ([(-1,), (17, 30), (-1, -1)] if version >= 3 else [(), (), ()])

    results = (AlterPartitionDataResult(TOPIC_ID, 1, errors.NONE, 2, (2, 1), 0, 2),
               AlterPartitionDataResult(other, 3, errors.UNKNOWN_TOPIC_ID),
               AlterPartitionDataResult(TOPIC_ID, 0, errors.NONE, 1, (1, 2), 4, 8))
    answer = wire(controller_apis.encode_alter_partition_response(AlterPartitionResponse(9, errors.NONE, results),
                                                                  version))
    received = controller_apis.alter_partition_response_from_wire(answer, sent)
    answered = [r for r in received.results if isinstance(r, AlterPartitionDataResult)]
    assert [(r.topic_id, r.partition, r.error, r.partition_epoch) for r in answered] == [
        (TOPIC_ID, 0, errors.NONE, 8), (other, 3, errors.UNKNOWN_TOPIC_ID, -1), (TOPIC_ID, 1, errors.NONE, 2)]
    assert answered[0].isr == (1, 2)

    refused = wire(controller_apis.encode_alter_partition_response(
        AlterPartitionResponse(9, errors.STALE_BROKER_EPOCH, ()), version))
    assert controller_apis.alter_partition_response_from_wire(refused, sent).error == errors.STALE_BROKER_EPOCH


@pytest.mark.parametrize(("version", "arrives"), [(3, 41), (2, -1)])
def test_registration_carries_the_previous_broker_epoch_from_v3(version: int, arrives: int) -> None:
    sent = BrokerRegistrationRequest(9, BrokerId(2), 0x1234, previous_broker_epoch=41)
    body = controller_apis.registration_request(sent, version, "cluster-x", PLAIN)
    assert controller_apis.decode_registration(arrive(body), "cluster-x").request.previous_broker_epoch == arrives
