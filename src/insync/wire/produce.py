"""Produce (v3-v13) <-> `broker.messages.ProduceRequest/ProduceResponse`.

Records stay opaque bytes: the core validates and appends them. The translator answers by itself only what
needs no log: an unknown topic id (v13+ names topics by id) gets UNKNOWN_TOPIC_ID, a topic or partition the
metadata lacks UNKNOWN_TOPIC_OR_PARTITION, and acks other than 0, 1,
-1 get INVALID_REQUIRED_ACKS for every partition (Kafka's ReplicaManager does the same before touching a log).
With acks=0 the listener sends no response at all; `encode_response` is still well defined.

The response groups partitions by topic in request order, naming each topic as the request did (name, or
id from v13). `log_append_time` is -1 (CreateTime topics); `log_start_offset` is the core's (-1 for the
refusals Kafka answers without a log, and for those of this translator). Given the broker's image, a partition refused
with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader and its endpoint (KIP-951, v10+).
"""

from __future__ import annotations

from typing import Any

from insync import errors
from insync.broker.messages import ProduceRequest, ProduceResponse
from insync.metadata.image import MetadataImage
from insync.protocol import produce_response
from insync.protocol.codec import DecodedRequest, EncodedBody
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    check_body,
    code,
    field_names,
    millis,
    nested,
    response_class,
)
from insync.types import TopicPartition
from insync.wire.entities import (
    NEW_LEADER_ERRORS,
    Decoded,
    Rejected,
    TopicKey,
    current_leader,
    group,
    node_endpoints,
    topic_entities,
    wire_topic_key,
)
from insync.wire.versions import PRODUCE

VALID_ACKS = (0, 1, -1)


def decode_request(request: DecodedRequest, image: MetadataImage) -> Decoded[ProduceRequest]:
    body = request.body
    version = check_body(body, PRODUCE)
    keys: dict[str, TopicKey] = {}
    partitions: list[tuple[TopicPartition, bytes]] = []
    rejected: list[Rejected] = []
    acks = int(body.acks)
    for topic in body.topic_data:
        key = wire_topic_key(image, topic)
        for data in topic.partition_data:
            if key.name is None:
                rejected.append(Rejected(key, data.index, errors.UNKNOWN_TOPIC_ID))
                continue
            keys[key.name] = key
            if acks not in VALID_ACKS:
                rejected.append(Rejected(key, data.index, errors.INVALID_REQUIRED_ACKS))
            elif not _exists(image, key.name, int(data.index)):
                rejected.append(Rejected(key, data.index, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                partitions.append((TopicPartition(key.name, int(data.index)), bytes(data.records or b"")))
    internal = ProduceRequest(request.correlation_id, acks, millis(body.timeout), tuple(partitions))
    return Decoded(version, internal, keys, tuple(rejected))


def _exists(image: MetadataImage, topic: str, partition: int) -> bool:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have (a broker that
    merely does not lead it answers NOT_LEADER_OR_FOLLOWER, from the core)."""
    topic_id = image.topic_ids_by_name.get(topic)
    return topic_id is not None and image.partition(topic_id, partition) is not None


def encode_response(response: ProduceResponse, decoded: Decoded[ProduceRequest],
                    image: MetadataImage | None = None) -> Any:
    """The Kafka response; with `image`, partitions refused for leadership name the current leader (KIP-951)."""
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    if not decoded.rejected and all(r.error not in NEW_LEADER_ERRORS and r.error_message is None
                                    for r in response.results):
        return _encode_plain(response, decoded)
    cls = response_class(PRODUCE, decoded.version)
    partition_cls = nested(cls, "PartitionProduceResponse")

    def partition(tp: TopicPartition, error: errors.KafkaError, base_offset: int, log_start_offset: int,
                  message: str | None = None, record_errors: tuple[tuple[int, str], ...] = ()) -> Any:
        entries = () if "record_errors" not in field_names(partition_cls) else tuple(
            build(nested(partition_cls, "BatchIndexAndErrorMessage"), batch_index=index,
                  batch_index_error_message=why) for index, why in record_errors)
        return build(partition_cls, index=tp.partition, error_code=code(error), base_offset=base_offset,
                     log_append_time=None, log_start_offset=log_start_offset, record_errors=entries,
                     error_message=message, **current_leader(partition_cls, image, tp.topic, tp.partition, error))

    items = [(decoded.key(r.topic_partition.topic),
              partition(r.topic_partition, r.error, r.base_offset, r.log_start_offset, r.error_message,
                        r.record_errors)) for r in response.results]
    items.extend((r.topic, partition(TopicPartition(r.topic.name or "", r.partition), r.error, -1, -1))
                 for r in decoded.rejected)
    topics = topic_entities(nested(cls, "TopicProduceResponse"), "partition_responses", group(items))
    return build(cls, responses=topics, throttle_time=NO_THROTTLE,
                 node_endpoints=node_endpoints(cls, image, (p for _, p in items)))


def _encode_plain(response: ProduceResponse, decoded: Decoded[ProduceRequest]) -> EncodedBody:
    """`encode_response` without a leader hint to give (no partition refused for leadership, none rejected by the
    translator): the fields are the plain ones, so `produce_response` writes them without kio's entities."""
    by_id = decoded.version >= produce_response.TOPIC_ID_FROM
    items = []
    for r in response.results:
        key = decoded.key(r.topic_partition.topic)
        items.append((key.topic_id if by_id else key.name or "",
                      (r.topic_partition.partition, r.error.code, r.base_offset, r.log_start_offset)))
    return produce_response.encode(decoded.version, group(items))
