"""A follower's Fetch request (v15) written with `struct` instead of through kio's entities.

Every record a leader appends brings each follower's next fetch, and building and walking kio's entities for each
request is a large part of a follower's CPU (where brokers share cores, a follower's time is the leader's too).
`encode` writes the same bytes as kio for what followers send: a fetch in their fetch session (KIP-227) with its
forgotten partitions, empty rack id, and the follower's `ReplicaState` (KIP-903), the body's one tagged field
(tag 1).
The unit tests check the bytes against kio's writer over random values.

Layout (Kafka's FetchRequest.json, v15, flexible): max wait, min bytes, max bytes, isolation level, session id,
session epoch, topics (by id) -> partitions: index, current leader epoch, fetch offset, last fetched epoch, log
start offset, partition max bytes; forgotten topics, rack id, then the tagged fields.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from insync.protocol.codec import EncodedBody
from insync.protocol.fetch_response import FETCH_KEY, NO_TAGGED_FIELDS, compact_length

VERSIONS = (15,)
REPLICA_STATE_TAG = 1

_TOP = struct.Struct(">iiibii")  # max wait, min bytes, max bytes, isolation level, session id, session epoch
_PARTITION = struct.Struct(">iiqiqi")
_REPLICA_STATE = struct.Struct(">iq")  # replica id, broker epoch
_EMPTY_RACK = compact_length(0)
# One tagged field, its tag and its size: ReplicaState's two fields and its own (empty) tagged fields.
_TAGS = bytes((1, REPLICA_STATE_TAG, _REPLICA_STATE.size + len(NO_TAGGED_FIELDS)))

# (partition, current leader epoch, fetch offset, last fetched epoch, log start offset, partition max bytes)
PartitionValues = tuple[int, int, int, int, int, int]


def encode(version: int, replica_id: int, replica_epoch: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
           topics: Sequence[tuple[uuid.UUID, Sequence[PartitionValues]]], session_id: int = 0,
           session_epoch: int = -1, forgotten: Sequence[tuple[uuid.UUID, Sequence[int]]] = ()) -> EncodedBody:
    """The body of a follower's Fetch request `version` (by default a full fetch outside any session), as one
    part."""
    assert version in VERSIONS and replica_id >= 0, (version, replica_id)
    out = bytearray(_TOP.pack(max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch))
    out += compact_length(len(topics))
    for topic_id, partitions in topics:
        out += topic_id.bytes
        out += compact_length(len(partitions))
        for partition in partitions:
            out += _PARTITION.pack(*partition)
            out += NO_TAGGED_FIELDS
        out += NO_TAGGED_FIELDS
    out += compact_length(len(forgotten))
    for topic_id, indexes in forgotten:
        out += topic_id.bytes
        out += compact_length(len(indexes))
        out += struct.pack(f">{len(indexes)}i", *indexes)
        out += NO_TAGGED_FIELDS
    out += _EMPTY_RACK
    out += _TAGS
    out += _REPLICA_STATE.pack(replica_id, replica_epoch)
    out += NO_TAGGED_FIELDS
    return EncodedBody(FETCH_KEY, version, True, [bytes(out)], is_request=True)
