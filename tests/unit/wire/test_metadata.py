from __future__ import annotations

import uuid

import pytest
from apis_helpers import (
    OTHER_ID,
    TOPIC_ID,
    UNKNOWN_ID,
    client_request,
    cluster_image,
    cluster_records,
    request_entity,
    topics_request,
    wire,
)

from insync import errors
from insync.metadata.image import MetadataImage
from insync.metadata.records import FenceBrokerRecord
from insync.wire import metadata


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12, 13])
def test_metadata_for_named_topics(version: int) -> None:
    request = client_request(3, version, topics=topics_request(version, "orders", "nope"),
                             allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=False)
    query = metadata.decode_request(request)
    assert query.topics == ("orders", "nope")
    assert query.allow_auto_topic_creation == (version < 4)  # the field exists from v4 (default true)
    image = cluster_image()
    assert metadata.unknown_topics(query, image) == ("nope",)
    body = wire(metadata.encode_response(query, image, "cluster-x", 2))
    assert body.__version__ == version
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(1, "127.0.0.1", 9091), (2, "127.0.0.1", 9092)]
    if version >= 1:
        assert body.controller_id == 2 and body.brokers[0].rack == "rack-a"  # the answering broker
    if version >= 2:
        assert body.cluster_id == "cluster-x"
    orders, nope = body.topics
    assert (orders.name, orders.error_code) == ("orders", 0)
    assert (nope.name, nope.error_code) == ("nope", errors.UNKNOWN_TOPIC_OR_PARTITION.code)
    if version >= 10:
        assert orders.topic_id == uuid.UUID(TOPIC_ID)
    p0, p1, p2 = orders.partitions
    assert (p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (1, (1, 2, 3), (1, 2, 3))
    assert (p1.leader_id, p1.isr_nodes, p2.leader_id, p2.isr_nodes) == (2, (2, 1), 1, (1, 2))
    if version >= 5:
        assert p0.offline_replicas == (3,)  # broker 3 is fenced
    if version >= 7:
        assert (p0.leader_epoch, p2.leader_epoch) == (4, 1)
    if version >= 13:
        assert body.error_code == 0


@pytest.mark.parametrize("version", [0, 1, 13])
def test_metadata_for_all_topics(version: int) -> None:
    topics: tuple[object, ...] | None = () if version == 0 else None
    body = wire(metadata.respond(client_request(3, version, topics=topics, allow_auto_topic_creation=True,
                                                include_topic_authorized_operations=False), cluster_image(), "c", 1))
    assert [t.name for t in body.topics] == ["logs", "orders"]
    logs = body.topics[0].partitions[0]
    assert (logs.error_code, logs.leader_id) == (errors.LEADER_NOT_AVAILABLE.code, -1)


def test_metadata_by_topic_id() -> None:
    request = client_request(3, 12, topics=topics_request(12, ids=(OTHER_ID, UNKNOWN_ID)),
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    body = wire(metadata.respond(request, cluster_image(), "c", 1))
    logs, unknown = body.topics
    assert (logs.name, logs.topic_id) == ("logs", uuid.UUID(OTHER_ID))
    assert (unknown.name, unknown.topic_id, unknown.error_code) == (None, uuid.UUID(UNKNOWN_ID),
                                                                    errors.UNKNOWN_TOPIC_ID.code)


@pytest.mark.parametrize(("version", "ids", "error"), [
    (10, (UNKNOWN_ID,), errors.INVALID_REQUEST), (11, (UNKNOWN_ID,), errors.INVALID_REQUEST),
    (12, (str(uuid.UUID(int=0)),), errors.UNKNOWN_SERVER_ERROR), (13, (str(uuid.UUID(int=0)),), errors.UNKNOWN_SERVER_ERROR)])
def test_a_request_kafka_fails_whole_gets_kafkas_error_response(version: int, ids: tuple[str, ...],
                                                                 error: errors.KafkaError) -> None:
    """Before v12 a null name is INVALID_REQUEST; from v12 a null name without a topic id is UNKNOWN_SERVER_ERROR,
    as Kafka 4.1 answers: every topic of the request gets the error, a null name answered as "", and no broker,
    cluster id or controller (Kafka's MetadataRequest.getErrorResponse; v13 has the top-level error too)."""
    request = client_request(3, version, topics=topics_request(version, "orders", ids=ids),
                             allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=False)
    body = wire(metadata.respond(request, cluster_image(), "c", 1))
    assert [(t.name, t.error_code, t.partitions) for t in body.topics] == [
        ("orders", error.code, ()), ("", error.code, ())]
    assert (body.topics[1].topic_id or uuid.UUID(int=0)) == uuid.UUID(ids[0])  # the codec reads a zero id as None
    assert (body.brokers, body.cluster_id, body.controller_id) == ((), None, -1)
    assert getattr(body, "error_code", error.code) == error.code


def test_a_topic_id_beside_a_name_before_v12_is_an_invalid_request() -> None:
    topic = request_entity(3, 11, "MetadataRequestTopic", name="orders", topic_id=uuid.UUID(TOPIC_ID))
    request = client_request(3, 11, topics=(topic,), allow_auto_topic_creation=False,
                             include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    body = wire(metadata.respond(request, cluster_image(), "c", 1))
    assert [(t.name, t.error_code) for t in body.topics] == [("orders", errors.INVALID_REQUEST.code)]


@pytest.mark.parametrize("version", [0, 2])
def test_describe_cluster(version: int) -> None:
    request = client_request(60, version, include_cluster_authorized_operations=False, include_fenced_brokers=True)
    body = wire(metadata.describe_cluster(request, cluster_image(), "cluster-x", 1))
    assert (body.error_code, body.cluster_id, body.controller_id) == (0, "cluster-x", 1)
    if version >= 2:
        assert [(b.broker_id, b.is_fenced) for b in body.brokers] == [(1, False), (2, False), (3, True)]
    else:
        assert [b.broker_id for b in body.brokers] == [1, 2]


def test_describe_cluster_for_controllers_is_refused() -> None:
    request = client_request(60, 1, include_cluster_authorized_operations=False, endpoint_type=2)
    body = wire(metadata.describe_cluster(request, cluster_image(), "c", 1))
    assert body.error_code == errors.BY_NAME["MISMATCHED_ENDPOINT_TYPE"].code and body.brokers == ()


def auto_create_query(version: int, allow: bool, *names: str) -> metadata.MetadataQuery:
    return metadata.decode_request(client_request(3, version, topics=topics_request(version, *names),
                                                  allow_auto_topic_creation=allow,
                                                  include_cluster_authorized_operations=False,
                                                  include_topic_authorized_operations=False))


@pytest.mark.parametrize("version", [4, 12])
def test_unknown_topics_auto_created_when_the_request_and_the_broker_allow(version: int) -> None:
    illegal = "bad/name"
    query = auto_create_query(version, True, "orders", "new-topic", illegal, "x" * 250)
    image = cluster_image()
    assert metadata.topics_to_create(query, image, auto_create_enable=True) == ("new-topic",)
    body = wire(metadata.encode_response(query, image, "c", 1, auto_create_enable=True))
    assert [(t.name, t.error_code) for t in body.topics] == [
        ("orders", 0), ("new-topic", errors.LEADER_NOT_AVAILABLE.code),
        (illegal, errors.INVALID_TOPIC_EXCEPTION.code), ("x" * 250, errors.INVALID_TOPIC_EXCEPTION.code)]


@pytest.mark.parametrize(("allow", "enable"), [(False, True), (True, False), (False, False)])
def test_unknown_topics_not_created_without_both_switches(allow: bool, enable: bool) -> None:
    query = auto_create_query(9, allow, "new-topic", "..")
    assert metadata.topics_to_create(query, cluster_image(), auto_create_enable=enable) == ()
    body = wire(metadata.encode_response(query, cluster_image(), "c", 1, auto_create_enable=enable))
    assert [(t.name, t.error_code) for t in body.topics] == [
        ("new-topic", errors.UNKNOWN_TOPIC_OR_PARTITION.code), ("..", errors.INVALID_TOPIC_EXCEPTION.code)]


def test_metadata_v0_to_v3_always_allows_auto_creation() -> None:
    """The field arrives in v4; before it, Kafka brokers create unknown topics whenever they are configured to."""
    query = metadata.decode_request(client_request(3, 1, topics=topics_request(1, "new-topic")))
    assert metadata.topics_to_create(query, cluster_image(), auto_create_enable=True) == ("new-topic",)


def test_all_topics_never_auto_creates() -> None:
    query = metadata.decode_request(client_request(3, 12, topics=None, allow_auto_topic_creation=True,
                                                   include_topic_authorized_operations=False))
    assert metadata.topics_to_create(query, cluster_image(), auto_create_enable=True) == ()


def test_a_leader_fenced_in_the_image_is_no_leader_to_the_client() -> None:
    """Right after every replica restarts, a broker's image can still name as leader a broker it has fenced (so
    not among the brokers listed): the partition is answered LEADER_NOT_AVAILABLE with leader -1, which clients
    retry, instead of a leader id they cannot reach (librdkafka then called the partition unknown for good)."""
    image = MetadataImage.from_records([*cluster_records(), FenceBrokerRecord(2, 2)])
    request = client_request(3, 12, topics=topics_request(12, "orders"), allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
    body = wire(metadata.encode_response(metadata.decode_request(request), image, "cluster-x", 1))
    assert [b.node_id for b in body.brokers] == [1]
    p0, p1, p2 = body.topics[0].partitions
    assert (p0.leader_id, p0.error_code) == (1, 0)
    assert (p1.leader_id, p1.error_code) == (-1, errors.LEADER_NOT_AVAILABLE.code)  # broker 2 leads, fenced
    assert p1.offline_replicas == (2, 3)
