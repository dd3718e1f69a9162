"""Produce responses of the hot path (v3-v13) written with `struct`, as `fetch_response` writes Fetch responses.

Through kio, a Produce response of a few dozen bytes is a tree of frozen dataclasses built, then walked by kio's
generic writers, a sizeable part of a leader's time per acks=all request. `encode` writes the same bytes from
plain values for the shape nearly every response has: each partition accepted or refused without a leader hint
(KIP-951 adds `current_leader` and `node_endpoints` only for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH), no
log append time (insync stamps CreateTime), no record errors and no error message. Any other response goes
through kio (`insync.wire.produce` decides); the unit tests check both writers byte for byte over every version.

Layout (Kafka's ProduceResponse.json): topics (v13+ by id, before by name) -> partitions: index, error code, base
offset, log append time (-1), v5+ log start offset, v8+ record errors (empty) and error message (null); then the
throttle time. v9+ is flexible (compact arrays and strings, an empty tagged-field section closing every structure).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from insync.protocol.codec import EncodedBody, Parts
from insync.protocol.fetch_response import NO_TAGGED_FIELDS, compact_length, length, topic_field

PRODUCE_KEY = 0
VERSIONS = range(3, 14)
FLEXIBLE_FROM = 9
TOPIC_ID_FROM = 13
NO_LOG_APPEND_TIME = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_NULL_STRING = _I16.pack(-1)
_COMPACT_NULL = b"\x00"
_EMPTY_ARRAY = _I32.pack(0)
_COMPACT_EMPTY = compact_length(0)

# (partition index, error code, base offset, log start offset)
PartitionValues = tuple[int, int, int, int]
TopicValues = tuple[str | uuid.UUID, Sequence[PartitionValues]]


def encode(version: int, topics: Sequence[TopicValues]) -> EncodedBody:
    """The body of a Produce response `version` of the hot-path shape (module docstring)."""
    assert version in VERSIONS, version
    flexible = version >= FLEXIBLE_FROM
    out = bytearray(length(len(topics), flexible))
    for topic, partitions in topics:
        out += topic_field(topic, version >= TOPIC_ID_FROM, flexible)
        out += length(len(partitions), flexible)
        for index, error_code, base_offset, log_start_offset in partitions:
            if version >= 5:
                out += _PARTITION_V5.pack(index, error_code, base_offset, NO_LOG_APPEND_TIME, log_start_offset)
            else:
                out += _PARTITION_V3.pack(index, error_code, base_offset, NO_LOG_APPEND_TIME)
            if version >= 8:  # no record errors, no error message
                out += _COMPACT_EMPTY + _COMPACT_NULL if flexible else _EMPTY_ARRAY + _NULL_STRING
            if flexible:
                out += NO_TAGGED_FIELDS
        if flexible:
            out += NO_TAGGED_FIELDS
    out += _I32.pack(0)  # throttle time
    if flexible:
        out += NO_TAGGED_FIELDS
    parts = Parts(framed=False)
    parts.write(bytes(out))
    return EncodedBody(PRODUCE_KEY, version, flexible, parts.written())
