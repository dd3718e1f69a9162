"""DescribeTransactions (v0) and ListTransactions (v0-v2) <-> plain values: what `kafka-transactions` asks a
transaction coordinator about the transactional ids it owns.

ListTransactions is sent to every broker, each answering for the ids of the `__transaction_state` partitions it
leads, filtered by state names (unknown ones echoed back), producer ids, a minimum running time (v1) and a
regular expression over the id (v2). DescribeTransactions asks an id's coordinator for its state, as Kafka's
TransactionMetadata holds it: the state's name, timeout, start time, producer id and epoch, and the partitions of
the open transaction.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from insync.errors import KafkaError
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    build_defaults,
    check_body,
    code,
    field_or,
    nested,
    response_class,
)
from insync.transactions.log_records import TxnMetadata
from insync.wire.entities import group
from insync.wire.versions import DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

NO_DURATION_FILTER = -1


@dataclass(frozen=True, slots=True)
class ListFilters:
    states: tuple[str, ...]  # Kafka's state names, as asked
    producer_ids: frozenset[int]
    duration_ms: int  # only transactions running longer than this; NO_DURATION_FILTER for all
    pattern: str  # a regular expression the whole id must match; empty for all


def decode_list(request: DecodedRequest) -> ListFilters:
    body = request.body
    check_body(body, LIST_TRANSACTIONS)
    return ListFilters(tuple(str(s) for s in body.state_filters), frozenset(int(p) for p in body.producer_id_filters),
                       int(field_or(body, "duration_filter", NO_DURATION_FILTER)),
                       str(field_or(body, "transactional_id_pattern", None) or ""))


def encode_list(request: DecodedRequest, error: KafkaError, unknown_states: list[str],
                txns: list[TxnMetadata]) -> Any:
    cls = response_class(LIST_TRANSACTIONS, request.api_version)
    state_cls = nested(cls, "TransactionState")
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), unknown_state_filters=tuple(unknown_states),
                 transaction_states=tuple(build(state_cls, transactional_id=t.transactional_id,
                                                producer_id=t.producer_id, transaction_state=t.state.kafka_name)
                                          for t in txns))


def decode_describe(request: DecodedRequest) -> list[str]:
    check_body(request.body, DESCRIBE_TRANSACTIONS)
    return [str(t) for t in request.body.transactional_ids]


def encode_describe(request: DecodedRequest, answers: list[tuple[str, KafkaError, TxnMetadata | None]]) -> Any:
    """One entry per id asked, in order: its state, or its error with the other fields at Kafka's defaults."""
    cls = response_class(DESCRIBE_TRANSACTIONS, request.api_version)
    state_cls, topic_cls = nested(cls, "TransactionState"), nested(nested(cls, "TransactionState"), "TopicData")
    states = []
    for transactional_id, error, txn in answers:
        if txn is None:
            states.append(build_defaults(state_cls, error_code=code(error), transactional_id=transactional_id))
            continue
        topics = tuple(build(topic_cls, topic=topic, partitions=tuple(partitions)) for topic, partitions in
                       group((tp.topic, tp.partition) for tp in sorted(txn.partitions)))
        states.append(build(state_cls, error_code=code(error), transactional_id=transactional_id,
                            transaction_state=txn.state.kafka_name,
                            transaction_timeout=datetime.timedelta(milliseconds=txn.timeout_ms),
                            transaction_start_time=_instant(txn.start_ms), producer_id=txn.producer_id,
                            producer_epoch=txn.producer_epoch, topics=topics))
    return build(cls, throttle_time=NO_THROTTLE, transaction_states=tuple(states))


def _instant(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
