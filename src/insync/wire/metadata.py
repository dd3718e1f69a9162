"""Metadata (v0-v13) and DescribeCluster (v0-v2), answered from a `MetadataImage`, as KRaft brokers do.

- Brokers: the registered, unfenced ones (DescribeCluster v2 lists fenced ones on request, flagged).
- Controller id: clients send admin requests to "the controller", which every broker forwards. insync names the
  answering broker itself, the one broker the client has just reached, where KRaft names a random live broker:
  a broker killed moments ago and not yet fenced would make librdkafka wait out its request timeout.
- Partitions: leader and `leader_epoch` (>= 0, so clients check epochs), replicas, ISR, offline replicas. A
  partition without a leader, or whose leader is fenced in this image, carries LEADER_NOT_AVAILABLE, leader -1.
- Topics: all (v0: an empty list; v1+: null), or those asked by name or, from v10, by id (UNKNOWN_TOPIC_ID).
- Unknown names (Kafka's `KafkaApis.getTopicMetadata`): an illegal name is INVALID_TOPIC_EXCEPTION; a legal one
  is LEADER_NOT_AVAILABLE when auto-creation is allowed by the request and `auto.create.topics.enable`, else
  UNKNOWN_TOPIC_OR_PARTITION; the handler sends `topics_to_create` to the controller. insync answers
  LEADER_NOT_AVAILABLE while a creation is in flight, where Kafka's in-flight set gives UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.controller.replication_control import check_topic_name
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage, TopicImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    ZERO_UUID,
    build,
    check_body,
    code,
    field_or,
    nested,
    response_class,
    wire_uuid,
)
from insync.types import NO_LEADER, OFFSETS_TOPIC
from insync.wire.versions import DESCRIBE_CLUSTER, METADATA

BROKER_ENDPOINT = 1
TOPIC_IDS_FROM = 12  # Metadata asks by topic id (a null name) from v12
CONTROLLER_ENDPOINT = 2


@dataclass(frozen=True, slots=True)
class MetadataQuery:
    """What a Metadata request asks: every topic (`topics is None`), or the named ones and the ones by id."""

    version: int
    topics: tuple[str, ...] | None
    topic_ids: tuple[uuid.UUID, ...]
    allow_auto_topic_creation: bool
    # A request Kafka fails whole (its MetadataRequest.getErrorResponse): the error and each topic asked
    error: KafkaError | None = None
    invalid: tuple[tuple[str, uuid.UUID], ...] = ()


def decode_request(request: DecodedRequest) -> MetadataQuery:
    body = request.body
    version = check_body(body, METADATA)
    allow = bool(field_or(body, "allow_auto_topic_creation", True))
    if body.topics is None or (version == 0 and not body.topics):
        return MetadataQuery(version, None, (), allow)
    error = _request_error(version, body.topics)
    if error is not None:
        return MetadataQuery(version, (), (), False, error, tuple(
            (t.name or "", field_or(t, "topic_id", None) or ZERO_UUID) for t in body.topics))
    names = tuple(t.name for t in body.topics if t.name is not None)
    ids = tuple(t.topic_id for t in body.topics
                if t.name is None and field_or(t, "topic_id", None) not in (None, ZERO_UUID))
    return MetadataQuery(version, names, ids, allow)


def _request_error(version: int, topics: Any) -> KafkaError | None:
    """Kafka's answer to a request it fails whole: before v12 a null name or a topic id is INVALID_REQUEST; from
    v12 a null name without a topic id fails in Kafka 4.1's handler, UNKNOWN_SERVER_ERROR (compared side by side
    in tests/kafka_ref/test_differential.py)."""
    if version < TOPIC_IDS_FROM:
        if any(t.name is None or field_or(t, "topic_id", None) not in (None, ZERO_UUID) for t in topics):
            return errors.INVALID_REQUEST
    elif any(t.name is None and field_or(t, "topic_id", None) in (None, ZERO_UUID) for t in topics):
        return errors.UNKNOWN_SERVER_ERROR
    return None


def unknown_topics(query: MetadataQuery, image: MetadataImage) -> tuple[str, ...]:
    """Names asked for that the image does not know (candidates for auto-creation)."""
    return tuple(name for name in query.topics or () if image.topic(name) is None)


def topics_to_create(query: MetadataQuery, image: MetadataImage, auto_create_enable: bool) -> tuple[str, ...]:
    """The unknown, legal names this request has the broker create (`auto_create_enable`: the broker's
    `auto.create.topics.enable`). Asking for every topic never creates one."""
    if not (auto_create_enable and query.allow_auto_topic_creation):
        return ()
    return tuple(name for name in unknown_topics(query, image) if _name_error(name) is None)


def _name_error(name: str) -> KafkaError | None:
    """INVALID_TOPIC_EXCEPTION for a name Kafka's `Topic.validate` refuses, else None."""
    try:
        check_topic_name(name)
    except KafkaException as exc:
        return exc.error
    return None


def _unknown_topic_error(name: str, auto_create: bool) -> KafkaError:
    illegal = _name_error(name)
    if illegal is not None:
        return illegal
    return errors.LEADER_NOT_AVAILABLE if auto_create else errors.UNKNOWN_TOPIC_OR_PARTITION


def live_broker_ids(image: MetadataImage) -> list[int]:
    return sorted(b.broker_id for b in image.brokers.values() if not b.fenced)


def encode_response(query: MetadataQuery, image: MetadataImage, cluster_id: str | None, broker_id: int,
                    auto_create_enable: bool = False) -> Any:
    """The answer of broker `broker_id` (named as the controller: see the module docstring);
    `auto_create_enable` is its `auto.create.topics.enable`."""
    auto_create = auto_create_enable and query.allow_auto_topic_creation
    cls = response_class(METADATA, query.version)
    if query.error is not None:  # no brokers, no cluster id, no controller: Kafka's error response
        return build(cls, throttle_time=NO_THROTTLE, brokers=(), cluster_id=None, controller_id=-1,
                     error_code=code(query.error), topics=tuple(
                         _missing(cls, name, topic_id, query.error) for name, topic_id in query.invalid))
    broker_cls = nested(cls, "MetadataResponseBroker")
    brokers = tuple(build(broker_cls, node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id) if not b.fenced)
    topics: list[Any] = []
    if query.topics is None:
        topics.extend(_topic(cls, image, t) for t in sorted(image.topics_by_id.values(), key=lambda t: t.name))
    else:
        for name in query.topics:
            topic = image.topic(name)
            topics.append(_topic(cls, image, topic) if topic is not None
                          else _missing(cls, name, ZERO_UUID, _unknown_topic_error(name, auto_create)))
        for topic_id in query.topic_ids:
            topic = image.topics_by_id.get(str(topic_id))
            topics.append(_topic(cls, image, topic) if topic is not None
                          else _missing(cls, None, topic_id, errors.UNKNOWN_TOPIC_ID))
    return build(cls, throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=cluster_id,
                 controller_id=broker_id, topics=tuple(topics), error_code=code(errors.NONE))


def respond(request: DecodedRequest, image: MetadataImage, cluster_id: str, broker_id: int) -> Any:
    """Decode and answer in one step, for a broker that does not auto-create topics."""
    return encode_response(decode_request(request), image, cluster_id, broker_id)


def _missing(cls: type, name: str | None, topic_id: uuid.UUID, error: KafkaError) -> Any:
    return build(nested(cls, "MetadataResponseTopic"), error_code=code(error), name=name, topic_id=topic_id,
                 is_internal=False, partitions=())


def _topic(cls: type, image: MetadataImage, topic: TopicImage) -> Any:
    partition_cls = nested(cls, "MetadataResponsePartition")
    live = set(live_broker_ids(image))
    partitions = []
    for index, reg in sorted(topic.partitions.items()):
        # A leader this image has fenced is not among the brokers listed: a client cannot reach it by id (librdkafka
        # then calls the partition unknown and stops asking), so it is no leader to the client, as Kafka answers
        # a leader without a live endpoint; the client retries until the image has it unfenced or replaced.
        leader = reg.leader if reg.leader in live else NO_LEADER
        error = errors.LEADER_NOT_AVAILABLE if leader == NO_LEADER else errors.NONE
        partitions.append(build(partition_cls, error_code=code(error), partition_index=index, leader_id=leader,
                                leader_epoch=reg.leader_epoch, replica_nodes=reg.replicas, isr_nodes=reg.isr,
                                offline_replicas=tuple(r for r in reg.replicas if r not in live)))
    return build(nested(cls, "MetadataResponseTopic"), error_code=code(errors.NONE), name=topic.name,
                 topic_id=wire_uuid(topic.topic_id), is_internal=topic.name == OFFSETS_TOPIC,
                 partitions=tuple(partitions))


# DescribeCluster -----------------------------------------------------------------------------------------


def describe_cluster(request: DecodedRequest, image: MetadataImage, cluster_id: str, broker_id: int) -> Any:
    """DescribeCluster on a broker listener: the live brokers (and fenced ones if asked, v2), the controller
    id clients should use, the cluster id. Asking a broker for controller endpoints (v1+) is
    MISMATCHED_ENDPOINT_TYPE, as in Kafka."""
    body = request.body
    version = check_body(body, DESCRIBE_CLUSTER)
    cls = response_class(DESCRIBE_CLUSTER, version)
    endpoint_type = int(field_or(body, "endpoint_type", BROKER_ENDPOINT))
    if endpoint_type != BROKER_ENDPOINT:
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.BY_NAME["MISMATCHED_ENDPOINT_TYPE"]),
                     error_message="DescribeCluster for controllers must go to a controller listener",
                     endpoint_type=endpoint_type, cluster_id=cluster_id, controller_id=-1, brokers=())
    include_fenced = bool(field_or(body, "include_fenced_brokers", False))
    broker_cls = nested(cls, "DescribeClusterBroker")
    brokers = tuple(build(broker_cls, broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack,
                          is_fenced=b.fenced)
                    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
                    if include_fenced or not b.fenced)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), error_message=None,
                 endpoint_type=BROKER_ENDPOINT, cluster_id=cluster_id,
                 controller_id=broker_id, brokers=brokers)
