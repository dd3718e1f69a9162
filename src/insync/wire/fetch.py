"""Fetch (v4-v17) <-> replication's `FetchRequest/FetchResponse` and the broker's consumer fetch messages.

Server side: `decode_request` gives replication's full `FetchRequest`. A replica id >= 0 is a follower's fetch,
passed to replication with its broker epoch (v15+, KIP-903); any other is a consumer's, projected onto
`ConsumerFetchRequest` (from v11 a follower may answer it, KIP-392). Kafka's rules applied here:
- An unknown topic id (v13+) is UNKNOWN_TOPIC_ID without the core; responses name topics as the request did.
- Incremental fetch sessions (KIP-227) are kept for followers (`broker.fetch_sessions`); a consumer's are declined:
  session id 0, so it keeps sending full fetches, and a consumer continuing a session gets FETCH_SESSION_ID_NOT_FOUND.
- `last_stable_offset` is the partition's; aborted transactions are null unless a consumer asked for
  READ_COMMITTED (then those its read may meet). A consumer's refused partition carries offsets -1; a follower's keeps
  the leader's, which the fetcher reads on OFFSET_OUT_OF_RANGE. From v16 NOT_LEADER_OR_FOLLOWER and
  FENCED_LEADER_EPOCH name the current leader and its endpoint (KIP-951); a request-level error is top-level
  from v7. Plain successes are written by `protocol.fetch_response`; followers send v15 (`protocol.fetch_request`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from insync import errors
from insync.broker.messages import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
)
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol import fetch_request, fetch_response
from insync.protocol.codec import DecodedRequest, EncodedBody
from insync.protocol.control_records import AbortedTxn
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    check_body,
    code,
    duration,
    error_of,
    field_or,
    has_field,
    millis,
    nested,
    request_class,
    response_class,
)
from insync.replication.messages import (
    EpochEndOffset,
    FetchPartitionData,
    FetchRequest,
    FetchRequestPartition,
    FetchResponse,
)
from insync.types import (
    UNDEFINED_EPOCH,
    UNKNOWN_BROKER_EPOCH,
    UNKNOWN_OFFSET,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Offset,
    TopicPartition,
)
from insync.wire.entities import (
    Decoded,
    Rejected,
    TopicKey,
    current_leader,
    group,
    node_endpoints,
    topic_entities,
    topic_key,
    wire_topic_key,
)
from insync.wire.versions import FETCH

INITIAL_SESSION_EPOCH = 0
FINAL_SESSION_EPOCH = -1
NO_SESSION_ID = 0
LEADER_HINT_FROM = 16  # Kafka's KafkaApis names the current leader of a refused partition from this version


def replica_id(body: Any) -> BrokerId:
    """Who is fetching: a broker id (a follower) or a negative id (a consumer)."""
    if has_field(body, "replica_state"):
        return BrokerId(int(body.replica_state.replica_id))
    return BrokerId(int(body.replica_id))


def replica_epoch(body: Any) -> BrokerEpoch:
    """The fetching follower's broker epoch (v15+ `replica_state.replica_epoch`, KIP-903); -1 before v15."""
    if has_field(body, "replica_state"):
        return BrokerEpoch(int(body.replica_state.replica_epoch))
    return UNKNOWN_BROKER_EPOCH


def decode_request(request: DecodedRequest, image: MetadataImage) -> Decoded[FetchRequest]:
    body = request.body
    version = check_body(body, FETCH)
    keys: dict[str, TopicKey] = {}
    partitions: list[FetchRequestPartition] = []
    rejected: list[Rejected] = []
    for topic in body.topics:
        key = wire_topic_key(image, topic)
        for p in topic.partitions:
            if key.name is None:
                rejected.append(Rejected(key, int(p.partition), errors.UNKNOWN_TOPIC_ID))
                continue
            keys[key.name] = key
            partitions.append(FetchRequestPartition(
                TopicPartition(key.name, int(p.partition)), Offset(int(p.fetch_offset)),
                LeaderEpoch(int(field_or(p, "current_leader_epoch", UNDEFINED_EPOCH))),
                LeaderEpoch(int(field_or(p, "last_fetched_epoch", UNDEFINED_EPOCH))),
                Offset(int(field_or(p, "log_start_offset", UNKNOWN_OFFSET))), int(p.partition_max_bytes)))
    fetch = FetchRequest(request.correlation_id, replica_id(body), millis(body.max_wait), int(body.min_bytes),
                         int(body.max_bytes), tuple(partitions), replica_epoch(body),
                         int(field_or(body, "isolation_level", READ_UNCOMMITTED)),
                         str(body.rack_id) if has_field(body, "rack_id") else None)
    session_epoch = int(field_or(body, "session_epoch", FINAL_SESSION_EPOCH))
    error = errors.NONE
    if is_follower_fetch(fetch):  # the core keeps the session, or says why it cannot continue it
        fetch = replace(fetch, session_id=int(field_or(body, "session_id", NO_SESSION_ID)),
                        session_epoch=session_epoch, forgotten=_forgotten(body, image))
    elif session_epoch not in (INITIAL_SESSION_EPOCH, FINAL_SESSION_EPOCH):
        error = errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
    return Decoded(version, fetch, keys, tuple(rejected), error)


def _forgotten(body: Any, image: MetadataImage) -> tuple[TopicPartition, ...]:
    """The partitions an incremental fetch drops from its session; a topic id the image no longer knows is gone
    from the session's view too (the core no longer serves it), so it is skipped."""
    forgotten: list[TopicPartition] = []
    for topic in field_or(body, "forgotten_topics_data", None) or ():
        name = wire_topic_key(image, topic).name
        if name is not None:
            forgotten.extend(TopicPartition(name, int(partition)) for partition in topic.partitions)
    return tuple(forgotten)


def is_follower_fetch(fetch: FetchRequest) -> bool:
    return fetch.replica_id >= 0


def consumer_request(fetch: FetchRequest) -> ConsumerFetchRequest:
    """The consumer form of a decoded fetch (its partitions' offsets, the wait and the byte limit); with client
    metadata (v11+) a follower may serve it."""
    assert not is_follower_fetch(fetch), fetch
    return ConsumerFetchRequest(fetch.correlation_id, tuple((p.topic_partition, p.fetch_offset)
                                                            for p in fetch.partitions),
                                fetch.max_wait_ms, fetch.max_bytes,
                                tuple(p.partition_max_bytes for p in fetch.partitions),
                                leader_only=fetch.rack_id is None, isolation_level=fetch.isolation_level)


def encode_response(response: FetchResponse | ConsumerFetchResponse | None, decoded: Decoded[FetchRequest],
                    image: MetadataImage | None = None) -> Any:
    """The Kafka response for `decoded`: from the core's response, or from `decoded.error` alone (None).
    With `image`, partitions refused for leadership name the current leader (KIP-951)."""
    assert response is None or response.correlation_id == decoded.request.correlation_id
    assert (response is None) == (decoded.error is not errors.NONE), (response, decoded.error)
    cls = response_class(FETCH, decoded.version)
    top_error = decoded.error if response is None else getattr(response, "error", errors.NONE)
    if top_error is not errors.NONE:
        return _error_response(cls, decoded, top_error)
    assert response is not None
    read_committed = decoded.request.isolation_level == READ_COMMITTED
    key = _keys(decoded, image)
    if not decoded.rejected and all(p.error is errors.NONE and getattr(p, "diverging_epoch", None) is None
                                    and not getattr(p, "aborted_transactions", None) for p in response.partitions):
        return _encode_plain(response, decoded, read_committed, key)
    partition_cls = nested(cls, "PartitionData")
    hint_image = image if decoded.version >= LEADER_HINT_FROM else None
    items = [(key(data.topic_partition.topic),
              _partition(partition_cls, data, hint_image, _aborted(partition_cls, data, read_committed, stable), lso))
             for data, lso, stable in _partitions(response)]
    items.extend((r.topic, _partition(partition_cls, FetchPartitionData(TopicPartition(r.topic.name or "", r.partition),
                                                                        r.error)))
                 for r in decoded.rejected)
    topics = topic_entities(nested(cls, "FetchableTopicResponse"), "partitions", group(items))
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), session_id=_session_id(response),
                 responses=topics, node_endpoints=node_endpoints(cls, image, (p for _, p in items)))


def _session_id(response: FetchResponse | ConsumerFetchResponse) -> int:
    return response.session_id if isinstance(response, FetchResponse) else NO_SESSION_ID


def _keys(decoded: Decoded[FetchRequest], image: MetadataImage | None) -> Callable[[str], TopicKey]:
    """How the response names a topic: as the request did, else (a partition of a follower's fetch session that
    this request did not list) by the image's name and id."""
    if image is None:
        return decoded.key
    return lambda topic: decoded.keys.get(topic) or topic_key(image, topic, None)


def _encode_plain(response: FetchResponse | ConsumerFetchResponse, decoded: Decoded[FetchRequest],
                  read_committed: bool, key_of: Callable[[str], TopicKey]) -> EncodedBody:
    """`encode_response` of partitions that all succeeded, without a diverging epoch: no field kio's path would
    add beyond the plain ones (no leader hint, no node endpoints), so `fetch_response` writes it."""
    by_id = decoded.version >= fetch_response.TOPIC_ID_FROM
    items = []
    for p in response.partitions:
        key = key_of(p.topic_partition.topic)
        lso = getattr(p, "last_stable_offset", UNKNOWN_OFFSET)
        items.append((key.topic_id if by_id else key.name or "", (
            p.topic_partition.partition, 0, p.high_watermark, p.high_watermark if lso < 0 else lso,
            p.log_start_offset, p.records)))
    return fetch_response.encode(decoded.version, 0, _session_id(response), group(items), read_committed)


def _partitions(response: FetchResponse | ConsumerFetchResponse
                ) -> Iterable[tuple[FetchPartitionData, int, tuple[AbortedTxn, ...] | None]]:
    """The core's partitions as replication's, each with its last stable offset and aborted transactions; a
    consumer's refused one without offsets (Kafka's failed read)."""
    if isinstance(response, FetchResponse):
        return ((p, p.high_watermark, None) for p in response.partitions)
    return ((FetchPartitionData(p.topic_partition, p.error, p.high_watermark, p.log_start_offset, records=p.records),
             p.last_stable_offset if p.last_stable_offset >= 0 else p.high_watermark, p.aborted_transactions)
            if p.error is errors.NONE else (FetchPartitionData(p.topic_partition, p.error), -1, None)
            for p in response.partitions)


def _aborted(cls: type, data: FetchPartitionData, read_committed: bool,
             aborted: tuple[AbortedTxn, ...] | None) -> tuple[Any, ...] | None:
    """The aborted transactions field: null for read_uncommitted and on an error, as Kafka answers."""
    if not read_committed or data.error is not errors.NONE:
        return None
    entity = nested(cls, "AbortedTransaction")
    return tuple(build(entity, producer_id=t.producer_id, first_offset=t.first_offset) for t in aborted or ())


def _error_response(cls: type, decoded: Decoded[FetchRequest], error: KafkaError) -> Any:
    """v7+: the top-level error and no partitions; older versions: the error on every requested partition."""
    if has_field(cls, "error_code"):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), session_id=NO_SESSION_ID,
                     responses=())
    partition_cls = nested(cls, "PartitionData")
    items = [(decoded.key(p.topic_partition.topic), _partition(partition_cls, FetchPartitionData(p.topic_partition,
                                                                                                 error)))
             for p in decoded.request.partitions]
    topics = topic_entities(nested(cls, "FetchableTopicResponse"), "partitions", group(items))
    return build(cls, throttle_time=NO_THROTTLE, responses=topics)


def _partition(cls: type, data: FetchPartitionData, image: MetadataImage | None = None,
               aborted: tuple[Any, ...] | None = (), last_stable_offset: int | None = None) -> Any:
    """A partition entity; `aborted` defaults to Kafka's `partitionResponse(error)`'s (an empty list), the last
    stable offset to the high watermark."""
    lso = data.high_watermark if last_stable_offset is None else last_stable_offset
    ok = data.error is errors.NONE
    tp = data.topic_partition
    values: dict[str, Any] = current_leader(cls, image, tp.topic, tp.partition, data.error)
    if data.diverging_epoch is not None and has_field(cls, "diverging_epoch"):
        values["diverging_epoch"] = build(nested(cls, "EpochEndOffset"), epoch=data.diverging_epoch.epoch,
                                          end_offset=data.diverging_epoch.end_offset)
    return build(cls, partition_index=data.topic_partition.partition, error_code=code(data.error),
                 high_watermark=data.high_watermark, last_stable_offset=lso if ok else -1,
                 log_start_offset=data.log_start_offset, aborted_transactions=aborted, preferred_read_replica=-1,
                 records=data.records, **values)


# Client side: a follower's fetcher ----------------------------------------------------------------------


def encode_request(fetch: FetchRequest, version: int, image: MetadataImage) -> Any:
    """The Kafka Fetch request a follower sends, in its fetch session; v13+ names topics by the ids in `image`
    (UNKNOWN_TOPIC_ID, raised, when it no longer knows one), v15+ carries the follower's broker epoch."""
    keys = [_request_key(image, p.topic_partition.topic, version) for p in fetch.partitions]
    if version in fetch_request.VERSIONS:  # what followers send: written without kio's entities
        wire = [(key.topic_id, (p.topic_partition.partition, p.current_leader_epoch, p.fetch_offset,
                                  p.last_fetched_epoch, p.log_start_offset, p.partition_max_bytes))
                  for key, p in zip(keys, fetch.partitions, strict=True)]
        dropped = [(_request_key(image, tp.topic, version).topic_id, tp.partition) for tp in fetch.forgotten]
        return fetch_request.encode(version, fetch.replica_id, fetch.replica_epoch, fetch.max_wait_ms,
                                    fetch.min_bytes, fetch.max_bytes, group(wire), fetch.session_id,
                                    fetch.session_epoch, group(dropped))
    cls = request_class(FETCH, version)
    partition_cls = nested(cls, "FetchPartition")
    items = []
    for key, p in zip(keys, fetch.partitions, strict=True):
        items.append((key, build(partition_cls, partition=p.topic_partition.partition, fetch_offset=p.fetch_offset,
                                 current_leader_epoch=p.current_leader_epoch,
                                 last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
                                 partition_max_bytes=p.partition_max_bytes)))
    topics = topic_entities(nested(cls, "FetchTopic"), "partitions", group(items))
    values: dict[str, Any] = {"replica_id": fetch.replica_id}
    if has_field(cls, "replica_state"):
        values = {"replica_state": build(nested(cls, "ReplicaState"), replica_id=fetch.replica_id,
                                         replica_epoch=fetch.replica_epoch)}
    forgotten: tuple[Any, ...] = ()
    if has_field(cls, "forgotten_topics_data"):  # v7+
        forgotten = topic_entities(nested(cls, "ForgottenTopic"), "partitions", group(
            (_request_key(image, tp.topic, version), tp.partition) for tp in fetch.forgotten))
    return build(cls, max_wait=duration(fetch.max_wait_ms), min_bytes=fetch.min_bytes, max_bytes=fetch.max_bytes,
                 isolation_level=0, session_id=fetch.session_id, session_epoch=fetch.session_epoch, topics=topics,
                 forgotten_topics_data=forgotten, rack_id="", **values)


def _request_key(image: MetadataImage, topic: str, version: int) -> TopicKey:
    key = topic_key(image, topic, None)
    if version >= 13 and key.topic_id.int == 0:  # deleted since the fetcher built the request: fetch again
        raise KafkaException(errors.UNKNOWN_TOPIC_ID, f"no topic id for {topic}")
    return key


def decode_response(body: Any, fetch: FetchRequest, image: MetadataImage) -> FetchResponse:
    """The follower's view of a Kafka Fetch response to `fetch`; partitions it did not ask for are dropped
    (a topic id the image no longer knows, a confused leader)."""
    check_body(body, FETCH)
    error = error_of(field_or(body, "error_code", 0))
    if error is not errors.NONE:
        return FetchResponse(fetch.correlation_id, error, ())
    # An incremental answer may carry any partition of the session; the fetcher drops those it no longer fetches.
    requested = None if fetch.session_epoch > INITIAL_SESSION_EPOCH else {p.topic_partition for p in fetch.partitions}
    partitions = []
    for topic in body.responses:
        name = wire_topic_key(image, topic).name
        if name is None:
            continue  # a topic id this broker no longer knows
        for p in topic.partitions:
            tp = TopicPartition(name, int(p.partition_index))
            if requested is None or tp in requested:
                partitions.append(_partition_data(tp, p))
    return FetchResponse(fetch.correlation_id, errors.NONE, tuple(partitions),
                         int(field_or(body, "session_id", NO_SESSION_ID)))


def _partition_data(tp: TopicPartition, p: Any) -> FetchPartitionData:
    error = error_of(p.error_code)
    diverging = field_or(p, "diverging_epoch", None)
    diverging_epoch = None
    if error is errors.NONE and diverging is not None and diverging.epoch >= 0:
        diverging_epoch = EpochEndOffset(LeaderEpoch(int(diverging.epoch)), Offset(int(diverging.end_offset)))
    records = bytes(p.records or b"") if error is errors.NONE else b""
    return FetchPartitionData(tp, error, Offset(int(p.high_watermark)),
                              Offset(int(field_or(p, "log_start_offset", UNKNOWN_OFFSET))),
                              diverging_epoch=diverging_epoch, records=records)

