"""Shared pieces of the API translation tests: a small cluster image, real byte round trips through kio, the
requests several tests send, and a principal's access."""

from __future__ import annotations

import datetime
import io
import random
import uuid
from typing import Any

from kio.serial import entity_reader, entity_writer

from insync.config import BrokerConfig
from insync.controller.controller import Controller
from insync.controller.store import MemoryStore
from insync.metadata.image import MetadataImage
from insync.metadata.records import (
    ConfigRecord,
    ControllerChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from insync.protocol.codec import (
    DecodedRequest,
    EncodedBody,
    decode_request,
    encode_request,
    request_schema,
    response_schema,
)
from insync.protocol.kio import build, nested, request_class
from insync.protocol.records import build_batch
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from insync.security.authorizer import Authorizer
from insync.security.listeners import Endpoint
from insync.security.principal import user
from insync.wire.authorization import RequestAccess
from insync.wire.versions import BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS, PRODUCE

TOPIC_ID = "5f2b6c1e-8a3d-4f6e-9b7a-1c2d3e4f5a6b"
OTHER_ID = "0b1c2d3e-4f5a-4b6c-8d7e-8f9a0b1c2d3e"
UNKNOWN_ID = "ffffffff-0000-4000-8000-000000000001"
BATCH = build_batch([(b"k", b"v")], base_timestamp=1_700_000_000_000)
PLAIN = (Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
ALICE = user("alice")


def cluster_image() -> MetadataImage:
    """Brokers 1-3 (3 fenced), controller 1; topic "orders" (3 partitions, RF 3, min ISR 2), "logs" (1
    partition, offline: its only replica, broker 3, is fenced)."""
    return MetadataImage.from_records(cluster_records())


def cluster_records() -> list[Record]:
    """The records of `cluster_image`."""
    return [
        ControllerChangeRecord(1, 1),
        RegisterBrokerRecord(1, 1, "inc-1", "127.0.0.1", 9091, "rack-a"),
        RegisterBrokerRecord(2, 2, "inc-2", "127.0.0.1", 9092),
        RegisterBrokerRecord(3, 3, "inc-3", "127.0.0.1", 9093),
        UnfenceBrokerRecord(1, 1),
        UnfenceBrokerRecord(2, 2),
        UnfenceBrokerRecord(3, 3),
        TopicRecord("orders", TOPIC_ID),
        ConfigRecord("orders", "min.insync.replicas", "2"),
        PartitionRecord(TOPIC_ID, 0, (1, 2, 3), (1, 2, 3), 1, 4, 7),
        PartitionRecord(TOPIC_ID, 1, (2, 3, 1), (2, 1), 2, 0, 1),
        PartitionRecord(TOPIC_ID, 2, (3, 1, 2), (3, 1, 2), 3, 0, 0),
        TopicRecord("logs", OTHER_ID),
        PartitionRecord(OTHER_ID, 0, (3,), (3,), 3, 0, 0),
        FenceBrokerRecord(3, 3),
        PartitionChangeRecord(OTHER_ID, 0, None, -1, 1, 1),
        PartitionChangeRecord(TOPIC_ID, 2, (1, 2), 1, 1, 1),
    ]


def running_controller() -> Controller:
    """A controller (node 100) with live brokers 1-3 and a topic "orders" (3 partitions, RF 3, min ISR 2)."""
    controller = Controller(100, BrokerConfig({"node.id": 100}), MemoryStore(), 0, random.Random(3))
    epochs = {b: controller.register_broker(b, f"inc-{b}", "127.0.0.1", 9090 + b, 10).response for b in (1, 2, 3)}
    for broker, epoch in epochs.items():
        controller.heartbeat(broker, epoch, 20, controller.published_offset)
    controller.create_topic("orders", 3, 3, {"min.insync.replicas": "2"}, 30)
    return controller


def client_request(api_key: int, version: int, /, correlation_id: int = 42, **fields: Any) -> DecodedRequest:
    """A request as a client sends it: built, framed and written by kio, then parsed by the broker's codec."""
    body = build(request_class(api_key, version), **fields)
    frame = encode_request(body, correlation_id, client_id="test-client")
    table = {**BROKER_API_VERSIONS, **CONTROLLER_API_VERSIONS}
    return decode_request(frame[4:], table)


def request_entity(api_key: int, version: int, entity_name: str, /, **fields: Any) -> Any:
    """A nested request entity (`FetchTopic`, ...) of that version."""
    return build(nested(request_class(api_key, version), entity_name), **fields)


def wire(entity: Any) -> Any:
    """`entity` written to bytes and read back by kio, as the peer would see it (an `EncodedBody` is read)."""
    if isinstance(entity, EncodedBody):
        return read_encoded(entity)
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    data = buffer.getvalue()
    parsed, size = entity_reader(type(entity))(data, 0)
    assert size == len(data)
    return parsed


def read_encoded(body: EncodedBody) -> Any:
    """The kio entity an already written body parses as, every byte of it."""
    data = b"".join(bytes(part) for part in body.parts)
    schema = request_schema if body.is_request else response_schema
    parsed, size = entity_reader(schema(body.api_key, body.api_version))(data, 0)
    assert size == len(data)
    return parsed


def topics_request(version: int, *names: str, ids: tuple[str, ...] = ()) -> tuple[object, ...]:
    by_name = tuple(request_entity(3, version, "MetadataRequestTopic", name=n, topic_id=None) for n in names)
    by_id = tuple(request_entity(3, version, "MetadataRequestTopic", name=None, topic_id=uuid.UUID(i)) for i in ids)
    return by_name + by_id


def produce_request(version: int, acks: int = -1) -> DecodedRequest:
    def topic(name: str, topic_id: str, partitions: tuple[int, ...]) -> object:
        data = tuple(request_entity(0, version, "PartitionProduceData", index=p, records=BATCH) for p in partitions)
        return request_entity(0, version, "TopicProduceData", name=name, topic_id=uuid.UUID(topic_id),
                              partition_data=data)

    topics = (topic("orders", TOPIC_ID, (0, 1)), topic("ghost", UNKNOWN_ID, (0,)))
    return client_request(0, version, acks=acks, timeout=datetime.timedelta(milliseconds=1500),
                          topic_data=topics)


def arrive(body: object, correlation_id: int = 9) -> DecodedRequest:
    """A request body as the controller listener decodes it after the wire."""
    return DecodedRequest(int(body.__api_key__), int(body.__version__), correlation_id, "broker",  # type: ignore[attr-defined]
                          wire(body))


def incremental(version: int, *resources: tuple[int, str, tuple[tuple[str, int, str | None], ...]],
                validate_only: bool = False) -> Any:
    entities = tuple(request_entity(44, version, "AlterConfigsResource", resource_type=t, resource_name=n, configs=tuple(
        request_entity(44, version, "AlterableConfig", name=k, config_operation=op, value=v) for k, op, v in c))
        for t, n, c in resources)
    return client_request(44, version, resources=entities, validate_only=validate_only)


def allow(resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                      AccessControlEntry(str(ALICE), "*", operation, AclPermissionType.ALLOW))


def access(*acls: AclBinding, api_key: int = PRODUCE) -> RequestAccess:
    return RequestAccess(Authorizer.create(acls, (), False), ALICE, "127.0.0.1", api_key)
