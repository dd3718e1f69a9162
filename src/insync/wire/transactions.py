"""The transaction APIs <-> plain values: InitProducerId with a transactional id, AddPartitionsToTxn (v0-v3, the
client's form; v4, the brokers' batched one, both ways), AddOffsetsToTxn, EndTxn, TxnOffsetCommit, and
WriteTxnMarkers both ways (the coordinator sends it, partition leaders answer it).

Kafka's version rule for fencing: PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn
v2, EndTxn v2 and TxnOffsetCommit v3; older versions are answered INVALID_PRODUCER_EPOCH, as KafkaApis does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.errors import KafkaError
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    check_body,
    code,
    error_of,
    field_or,
    millis,
    nested,
    request_class,
    response_class,
)
from insync.types import TopicPartition
from insync.wire.entities import group

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
INIT_PRODUCER_ID = 22
WRITE_TXN_MARKERS_VERSION = 1
BATCHED_VERSION = 4  # AddPartitionsToTxn from v4: transactions in a batch, from brokers only
BROKER_SENDS_VERSION = 5  # the version a partition leader sends, as Kafka 4.1's: it knows TRANSACTION_ABORTABLE
END_TXN_IDS_VERSION = 5  # EndTxn from v5 answers the producer id and epoch the client goes on with
# The first version of each API that knows PRODUCER_FENCED.
_FENCED_FROM = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2, TXN_OFFSET_COMMIT: 3}


@dataclass(frozen=True, slots=True)
class TxnRequest:
    """The fields the coordinator's APIs share; `partitions` (AddPartitionsToTxn), `group_id` (AddOffsetsToTxn,
    TxnOffsetCommit), `commit` (EndTxn) and `timeout_ms` (InitProducerId) where the API has them."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...] = ()
    group_id: str = ""
    commit: bool = False
    timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[tuple[TopicPartition, int, int, str], ...]  # partition, offset, leader epoch, metadata


@dataclass(frozen=True, slots=True)
class Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


def _version_error(api_key: int, version: int, error: KafkaError) -> KafkaError:
    if error.name == "PRODUCER_FENCED" and version < _FENCED_FROM[api_key]:
        return errors.INVALID_PRODUCER_EPOCH
    return error


def decode(request: DecodedRequest) -> TxnRequest:
    body, key = request.body, request.api_key
    check_body(body, key)
    if key == INIT_PRODUCER_ID:
        return TxnRequest(str(body.transactional_id), int(field_or(body, "producer_id", -1)),
                          int(field_or(body, "producer_epoch", -1)), timeout_ms=millis(body.transaction_timeout))
    if key == ADD_PARTITIONS_TO_TXN:  # v0-v3: the client's form, its fields named so in kio
        return TxnRequest(str(body.v3_and_below_transactional_id), int(body.v3_and_below_producer_id),
                          int(body.v3_and_below_producer_epoch), tuple(
                              TopicPartition(str(t.name), int(p)) for t in body.v3_and_below_topics
                              for p in t.partitions))
    return TxnRequest(str(body.transactional_id), int(body.producer_id), int(body.producer_epoch),
                      group_id=str(field_or(body, "group_id", "")), commit=bool(field_or(body, "committed", False)))


def encode(request: DecodedRequest, error: KafkaError, producer_id: int = -1, producer_epoch: int = -1,
           partition_errors: dict[TopicPartition, KafkaError] | None = None) -> Any:
    key, version = request.api_key, request.api_version
    cls = response_class(key, version)
    error = _version_error(key, version, error)
    if key == INIT_PRODUCER_ID:
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), producer_id=producer_id,
                     producer_epoch=producer_epoch)
    if key == END_TXN and version >= END_TXN_IDS_VERSION:
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), producer_id=producer_id,
                     producer_epoch=producer_epoch)
    if key != ADD_PARTITIONS_TO_TXN:
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(error))
    result_cls, topic_cls = nested(cls, "AddPartitionsToTxnPartitionResult"), nested(cls, "AddPartitionsToTxnTopicResult")
    asked = decode(request).partitions
    items = [(tp.topic, build(result_cls, partition_index=tp.partition, partition_error_code=code(
        _version_error(key, version, (partition_errors or {}).get(tp, error))))) for tp in asked]
    return build(cls, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(
        build(topic_cls, name=name, results_by_partition=tuple(results)) for name, results in group(items)))


def decode_txn_offset_commit(request: DecodedRequest) -> TxnOffsetCommit:
    body = request.body
    check_body(body, TXN_OFFSET_COMMIT)
    offsets = tuple((TopicPartition(str(t.name), int(p.partition_index)), int(p.committed_offset),
                     int(field_or(p, "committed_leader_epoch", -1)), str(p.committed_metadata or ""))
                    for t in body.topics for p in t.partitions)
    return TxnOffsetCommit(str(body.transactional_id), str(body.group_id), int(body.producer_id),
                           int(body.producer_epoch), int(field_or(body, "generation_id", -1)),
                           str(field_or(body, "member_id", "")), field_or(body, "group_instance_id", None), offsets)


def encode_txn_offset_commit(request: DecodedRequest, results: list[tuple[TopicPartition, KafkaError]]) -> Any:
    cls = response_class(TXN_OFFSET_COMMIT, request.api_version)
    partition_cls, topic_cls = nested(cls, "TxnOffsetCommitResponsePartition"), nested(cls, "TxnOffsetCommitResponseTopic")
    items = [(tp.topic, build(partition_cls, partition_index=tp.partition,
                              error_code=code(_version_error(TXN_OFFSET_COMMIT, request.api_version, error))))
             for tp, error in results]
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in group(items)))


# WriteTxnMarkers ------------------------------------------------------------------------------------------


def decode_markers(request: DecodedRequest) -> list[Marker]:
    body = request.body
    check_body(body, WRITE_TXN_MARKERS)
    return [Marker(int(m.producer_id), int(m.producer_epoch), bool(m.transaction_result), int(m.coordinator_epoch),
                   tuple(TopicPartition(str(t.name), int(p)) for t in m.topics for p in t.partition_indexes))
            for m in body.markers]


def encode_markers_response(request: DecodedRequest, results: list[tuple[Marker, dict[TopicPartition, KafkaError]]]
                            ) -> Any:
    cls = response_class(WRITE_TXN_MARKERS, request.api_version)
    result_cls, topic_cls = nested(cls, "WritableTxnMarkerResult"), nested(cls, "WritableTxnMarkerTopicResult")
    partition_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    return build(cls, markers=tuple(
        build(result_cls, producer_id=marker.producer_id,
              topics=_topics(topic_cls, partition_cls, by_partition, "partitions", "error_code"))
        for marker, by_partition in results))


def _topics(topic_cls: type, partition_cls: type, by_partition: dict[TopicPartition, KafkaError], partitions: str,
            error: str) -> tuple[Any, ...]:
    """Partitions' errors as a response's topics, by name: each topic's partitions in its field `partitions`,
    each partition's error in its field `error` (the field names differ from API to API)."""
    items = [(tp.topic, build(partition_cls, partition_index=tp.partition, **{error: code(e)}))
             for tp, e in by_partition.items()]
    return tuple(build(topic_cls, name=name, **{partitions: tuple(parts)}) for name, parts in group(items))


def markers_request(marker: Marker) -> Any:
    """The WriteTxnMarkers request a coordinator sends a partition leader, for one marker."""
    cls = request_class(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
    topic_cls = nested(cls, "WritableTxnMarkerTopic")
    topics = tuple(build(topic_cls, name=name, partition_indexes=tuple(parts))
                   for name, parts in group([(tp.topic, tp.partition) for tp in marker.partitions]))
    return build(cls, markers=(build(nested(cls, "WritableTxnMarker"), producer_id=marker.producer_id,
                                     producer_epoch=marker.producer_epoch, transaction_result=marker.commit,
                                     topics=topics, coordinator_epoch=marker.coordinator_epoch),))


def markers_response_errors(body: Any) -> dict[TopicPartition, KafkaError]:
    """Each partition's error in a WriteTxnMarkers response to `markers_request`."""
    return {TopicPartition(str(t.name), int(p.partition_index)): error_of(p.error_code)
            for m in body.markers for t in m.topics for p in t.partitions}


# AddPartitionsToTxn v4: the brokers' batched form, by which a partition leader verifies (KIP-890) ----------------


@dataclass(frozen=True, slots=True)
class TxnPartitions:
    """One transaction of an AddPartitionsToTxn v4 request: verify, or add, these partitions."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    partitions: tuple[TopicPartition, ...]


def decode_batched(request: DecodedRequest) -> list[TxnPartitions]:
    body = request.body
    check_body(body, ADD_PARTITIONS_TO_TXN)
    assert request.api_version >= BATCHED_VERSION, request.api_version
    return [TxnPartitions(str(t.transactional_id), int(t.producer_id), int(t.producer_epoch), bool(t.verify_only),
                          tuple(TopicPartition(str(topic.name), int(p)) for topic in t.topics
                                for p in topic.partitions)) for t in body.transactions]


def encode_batched(request: DecodedRequest, results: list[tuple[str, dict[TopicPartition, KafkaError]]]) -> Any:
    cls = response_class(ADD_PARTITIONS_TO_TXN, request.api_version)
    result_cls, topic_cls = nested(cls, "AddPartitionsToTxnResult"), nested(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested(cls, "AddPartitionsToTxnPartitionResult")
    transactions = tuple(build(result_cls, transactional_id=transactional_id, topic_results=_topics(
        topic_cls, partition_cls, by_partition, "results_by_partition", "partition_error_code"))
        for transactional_id, by_partition in results)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), results_by_transaction=transactions)


def verify_request(txn: TxnPartitions) -> Any:
    """The AddPartitionsToTxn a partition leader sends a transaction's coordinator, to verify or to add."""
    cls = request_class(ADD_PARTITIONS_TO_TXN, BROKER_SENDS_VERSION)
    txn_cls = nested(cls, "AddPartitionsToTxnTransaction")
    topics = tuple(build(nested(txn_cls, "AddPartitionsToTxnTopic"), name=name, partitions=tuple(parts))
                   for name, parts in group([(tp.topic, tp.partition) for tp in txn.partitions]))
    return build(cls, transactions=(build(txn_cls, transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                                          producer_epoch=txn.producer_epoch, verify_only=txn.verify_only,
                                          topics=topics),))


def verify_response_errors(body: Any) -> dict[TopicPartition, KafkaError]:
    """Each partition's error in the answer to `verify_request`; the request's own error on every partition."""
    top = error_of(body.error_code)
    return {TopicPartition(str(t.name), int(p.partition_index)): top if top is not errors.NONE
            else error_of(p.partition_error_code)
            for result in body.results_by_transaction for t in result.topic_results for p in t.results_by_partition}
