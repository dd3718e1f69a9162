"""ListOffsets (v1-v11), OffsetForLeaderEpoch (v2-v4) and DeleteRecords (v0-v2) <-> `broker.messages`.

All three name topics by name and ask per partition; the core answers per partition (see `broker/messages.py`
for what it must compute). The translator answers by itself only a partition listed twice in one ListOffsets
request: INVALID_REQUEST, as Kafka does, since it could not say which answer is which.

Versions: ListOffsets v2 adds `isolation_level`, v4 `current_leader_epoch` and the answer's `leader_epoch`,
v10 a timeout (the core answers at once, so it is not used); OffsetForLeaderEpoch v3 adds `replica_id`
(older requests read as CONSUMER_REPLICA_ID: Kafka's default for them is the debugging id, which insync lets
read a follower's epochs, and a consumer's v2 request must still be answered by the leader only);
DeleteRecords only changes encoding.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from insync import errors
from insync.broker.messages import (
    CONSUMER_REPLICA_ID,
    READ_UNCOMMITTED,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    ZERO_UUID,
    build,
    check_body,
    code,
    field_or,
    millis,
    nested,
    response_class,
)
from insync.types import UNDEFINED_EPOCH, BrokerId, LeaderEpoch, Offset, TopicPartition
from insync.wire.entities import Decoded, Rejected, TopicKey, group, topic_entities
from insync.wire.versions import DELETE_RECORDS, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH

# ListOffsets ---------------------------------------------------------------------------------------------


def decode_list_offsets(request: DecodedRequest) -> Decoded[ListOffsetsRequest]:
    body = request.body
    version = check_body(body, LIST_OFFSETS)
    asked = [(TopicPartition(t.name, int(p.partition_index)), p) for t in body.topics for p in t.partitions]
    counts = Counter(tp for tp, _ in asked)
    partitions = tuple(ListOffsetsPartition(tp, int(p.timestamp),
                                            LeaderEpoch(int(field_or(p, "current_leader_epoch", UNDEFINED_EPOCH))))
                       for tp, p in asked if counts[tp] == 1)
    rejected = tuple(Rejected(TopicKey(tp.topic, ZERO_UUID), tp.partition, errors.INVALID_REQUEST)
                     for tp, count in counts.items() if count > 1)
    internal = ListOffsetsRequest(request.correlation_id, BrokerId(int(body.replica_id)),
                                  int(field_or(body, "isolation_level", READ_UNCOMMITTED)), partitions)
    return Decoded(version, internal, {}, rejected)


def encode_list_offsets(response: ListOffsetsResponse, decoded: Decoded[ListOffsetsRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(LIST_OFFSETS, decoded.version)
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    items = [(decoded.key(r.topic_partition.topic),
              build(partition_cls, partition_index=r.topic_partition.partition, error_code=code(r.error),
                    timestamp=r.timestamp, offset=r.offset, leader_epoch=r.leader_epoch))
             for r in response.results]
    items.extend((r.topic, build(partition_cls, partition_index=r.partition, error_code=code(r.error)))
                 for r in decoded.rejected)
    topics = topic_entities(nested(cls, "ListOffsetsTopicResponse"), "partitions", group(items))
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


# OffsetForLeaderEpoch ------------------------------------------------------------------------------------


def decode_offset_for_leader_epoch(request: DecodedRequest) -> Decoded[OffsetForLeaderEpochRequest]:
    body = request.body
    version = check_body(body, OFFSET_FOR_LEADER_EPOCH)
    partitions = tuple(OffsetForLeaderEpochPartition(TopicPartition(t.topic, int(p.partition)),
                                                     LeaderEpoch(int(p.current_leader_epoch)),
                                                     LeaderEpoch(int(p.leader_epoch)))
                       for t in body.topics for p in t.partitions)
    replica = BrokerId(int(field_or(body, "replica_id", CONSUMER_REPLICA_ID)))
    return Decoded(version, OffsetForLeaderEpochRequest(request.correlation_id, replica, partitions))


def encode_offset_for_leader_epoch(response: OffsetForLeaderEpochResponse,
                                   decoded: Decoded[OffsetForLeaderEpochRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(OFFSET_FOR_LEADER_EPOCH, decoded.version)
    partition_cls = nested(cls, "EpochEndOffset")
    items = [(decoded.key(r.topic_partition.topic),
              build(partition_cls, partition=r.topic_partition.partition, error_code=code(r.error),
                    leader_epoch=r.leader_epoch, end_offset=r.end_offset))
             for r in response.results]
    items.extend((r.topic, build(partition_cls, partition=r.partition, error_code=code(r.error), leader_epoch=-1,
                                 end_offset=-1)) for r in decoded.rejected)  # refused unauthorized (authorization)
    topics = topic_entities(nested(cls, "OffsetForLeaderTopicResult"), "partitions", group(items))
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


# DeleteRecords -------------------------------------------------------------------------------------------


def decode_delete_records(request: DecodedRequest) -> Decoded[DeleteRecordsRequest]:
    body = request.body
    version = check_body(body, DELETE_RECORDS)
    partitions = tuple((TopicPartition(t.name, int(p.partition_index)), Offset(int(p.offset)))
                       for t in body.topics for p in t.partitions)
    return Decoded(version, DeleteRecordsRequest(request.correlation_id, millis(body.timeout), partitions))


def encode_delete_records(response: DeleteRecordsResponse, decoded: Decoded[DeleteRecordsRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(DELETE_RECORDS, decoded.version)
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    items = [(decoded.key(r.topic_partition.topic),
              build(partition_cls, partition_index=r.topic_partition.partition, error_code=code(r.error),
                    low_watermark=r.low_watermark))
             for r in response.results]
    items.extend((r.topic, build(partition_cls, partition_index=r.partition, error_code=code(r.error),
                                 low_watermark=-1)) for r in decoded.rejected)  # refused unauthorized (authorization)
    topics = topic_entities(nested(cls, "DeleteRecordsTopicResult"), "partitions", group(items))
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)

