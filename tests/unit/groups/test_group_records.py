"""A group's membership as Kafka's GroupMetadataKey/GroupMetadataValue records: written when a rebalance ends,
and restored by the coordinator that takes the group over, whose members then carry on with their generation."""

from __future__ import annotations

import struct

import pytest
from membership_helpers import SESSION_MS, stable_group, state, sync, sync_result

from insync import errors
from insync.groups.group_records import (
    GroupRecord,
    MemberRecord,
    decode_group_value,
    encode_group_key,
    encode_group_value,
    group_of_key,
)
from insync.groups.membership import GroupMembership
from insync.groups.messages import Heartbeat, LeaveGroup
from insync.groups.offsets import OffsetKey, OffsetRecordError, encode_key
from insync.types import TopicPartition

RECORD = GroupRecord("consumer", 7, "range", "m-1", 1_000, (
    MemberRecord("m-1", None, "client-a", "/127.0.0.1", 30_000, 10_000, b"sub-a", b"assigned-a"),
    MemberRecord("m-2", "static-b", "client-b", "/127.0.0.2", 30_000, 10_000, b"sub-b", b""),
))


def test_a_record_reads_back_as_written_in_kafkas_v3_layout() -> None:
    value = encode_group_value(RECORD)
    assert decode_group_value(value) == RECORD
    # Kafka's field order: version, protocol type, generation, protocol, leader, state timestamp, members.
    assert value[:2] == struct.pack(">h", 3) and value[2:12] == struct.pack(">h", 8) + b"consumer"
    assert value[12:16] == struct.pack(">i", 7)
    assert group_of_key(encode_group_key("g")) == "g"
    assert group_of_key(encode_key(OffsetKey("g", TopicPartition("t", 0)))) is None  # an offset commit's key


def test_an_empty_group_and_older_versions_read() -> None:
    empty = GroupRecord("consumer", 3, None, None, 5, ())
    assert decode_group_value(encode_group_value(empty)) == empty
    v0 = (struct.pack(">h", 0) + struct.pack(">h", 8) + b"consumer" + struct.pack(">i", 2) + struct.pack(">h", 5)
          + b"range" + struct.pack(">h", 1) + b"m" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"m"
          + struct.pack(">h", 1) + b"c" + struct.pack(">h", 1) + b"h" + struct.pack(">i", 6_000)
          + struct.pack(">i", 1) + b"s" + struct.pack(">i", 0))
    (member,) = decode_group_value(v0).members
    assert member.rebalance_timeout_ms == member.session_timeout_ms == 6_000 and member.subscription == b"s"


@pytest.mark.parametrize("data", [b"", struct.pack(">h", 4), encode_group_value(RECORD)[:-3],
                                  struct.pack(">h", 3) + struct.pack(">h", 50) + b"x"])
def test_a_damaged_or_unknown_value_is_refused_by_name(data: bytes) -> None:
    with pytest.raises(OffsetRecordError, match="group value"):
        decode_group_value(data)


def test_a_rebalance_end_is_recorded_once_with_the_leaders_assignment() -> None:
    gm = GroupMembership(seed=7, initial_rebalance_delay_ms=0)
    a, b, generation = stable_group(gm)
    (group_id, recorded_generation, record), = gm.take_records(2_000)
    assert (group_id, recorded_generation, record.generation_id) == ("g", generation, generation)
    assert record.leader == a and [(m.member_id, m.assignment) for m in record.members] == [(a, b"A"), (b, b"B")]
    assert gm.take_records(2_000) == []
    gm.leave(3_000, LeaveGroup("g", ((a, None), (b, None))))
    gm.tick(3_000)
    (_, empty_generation, empty), = gm.take_records(3_000)  # Empty at the next generation
    assert empty_generation == generation + 1 and empty.members == () and empty.protocol_name is None


def test_a_restored_group_carries_on_with_its_generation_and_its_sessions_run_from_the_restore() -> None:
    old = GroupMembership(seed=7, initial_rebalance_delay_ms=0)
    a, b, generation = stable_group(old)
    ((_, _, record),) = old.take_records(0)
    new = GroupMembership(seed=8, initial_rebalance_delay_ms=0)
    assert new.restore(50_000, "g", record) and not new.restore(50_000, "g", record)
    assert state(new) == "Stable"
    assert new.validate_commit("g", generation, a, None) is errors.NONE  # a transaction's commit passes
    assert new.validate_commit("g", generation - 1, a, None) is errors.ILLEGAL_GENERATION
    assert new.heartbeat(50_000 + SESSION_MS - 1, Heartbeat("g", generation, a, None)) is errors.NONE
    token, out = sync(new, 50_001, b, generation)
    assert sync_result(out, token).assignment == b"B"
    new.tick(50_001 + SESSION_MS)  # b stopped heartbeating: its session ran out, so a rebalance starts
    assert state(new) == "PreparingRebalance"
