"""CreateTopics (v2-v7), DeleteTopics (v1-v6), CreatePartitions (v0-v3), one controller call per topic; and
ElectLeaders (v0-v2), one call for all its partitions.

CreateTopics: -1 partitions or replication factor mean the broker's defaults; manual replica assignments need
both at -1 (INVALID_REQUEST otherwise) and the controller checks them. A topic listed twice and null config
values are INVALID_REQUEST. From v5 a created topic's answer carries its partition count, replication factor
and configs (an empty list for a refused topic), from v7 its topic id. DeleteTopics: v6 names topics by name or
id; an unknown id is UNKNOWN_TOPIC_ID, a topic listed twice INVALID_REQUEST. CreatePartitions: each topic grows
to `count` partitions, on the assignments given or placed by the controller; a topic listed twice is
INVALID_REQUEST. ElectLeaders: preferred elections (v0 has no type) of the named partitions or, when none are
named, of every partition (answering only those that moved, as KRaft does); UNCLEAN elections of the named or
every offline partition, by `controller.unclean_recovery`'s rule. Topic-level refusals are `Rejected` entries
with partition -1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    ZERO_UUID,
    build,
    check_body,
    code,
    duration,
    error_message,
    field_or,
    has_field,
    millis,
    nested,
    request_class,
    response_class,
    wire_uuid,
)
from insync.wire.configs import topic_configs
from insync.wire.entities import Decoded, Rejected, TopicKey, topic_key
from insync.wire.internal import (
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    NewTopic,
)
from insync.wire.versions import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, ELECT_LEADERS

WHOLE_TOPIC = -1  # `Rejected.partition` for a refusal of a whole topic
BROKER_CREATE_TOPICS_VERSION = 7  # what a broker sends the controller for topics it creates itself


# CreateTopics --------------------------------------------------------------------------------------------


def create_topics_request(topics: tuple[NewTopic, ...], timeout_ms: int) -> Any:
    """The CreateTopics body a broker sends the controller for topics it creates by itself (`__consumer_offsets`,
    auto-created topics, `__insync_events` with its assignment), partitions and replication factor explicit: the
    broker's defaults, not the controller's."""
    cls = request_class(CREATE_TOPICS, BROKER_CREATE_TOPICS_VERSION)
    topic_cls, config_cls = nested(cls, "CreatableTopic"), nested(cls, "CreatableTopicConfig")
    assignment_cls = nested(cls, "CreatableReplicaAssignment")
    # With a manual assignment the counts must be -1 on the wire (the assignment gives them), as in Kafka.
    return build(cls, timeout=duration(timeout_ms), validate_only=False, topics=tuple(
        build(topic_cls, name=t.name, num_partitions=-1 if t.assignments else t.num_partitions,
              replication_factor=-1 if t.assignments else t.replication_factor,
              assignments=tuple(build(assignment_cls, partition_index=p, broker_ids=replicas)
                                for p, replicas in t.assignments),
              configs=tuple(build(config_cls, name=k, value=v) for k, v in t.configs))
        for t in topics))


def decode_create_topics(request: DecodedRequest, config: BrokerConfig) -> Decoded[CreateTopicsRequest]:
    body = request.body
    version = check_body(body, CREATE_TOPICS)
    counts = Counter(t.name for t in body.topics)
    topics: list[NewTopic] = []
    rejected: list[Rejected] = []
    for topic in body.topics:
        refusal = _refusal(topic, counts[topic.name])
        if refusal is not None:
            if refusal not in rejected:
                rejected.append(refusal)
            continue
        topics.append(_new_topic(topic, config))
    internal = CreateTopicsRequest(request.correlation_id, millis(body.timeout), bool(body.validate_only),
                                   tuple(topics))
    return Decoded(version, internal, {}, tuple(rejected))


def _new_topic(topic: Any, config: BrokerConfig) -> NewTopic:
    configs = tuple((c.name, c.value) for c in topic.configs)
    if topic.assignments:  # the counts are the assignment's (the answer reports them from v5)
        assignments = tuple((int(a.partition_index), tuple(int(b) for b in a.broker_ids)) for a in topic.assignments)
        return NewTopic(topic.name, len(assignments), len(assignments[0][1]), configs, assignments)
    num_partitions, replication_factor = int(topic.num_partitions), int(topic.replication_factor)
    defaults = config.auto_create  # Kafka's CreateTopics defaults are the auto-created topics' layout
    return NewTopic(topic.name, defaults.num_partitions if num_partitions == -1 else num_partitions,
                    defaults.replication_factor if replication_factor == -1 else replication_factor,
                    configs)


def _refusal(topic: Any, count: int) -> Rejected | None:
    key = TopicKey(topic.name, ZERO_UUID)
    if count > 1:
        return Rejected(key, WHOLE_TOPIC, errors.INVALID_REQUEST, "the topic is listed more than once")
    if topic.assignments and int(topic.replication_factor) != -1:
        return Rejected(key, WHOLE_TOPIC, errors.INVALID_REQUEST,
                        "A manual partition assignment was specified, but replication factor was not set to -1.")
    if topic.assignments and int(topic.num_partitions) != -1:
        return Rejected(key, WHOLE_TOPIC, errors.INVALID_REQUEST,
                        "A manual partition assignment was specified, but numPartitions was not set to -1.")
    if any(c.value is None for c in topic.configs):
        return Rejected(key, WHOLE_TOPIC, errors.INVALID_REQUEST, "null config values are not supported")
    return None


def encode_create_topics(response: CreateTopicsResponse, decoded: Decoded[CreateTopicsRequest],
                         config: BrokerConfig) -> Any:
    """The answer; `config` resolves the created topics' configs (v5+)."""
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(CREATE_TOPICS, decoded.version)
    requested = {t.name: t for t in decoded.request.topics}
    results = [_created(cls, r, requested.get(r.name), config) for r in response.results]
    for refusal in decoded.rejected:
        assert refusal.topic.name is not None, "CreateTopics names topics by name"
        results.append(_created(cls, CreateTopicResult(refusal.topic.name, refusal.error, refusal.message), None,
                                config))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(results))


def _created(cls: type, result: CreateTopicResult, topic: NewTopic | None, config: BrokerConfig) -> Any:
    result_cls = nested(cls, "CreatableTopicResult")
    configs: tuple[Any, ...] | None = () if has_field(result_cls, "configs") else None  # Kafka's empty default
    if result.error is errors.NONE and topic is not None and configs is not None:
        config_cls = nested(cls, "CreatableTopicConfigs")
        configs = tuple(build(config_cls, name=e.name, value=e.value, read_only=e.read_only,
                              config_source=int(e.source), is_sensitive=False)
                        for e in topic_configs(dict(topic.configs), config))
    return build(result_cls, name=result.name, topic_id=wire_uuid(result.topic_id),
                 error_code=code(result.error), error_message=error_message(result.message),
                 num_partitions=result.num_partitions, replication_factor=result.replication_factor,
                 configs=configs)


# DeleteTopics --------------------------------------------------------------------------------------------


def decode_delete_topics(request: DecodedRequest, image: MetadataImage) -> Decoded[DeleteTopicsRequest]:
    body = request.body
    version = check_body(body, DELETE_TOPICS)
    if version < 6:
        keys = [topic_key(image, name, None) for name in body.topic_names]
    else:
        keys = [topic_key(image, t.name, t.topic_id) for t in body.topics]
    counts = Counter(keys)
    rejected: list[Rejected] = []
    names: list[str] = []
    for key in keys:
        if key.name is None:
            rejected.append(Rejected(key, WHOLE_TOPIC, errors.UNKNOWN_TOPIC_ID))
        elif counts[key] > 1:
            if all(r.topic != key for r in rejected):
                rejected.append(Rejected(key, WHOLE_TOPIC, errors.INVALID_REQUEST))
        else:
            names.append(key.name)
    internal = DeleteTopicsRequest(request.correlation_id, millis(body.timeout), tuple(names))
    return Decoded(version, internal, {key.name: key for key in keys if key.name is not None}, tuple(rejected))


def encode_delete_topics(response: DeleteTopicsResponse, decoded: Decoded[DeleteTopicsRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(DELETE_TOPICS, decoded.version)
    result_cls = nested(cls, "DeletableTopicResult")

    def result(key: TopicKey, error: KafkaError, message: str | None) -> Any:
        return build(result_cls, name=key.name, topic_id=key.topic_id, error_code=code(error),
                     error_message=error_message(message))

    results = [result(_deleted_key(decoded, r), r.error, r.message) for r in response.results]
    results.extend(result(r.topic, r.error, r.message) for r in decoded.rejected)
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(results))


def _deleted_key(decoded: Decoded[DeleteTopicsRequest], result: DeleteTopicResult) -> TopicKey:
    key = decoded.key(result.name)
    if key.topic_id == ZERO_UUID and result.topic_id:
        return TopicKey(result.name, wire_uuid(result.topic_id))
    return key


# CreatePartitions ----------------------------------------------------------------------------------------

# (topic, count, validate_only, replica assignments or None): grows the topic or raises KafkaException;
# `Controller.create_partitions`.
GrowTopic = Callable[[str, int, bool, tuple[tuple[int, ...], ...] | None], None]


def create_partitions(request: DecodedRequest, grow: GrowTopic) -> Any:
    """The answer to a CreatePartitions request, each topic grown by `grow`."""
    body = request.body
    check_body(body, CREATE_PARTITIONS)
    counts = Counter(t.name for t in body.topics)
    results: dict[str, tuple[KafkaError, str | None]] = {}
    for topic in body.topics:
        if topic.name in results:
            continue
        if counts[topic.name] > 1:
            results[topic.name] = errors.INVALID_REQUEST, "Duplicate topic name."
        else:
            assignments = None if topic.assignments is None else tuple(
                tuple(int(b) for b in a.broker_ids) for a in topic.assignments)
            try:
                grow(topic.name, int(topic.count), bool(body.validate_only), assignments)
                results[topic.name] = errors.NONE, None
            except KafkaException as exc:
                results[topic.name] = exc.error, exc.detail or None
    return _partitions_response(request, results)


def _partitions_response(request: DecodedRequest, results: dict[str, tuple[KafkaError, str | None]]) -> Any:
    cls = response_class(CREATE_PARTITIONS, request.api_version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(result_cls, name=name, error_code=code(error), error_message=error_message(message))
        for name, (error, message) in results.items()))


# ElectLeaders --------------------------------------------------------------------------------------------

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1

# (election type, the partitions asked for (None: all)) -> each one's outcome, or KafkaException for the whole
# request; the controller's `elect_preferred_leaders` or `elect_unclean_leaders`.
Elect = Callable[[int, list[tuple[str, int]] | None], dict[tuple[str, int], KafkaError]]


def elect_leaders(request: DecodedRequest, elect: Elect) -> Any:
    """The answer to an ElectLeaders request (v0: preferred; v1+: preferred or unclean), the elections made by
    `elect`. An unknown election type is INVALID_REQUEST for every partition, as Kafka refuses it."""
    body = request.body
    check_body(body, ELECT_LEADERS)
    asked = _election_partitions(request)
    election_type = int(field_or(body, "election_type", PREFERRED_ELECTION))
    if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        message = f"unknown election type {election_type}"
        return _election_response(request, {tp: (errors.INVALID_REQUEST, message) for tp in asked or ()},
                                  errors.INVALID_REQUEST if asked is None else errors.NONE)
    try:
        outcomes = elect(election_type, asked)
    except KafkaException as exc:  # the whole request, as Kafka's ElectLeadersRequest.getErrorResponse answers it
        return _election_response(request, {tp: (exc.error, exc.detail) for tp in asked or ()}, exc.error)
    return _election_response(request, {tp: (error, None) for tp, error in outcomes.items()}, errors.NONE)


def _election_partitions(request: DecodedRequest) -> list[tuple[str, int]] | None:
    if request.body.topic_partitions is None:
        return None
    asked = [(t.topic, int(p)) for t in request.body.topic_partitions for p in t.partitions]
    return list(dict.fromkeys(asked))  # a partition named twice is elected once


def _election_response(request: DecodedRequest, outcomes: dict[tuple[str, int], tuple[KafkaError, str | None]],
                       error: KafkaError) -> Any:
    cls = response_class(ELECT_LEADERS, request.api_version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (outcome, message) in outcomes.items():
        by_topic.setdefault(topic, []).append(build(nested(cls, "PartitionResult"), partition_id=partition,
                                                    error_code=code(outcome), error_message=error_message(message)))
    results = tuple(build(nested(cls, "ReplicaElectionResult"), topic=topic, partition_result=tuple(partitions))
                    for topic, partitions in by_topic.items())
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), replica_election_results=results)


def refuse_all(request: DecodedRequest, config: BrokerConfig, image: MetadataImage, error: KafkaError,
               message: str) -> Any:
    """A CreateTopics, DeleteTopics, CreatePartitions or ElectLeaders answer refusing every topic (partition) with
    `error`: what a broker answers when it cannot forward the request to an active controller (NOT_CONTROLLER,
    which admin clients retry)."""
    if request.api_key == ELECT_LEADERS:
        asked = _election_partitions(request)
        return _election_response(request, {tp: (error, message) for tp in asked or ()},
                                  error if asked is None else errors.NONE)
    if request.api_key == CREATE_PARTITIONS:
        return _partitions_response(request, {t.name: (error, message) for t in request.body.topics})
    if request.api_key == CREATE_TOPICS:
        create = decode_create_topics(request, config)
        results = tuple(CreateTopicResult(t.name, error, message) for t in create.request.topics)
        return encode_create_topics(CreateTopicsResponse(request.correlation_id, results), create, config)
    delete = decode_delete_topics(request, image)
    deleted = tuple(DeleteTopicResult(name, error, message) for name in delete.request.topics)
    return encode_delete_topics(DeleteTopicsResponse(request.correlation_id, deleted), delete)
