"""Fetch responses of the hot path (v4-v17) written with `struct`, records kept as parts of their own.

Every acks=all record costs a leader four or five Fetch responses (two followers, a tailing consumer), each of
one partition; through kio each is a tree of frozen dataclasses built and then walked by its generic writers, a
large part of a leader's time. `encode` writes the same bytes straight from plain values, for the shape those
responses have: no tagged fields (no diverging epoch, leader hint or snapshot id), no aborted transactions (null,
or empty for READ_COMMITTED, as Kafka answers), preferred read replica -1, no node endpoints. Any other response
goes through kio (`insync.wire.fetch` decides); the unit tests check both writers byte for byte over every version.

Layout (Kafka's FetchResponse.json): throttle time, v7+ error code and session id, then topics (v13+ by id,
before by name) -> partitions: index, error, high watermark, last stable offset, v5+ log start offset, aborted
transactions, v11+ preferred read replica, records. v12+ is flexible (compact arrays, strings and bytes, and an
empty tagged-field section closing every structure).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from insync.protocol.codec import EncodedBody, Parts

FETCH_KEY = 1
VERSIONS = range(4, 18)
FLEXIBLE_FROM = 12
TOPIC_ID_FROM = 13
NO_TAGGED_FIELDS = b"\x00"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP_V1 = struct.Struct(">i")  # throttle time
_TOP_V7 = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_PREFERRED_READ_REPLICA_NONE = _I32.pack(-1)

# (partition index, error code, high watermark, last stable offset, log start offset, records)
PartitionValues = tuple[int, int, int, int, int, bytes | None]
TopicValues = tuple[str | uuid.UUID, Sequence[PartitionValues]]


def encode(version: int, error_code: int, session_id: int, topics: Sequence[TopicValues],
           read_committed: bool = False) -> EncodedBody:
    """The body of a Fetch response `version` of the hot-path shape (module docstring), as parts; the aborted
    transactions of each partition are an empty list when `read_committed`, else null."""
    assert version in VERSIONS, version
    flexible = version >= FLEXIBLE_FROM
    aborted = length(0, flexible) if read_committed else _null_array(flexible)
    out = Parts(framed=False)
    if version >= 7:
        out.write(_TOP_V7.pack(0, error_code, session_id))
    else:
        out.write(_TOP_V1.pack(0))
    out.write(length(len(topics), flexible))
    for topic, partitions in topics:
        out.write(topic_field(topic, version >= TOPIC_ID_FROM, flexible))
        out.write(length(len(partitions), flexible))
        for partition in partitions:
            _partition(out, partition, version, flexible, aborted)
            if flexible:
                out.write(NO_TAGGED_FIELDS)
        if flexible:
            out.write(NO_TAGGED_FIELDS)
    if flexible:
        out.write(NO_TAGGED_FIELDS)
    return EncodedBody(FETCH_KEY, version, flexible, out.written())


def _partition(out: Parts, values: PartitionValues, version: int, flexible: bool, aborted: bytes) -> None:
    index, error_code, high_watermark, last_stable_offset, log_start_offset, records = values
    if version >= 5:
        out.write(_PARTITION_V5.pack(index, error_code, high_watermark, last_stable_offset, log_start_offset))
    else:
        out.write(_PARTITION_V4.pack(index, error_code, high_watermark, last_stable_offset))
    out.write(aborted)  # aborted transactions: none (insync has no transactions)
    if version >= 11:
        out.write(_PREFERRED_READ_REPLICA_NONE)
    if records is None:
        out.write(_null_array(flexible))
        return
    out.write(length(len(records), flexible))
    out.write(records)


def topic_field(topic: str | uuid.UUID, by_id: bool, flexible: bool) -> bytes:
    """A topic as a response names it: its id (16 bytes), or its name (compact or int16-sized string)."""
    if by_id:
        assert isinstance(topic, uuid.UUID), topic
        return topic.bytes
    assert isinstance(topic, str), topic
    name = topic.encode()
    return _varint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name


def length(count: int, flexible: bool) -> bytes:
    """An array's or a bytes value's length: compact (unsigned varint of length + 1) or int32."""
    return compact_length(count) if flexible else _I32.pack(count)


def _null_array(flexible: bool) -> bytes:
    """A null array or bytes value: compact length 0, or int32 -1."""
    return b"\x00" if flexible else _I32.pack(-1)


def compact_length(count: int) -> bytes:
    return _varint(count + 1)


def _varint(value: int) -> bytes:
    assert value >= 0
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:  # at most 5 bytes for an int32 length
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
