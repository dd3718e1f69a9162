"""A classic group's membership as a `__consumer_offsets` record: Kafka's GroupMetadataKey (key version 2) and
GroupMetadataValue v3, the version Kafka 4 writes.

The coordinator writes one when a rebalance ends (the leader's assignment, or an Empty group at its new generation)
and a tombstone when the group is deleted; the broker that next leads the partition replays them, so the members
carry on with their generation and assignment, as on Kafka, instead of rejoining. Only the chosen protocol's
subscription is kept, as Kafka keeps it. The topic is compacted: the last record of each group stays.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from insync.groups.offsets import OffsetRecordError, RecordReader

KEY_VERSION = 2
VALUE_VERSION = 3
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    assert len(raw) <= 0x7FFF, "ids and protocol names are bounded well below int16"
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_group_key(group_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(group_id)


def encode_group_value(group: GroupRecord) -> bytes:
    parts = [_I16.pack(VALUE_VERSION), _string(group.protocol_type), _I32.pack(group.generation_id),
             _string(group.protocol_name), _string(group.leader), _I64.pack(group.state_timestamp_ms),
             _I32.pack(len(group.members))]
    for m in group.members:
        parts += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id), _string(m.client_host),
                  _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.session_timeout_ms), _bytes(m.subscription),
                  _bytes(m.assignment)]
    return b"".join(parts)


def group_of_key(data: bytes) -> str | None:
    """The group id of a group-metadata key, or None for any other key (an offset commit's)."""
    reader = RecordReader(data, "a group key")
    if reader.take(_I16) != KEY_VERSION:
        return None
    return reader.string()


def decode_group_value(data: bytes) -> GroupRecord:
    """GroupMetadataValue v0 to v3 (v4, the flexible one, is refused: Kafka writes v3)."""
    reader = RecordReader(data, "a group value")
    version = reader.take(_I16)
    if not 0 <= version <= VALUE_VERSION:
        raise OffsetRecordError(f"unsupported group value version {version}")
    protocol_type, generation_id = reader.string(), reader.take(_I32)
    protocol_name, leader = _nullable(reader), _nullable(reader)
    state_timestamp_ms = reader.take(_I64) if version >= 2 else -1
    members = []
    for _ in range(reader.count()):  # bounded by the value's length
        member_id = reader.string()
        group_instance_id = _nullable(reader) if version >= 3 else None
        client_id, client_host = reader.string(), reader.string()
        rebalance_timeout_ms = reader.take(_I32) if version >= 1 else -1
        session_timeout_ms = reader.take(_I32)
        subscription, assignment = _blob(reader), _blob(reader)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # Kafka's loader does the same for v0
        members.append(MemberRecord(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                    session_timeout_ms, subscription, assignment))
    return GroupRecord(protocol_type, generation_id, protocol_name, leader, state_timestamp_ms, tuple(members))


def _nullable(reader: RecordReader) -> str | None:
    length = reader.take(_I16)
    return None if length < 0 else reader.text(length)


def _blob(reader: RecordReader) -> bytes:
    length = reader.take(_I32)
    if length < 0:
        return b""
    if reader.pos + length > len(reader.data):
        raise OffsetRecordError(f"a group value has {length} bytes at byte {reader.pos}")
    raw = reader.data[reader.pos:reader.pos + length]
    reader.pos += length
    return bytes(raw)
