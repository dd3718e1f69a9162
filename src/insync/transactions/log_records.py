"""The records of `__transaction_state`: one transactional id's state, in Kafka's formats, and back.

As in Kafka, a transactional id's state lives in one partition of `__transaction_state`, chosen like a group's
(`groups.offsets.partition_for`: Java's String.hashCode), whose leader is its coordinator. Each change of state is
a record keyed by the id (`TransactionLogKey` v0) whose value (`TransactionLogValue` v0) holds the producer id and
epoch, the timeout, the state, the partitions of the open transaction and its timestamps; a tombstone removes an
expired id. The topic is compacted, so the last record of each id is its state.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from insync.groups.offsets import RecordReader
from insync.types import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with its ids as written to the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools show (`kafka-transactions describe`)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1  # when the open transaction began, -1 without one
    last_update_ms: int = -1


class TxnRecordError(ValueError):
    """A `__transaction_state` record that is not in a format this module reads."""


def _string(value: str) -> bytes:
    raw = value.encode()
    assert len(raw) <= 0x7FFF, "transactional ids and topic names are bounded well below int16"
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(txn: TxnMetadata) -> bytes:
    topics: dict[str, list[int]] = {}
    for tp in sorted(txn.partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(txn.producer_id) + _I16.pack(txn.producer_epoch) + _I32.pack(txn.timeout_ms)
    out += _I8.pack(int(txn.state)) + _I32.pack(len(topics))
    for topic, partitions in topics.items():
        out += _string(topic) + _I32.pack(len(partitions)) + b"".join(_I32.pack(p) for p in partitions)
    out += _I64.pack(txn.last_update_ms) + _I64.pack(txn.start_ms)
    return bytes(out)


class _Reader(RecordReader):
    error = TxnRecordError


def decode_key(data: bytes) -> str:
    reader = _Reader(data, "a transaction log key")
    version = reader.take(_I16)
    if version != KEY_VERSION:
        raise TxnRecordError(f"unknown transaction log key version {version}")
    return reader.string()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    reader = _Reader(data, "a transaction log value")
    version = reader.take(_I16)
    if version != VALUE_VERSION:
        raise TxnRecordError(f"unsupported transaction log value version {version}")
    producer_id, epoch, timeout_ms = reader.take(_I64), reader.take(_I16), reader.take(_I32)
    try:
        state = TxnState(reader.take(_I8))
    except ValueError as exc:
        raise TxnRecordError(str(exc)) from None
    partitions: list[TopicPartition] = []
    for _ in range(reader.count()):
        topic = reader.string()
        partitions.extend(TopicPartition(topic, reader.take(_I32)) for _ in range(reader.count()))
    last_update_ms, start_ms = reader.take(_I64), reader.take(_I64)
    return TxnMetadata(transactional_id, producer_id, epoch, timeout_ms, state, frozenset(partitions), start_ms,
                       last_update_ms)
