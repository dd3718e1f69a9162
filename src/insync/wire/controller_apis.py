"""BrokerRegistration (v0-v4), BrokerHeartbeat (v0-v2) and AlterPartition (v2-v3): broker <-> controller.

Both ends are insync, so each API has its two halves here: the broker encodes `controller.messages` requests and
decodes the answers; the controller listener decodes requests into what `ControllerCore` handles and encodes the
answers.
- Registration: a UUID incarnation id, the cluster id (INCONSISTENT_CLUSTER_ID once learnt), and every
  advertised listener, so Metadata gives each client the address of the listener it came in on.
- Heartbeat: the wire has no published metadata offset, so a broker takes the high watermark of its last
  metadata fetch (`metadata_log.py`).
- AlterPartition names topics by id; v3 lists ISR members with the broker epochs the leader learnt from their
  fetches (KIP-903; never its image, which would vouch for a restarted broker's new life), -1 when unknown.
  Results come back grouped by topic; the broker side restores its items' order for `ControllerChannel`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from insync import errors
from insync.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Heartbeat,
    Registration,
)
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    ZERO_UUID,
    build,
    check_body,
    code,
    error_of,
    has_field,
    nested,
    request_class,
    response_class,
    wire_uuid,
)
from insync.security.listeners import Endpoint
from insync.types import BrokerEpoch, BrokerId
from insync.wire.entities import group
from insync.wire.versions import ALTER_PARTITION, BROKER_HEARTBEAT, BROKER_REGISTRATION

# Kafka's SecurityProtocol ids
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_UUID_MASK = (1 << 128) - 1


# BrokerRegistration --------------------------------------------------------------------------------------


def decode_registration(request: DecodedRequest, cluster_id: str | None) -> Registration:
    """A broker registration; one naming a cluster other than `cluster_id` (the controller's) is refused. A broker
    learns the id from the metadata it fetches after registering, so its first registration names none ("")."""
    body = request.body
    check_body(body, BROKER_REGISTRATION)
    incarnation = body.incarnation_id or uuid.UUID(int=0)
    previous_epoch = int(getattr(body, "previous_broker_epoch", -1))  # v3+ (KIP-966)
    internal = BrokerRegistrationRequest(request.correlation_id, BrokerId(int(body.broker_id)), incarnation.int,
                                         previous_epoch)
    error = errors.NONE
    if body.cluster_id and body.cluster_id != cluster_id:
        error = errors.BY_NAME["INCONSISTENT_CLUSTER_ID"]
    elif not body.listeners:
        error = errors.BY_NAME["INVALID_REGISTRATION"]
    listener = body.listeners[0] if body.listeners else None
    return Registration(internal, str(incarnation), listener.host if listener else "",
                        int(listener.port) if listener else 0, body.rack, error,
                        tuple(f"{entry.name}://{entry.host}:{entry.port}" for entry in body.listeners))


def encode_registration_response(response: BrokerRegistrationResponse, version: int) -> Any:
    return build(response_class(BROKER_REGISTRATION, version), throttle_time=NO_THROTTLE,
                 error_code=code(response.error), broker_epoch=response.broker_epoch)


def registration_request(request: BrokerRegistrationRequest, version: int, cluster_id: str,
                         listeners: Sequence[Endpoint], rack: str | None = None) -> Any:
    """The broker's side: the Kafka request for its registration message, announcing its advertised listeners."""
    assert listeners, "a broker registers at least one listener"
    cls = request_class(BROKER_REGISTRATION, version)
    entries = tuple(build(nested(cls, "Listener"), name=e.name, host=e.host, port=e.port,
                          security_protocol=SECURITY_PROTOCOL_IDS[e.security_protocol]) for e in listeners)
    return build(cls, broker_id=request.broker_id, cluster_id=cluster_id,
                 incarnation_id=uuid.UUID(int=request.incarnation_id & _UUID_MASK), listeners=entries,
                 features=(), rack=rack, is_migrating_zk_broker=False, log_dirs=(),
                 previous_broker_epoch=request.previous_broker_epoch)


def registration_response_from_wire(body: Any, correlation_id: int) -> BrokerRegistrationResponse:
    check_body(body, BROKER_REGISTRATION)
    return BrokerRegistrationResponse(correlation_id, error_of(body.error_code), BrokerEpoch(int(body.broker_epoch)))


# BrokerHeartbeat -----------------------------------------------------------------------------------------


def decode_heartbeat(request: DecodedRequest) -> Heartbeat:
    body = request.body
    check_body(body, BROKER_HEARTBEAT)
    internal = BrokerHeartbeatRequest(request.correlation_id, BrokerId(int(body.broker_id)),
                                      BrokerEpoch(int(body.broker_epoch)), int(body.current_metadata_offset),
                                      bool(body.want_shut_down),
                                      tuple(str(d) for d in getattr(body, "offline_log_dirs", ())))
    return Heartbeat(internal, bool(body.want_fence))


def encode_heartbeat_response(response: BrokerHeartbeatResponse, version: int) -> Any:
    """The controller's answer; with an error the broker counts as fenced, as in Kafka."""
    cls = response_class(BROKER_HEARTBEAT, version)
    if response.error is not errors.NONE:
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(response.error), is_caught_up=False,
                     is_fenced=True, should_shut_down=False)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), is_caught_up=response.is_caught_up,
                 is_fenced=response.is_fenced, should_shut_down=response.should_shut_down)


def heartbeat_request(request: BrokerHeartbeatRequest, version: int, want_fence: bool = False) -> Any:
    return build(request_class(BROKER_HEARTBEAT, version), broker_id=request.broker_id,
                 broker_epoch=request.broker_epoch, current_metadata_offset=request.metadata_offset,
                 want_fence=want_fence, want_shut_down=request.want_shutdown,
                 **({"offline_log_dirs": tuple(uuid.UUID(d) for d in request.offline_log_dirs)} if version >= 1 else {}))


def heartbeat_response_from_wire(body: Any, correlation_id: int, published_offset: int) -> BrokerHeartbeatResponse:
    """The broker's view; `published_offset` is the latest metadata fetch high watermark (not on this wire)."""
    check_body(body, BROKER_HEARTBEAT)
    return BrokerHeartbeatResponse(correlation_id, error_of(body.error_code), bool(body.is_fenced), published_offset,
                                   bool(body.should_shut_down))


# AlterPartition ------------------------------------------------------------------------------------------


def decode_alter_partition(request: DecodedRequest) -> AlterPartitionRequest:
    body = request.body
    check_body(body, ALTER_PARTITION)
    items = []
    for topic in body.topics:
        topic_id = str(topic.topic_id or ZERO_UUID)
        for p in topic.partitions:
            epochs: tuple[int, ...] = ()
            if has_field(p, "new_isr_with_epochs"):
                new_isr = tuple(BrokerId(int(member.broker_id)) for member in p.new_isr_with_epochs)
                epochs = tuple(int(member.broker_epoch) for member in p.new_isr_with_epochs)
            else:
                new_isr = tuple(BrokerId(int(b)) for b in p.new_isr)
            items.append(AlterPartitionData(topic_id, int(p.partition_index), int(p.leader_epoch),
                                            int(p.partition_epoch), new_isr, int(p.leader_recovery_state), epochs))
    return AlterPartitionRequest(request.correlation_id, BrokerId(int(body.broker_id)),
                                 BrokerEpoch(int(body.broker_epoch)), tuple(items))


def encode_alter_partition_response(response: AlterPartitionResponse, version: int) -> Any:
    cls = response_class(ALTER_PARTITION, version)
    partition_cls = nested(cls, "PartitionData")
    items = []
    for result in response.results:
        assert isinstance(result, AlterPartitionDataResult), result
        items.append((result.topic_id, build(partition_cls, partition_index=result.partition,
                                             error_code=code(result.error), leader_id=result.leader,
                                             leader_epoch=result.leader_epoch, isr=result.isr,
                                             leader_recovery_state=result.leader_recovery_state,
                                             partition_epoch=result.partition_epoch)))
    topics = tuple(build(nested(cls, "TopicData"), topic_id=wire_uuid(topic_id), partitions=tuple(partitions))
                   for topic_id, partitions in group(items))
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(response.error), topics=topics)


def alter_partition_request(request: AlterPartitionRequest, version: int) -> Any:
    """The broker's side; v3 lists the ISR members with the broker epochs the leader gave (-1: unknown)."""
    cls = request_class(ALTER_PARTITION, version)
    partition_cls = nested(cls, "PartitionData")
    items = []
    for item in request.items:
        assert isinstance(item, AlterPartitionData), item
        members = ()
        if has_field(partition_cls, "new_isr_with_epochs"):
            epochs = item.new_isr_broker_epochs or tuple(-1 for _ in item.new_isr)
            members = tuple(build(nested(cls, "BrokerState"), broker_id=b, broker_epoch=e)
                            for b, e in zip(item.new_isr, epochs, strict=True))
        items.append((item.topic_id, build(partition_cls, partition_index=item.partition,
                                           leader_epoch=item.leader_epoch, partition_epoch=item.partition_epoch,
                                           new_isr=item.new_isr, new_isr_with_epochs=members,
                                           leader_recovery_state=item.leader_recovery_state)))
    topics = tuple(build(nested(cls, "TopicData"), topic_id=wire_uuid(topic_id), partitions=tuple(partitions))
                   for topic_id, partitions in group(items))
    return build(cls, broker_id=request.broker_id, broker_epoch=request.broker_epoch, topics=topics)


def alter_partition_response_from_wire(body: Any, request: AlterPartitionRequest) -> AlterPartitionResponse:
    """Results in the order of `request.items`; an item the controller left out reads UNKNOWN_SERVER_ERROR."""
    check_body(body, ALTER_PARTITION)
    error = error_of(body.error_code)
    if error is not errors.NONE:
        return AlterPartitionResponse(request.correlation_id, error, ())
    answered: dict[tuple[str, int], AlterPartitionDataResult] = {}
    for topic in body.topics:
        topic_id = str(topic.topic_id or ZERO_UUID)
        for p in topic.partitions:
            answered[(topic_id, int(p.partition_index))] = AlterPartitionDataResult(
                topic_id, int(p.partition_index), error_of(p.error_code), BrokerId(int(p.leader_id)),
                tuple(BrokerId(int(b)) for b in p.isr), int(p.leader_epoch), int(p.partition_epoch),
                int(p.leader_recovery_state))
    results = []
    for item in request.items:
        assert isinstance(item, AlterPartitionData), item
        missing = AlterPartitionDataResult(item.topic_id, item.partition, errors.UNKNOWN_SERVER_ERROR)
        results.append(answered.get((item.topic_id, item.partition), missing))
    return AlterPartitionResponse(request.correlation_id, errors.NONE, tuple(results))

