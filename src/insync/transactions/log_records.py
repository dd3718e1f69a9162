"""The records of `__transaction_state`: one transactional id's state, in Kafka's formats, and back.

As in Kafka, a transactional id's state lives in one partition of `__transaction_state`, chosen like a group's
(`groups.offsets.partition_for`: Java's String.hashCode), whose leader is its coordinator. Each change of state is
a record keyed by the id (`TransactionLogKey` v0) whose value (`TransactionLogValue`) holds the producer id and
epoch, the timeout, the state, the partitions of the open transaction and its timestamps; a tombstone removes an
expired id. The topic is compacted, so the last record of each id is its state. A transaction of transactions v2
(KIP-890) is written as value v1, Kafka's flexible version, whose tagged fields carry the client's transaction
version and the producer ids of an epoch overflow; v0 is read and written for the others.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from insync.groups.offsets import RecordReader
from insync.types import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
# TransactionLogValue v1's tagged fields: tag -> (field, layout, default).
_TAGS = {0: ("prev_producer_id", struct.Struct(">q"), -1), 1: ("next_producer_id", struct.Struct(">q"), -1),
         2: ("client_version", struct.Struct(">h"), 0)}
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
    # Transactions v2: the transaction version of the client's last request (0 or 2), the new producer id of an
    # epoch overflow until the transaction completes, and the one it replaced once it has.
    client_version: int = 0
    next_producer_id: int = -1
    prev_producer_id: int = -1

    @property
    def bumps_epoch(self) -> bool:
        """Kafka's `supportsEpochBump`: each EndTxn of this transaction bumps the producer epoch."""
        return self.client_version >= 2


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
    tagged = {tag: getattr(txn, name) for tag, (name, _, default) in _TAGS.items() if getattr(txn, name) != default}
    if not tagged:
        out = bytearray(_I16.pack(VALUE_VERSION))
        out += _I64.pack(txn.producer_id) + _I16.pack(txn.producer_epoch) + _I32.pack(txn.timeout_ms)
        out += _I8.pack(int(txn.state)) + _I32.pack(len(topics))
        for topic, partitions in topics.items():
            out += _string(topic) + _I32.pack(len(partitions)) + b"".join(_I32.pack(p) for p in partitions)
        return bytes(out + _I64.pack(txn.last_update_ms) + _I64.pack(txn.start_ms))
    out = bytearray(_I16.pack(FLEXIBLE_VALUE_VERSION))
    out += _I64.pack(txn.producer_id) + _I16.pack(txn.producer_epoch) + _I32.pack(txn.timeout_ms)
    # An Empty state's partitions are null, as Kafka writes them.
    out += _I8.pack(int(txn.state)) + _uvarint(0 if txn.state is TxnState.EMPTY else len(topics) + 1)
    for topic, partitions in topics.items():
        raw = topic.encode()
        out += _uvarint(len(raw) + 1) + raw + _uvarint(len(partitions) + 1)
        out += b"".join(_I32.pack(p) for p in partitions) + _uvarint(0)  # no tagged fields of its own
    out += _I64.pack(txn.last_update_ms) + _I64.pack(txn.start_ms) + _uvarint(len(tagged))
    for tag, value in sorted(tagged.items()):
        packed = _TAGS[tag][1].pack(value)
        out += _uvarint(tag) + _uvarint(len(packed)) + packed
    return bytes(out)


def _uvarint(value: int) -> bytes:
    assert 0 <= value < 1 << 32, value
    out = bytearray()
    while value >= 0x80:  # bounded: five bytes at most for 32 bits
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Reader(RecordReader):
    error = TxnRecordError

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):  # bounded: an int32's varint has five bytes at most
            byte = self.take(_I8) & 0xFF
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.error(f"{self.what} has a varint longer than five bytes at byte {self.pos}")

    def compact_count(self) -> int:
        count = self.uvarint() - 1
        if not 0 <= count <= len(self.data):
            raise self.error(f"{self.what} has a compact array or string of {count} entries")
        return count

    def nullable_count(self, flexible: bool) -> int:
        """An array's length, 0 when null: Kafka writes an Empty state's partitions so."""
        count = self.uvarint() - 1 if flexible else self.take(_I32)
        if count > len(self.data):  # each entry takes at least a byte: a larger count is garbage
            raise self.error(f"{self.what} has an array of {count} entries")
        return max(count, 0)

    def compact_string(self) -> str:
        return self.text(self.compact_count())

    def tagged(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        count = self.uvarint()
        if count > len(self.data):
            raise self.error(f"{self.what} has {count} tagged fields")
        for _ in range(count):
            tag, size = self.uvarint(), self.uvarint()
            if self.pos + size > len(self.data):
                raise self.error(f"{self.what} has a tagged field of {size} bytes at byte {self.pos}")
            fields[tag] = self.data[self.pos:self.pos + size]
            self.pos += size
        return fields


def decode_key(data: bytes) -> str:
    reader = _Reader(data, "a transaction log key")
    version = reader.take(_I16)
    if version != KEY_VERSION:
        raise TxnRecordError(f"unknown transaction log key version {version}")
    return reader.string()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    reader = _Reader(data, "a transaction log value")
    version = reader.take(_I16)
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise TxnRecordError(f"unsupported transaction log value version {version}")
    flexible = version == FLEXIBLE_VALUE_VERSION
    producer_id, epoch, timeout_ms = reader.take(_I64), reader.take(_I16), reader.take(_I32)
    try:
        state = TxnState(reader.take(_I8))
    except ValueError as exc:
        raise TxnRecordError(str(exc)) from None
    partitions: list[TopicPartition] = []
    for _ in range(reader.nullable_count(flexible)):
        topic = reader.compact_string() if flexible else reader.string()
        count = reader.compact_count() if flexible else reader.count()
        partitions.extend(TopicPartition(topic, reader.take(_I32)) for _ in range(count))
        if flexible:
            reader.tagged()
    last_update_ms, start_ms = reader.take(_I64), reader.take(_I64)
    extra: dict[str, int] = {}
    if flexible:
        for tag, raw in reader.tagged().items():
            if tag in _TAGS and len(raw) == _TAGS[tag][1].size:
                extra[_TAGS[tag][0]] = int(_TAGS[tag][1].unpack(raw)[0])
    return TxnMetadata(transactional_id, producer_id, epoch, timeout_ms, state, frozenset(partitions), start_ms,
                       last_update_ms, **extra)
