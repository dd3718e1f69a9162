"""`__consumer_offsets` records in Kafka's formats, the partition a group maps to, and the offset cache."""

from __future__ import annotations

import struct

import pytest

from insync.groups.offsets import (
    CommittedOffset,
    OffsetCache,
    OffsetKey,
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from insync.protocol.records import Record
from insync.types import TopicPartition

TP = TopicPartition("orders", 3)


def record(offset: int, key: bytes | None, value: bytes | None) -> Record:
    return Record(offset, 0, key, value, ())


@pytest.mark.parametrize(("group_id", "partition"), [
    ("demo", 1), ("ck", 26), ("my-group", 12), ("console-consumer-12345", 6), ("é€𝄞", 1),
    ("traffic.cg", 29), ("traffic.kpg", 45)])
def test_a_group_maps_to_the_partition_kafka_gives_it(group_id: str, partition: int) -> None:
    # Kafka's Utils.abs(s.hashCode()) % 50. my-group and the last two hash negative: Kafka 4.1 stored the last
    # two's commits in __consumer_offsets partitions 29 and 45, where the hash's low 31 bits give 19 and 3.
    assert partition_for(group_id, 50) == partition


def test_the_lowest_hash_maps_to_partition_zero() -> None:
    # "polygenelubricants" hashes to Integer.MIN_VALUE, whose Math.abs is negative: Kafka's Utils.abs gives 0.
    assert partition_for("polygenelubricants", 50) == 0


def test_key_and_value_are_kafkas_offset_commit_formats() -> None:
    key = encode_key(OffsetKey("g", TP))
    assert key == struct.pack(">hh1sh6si", 1, 1, b"g", 6, b"orders", 3)
    value = encode_value(CommittedOffset(42, 7, "meta", 1_700_000_000_000))
    assert value == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1_700_000_000_000)
    assert decode_key(key) == OffsetKey("g", TP)
    assert decode_value(value) == CommittedOffset(42, 7, "meta", 1_700_000_000_000)


def test_older_value_versions_and_group_metadata_keys_are_read() -> None:
    v1 = struct.pack(">hqh2sqq", 1, 9, 2, b"ab", 123, 456)  # v1 carries an expire timestamp, ignored
    assert decode_value(v1) == CommittedOffset(9, -1, "ab", 123)
    assert decode_key(struct.pack(">hh1s", 2, 1, b"g")) is None  # GroupMetadataKey: no offset in it


@pytest.mark.parametrize(("data", "message"), [
    (struct.pack(">h", 9), "unknown offset key version 9"),
    (struct.pack(">hh", 1, 40) + b"g", "string of 40 bytes"),
    (struct.pack(">h", 1), "ends early"),
])
def test_malformed_keys_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(OffsetRecordError, match=message):
        decode_key(data)


def test_replay_keeps_the_last_commit_and_honours_tombstones() -> None:
    cache = OffsetCache()
    key, other = encode_key(OffsetKey("g", TP)), encode_key(OffsetKey("g", TopicPartition("orders", 4)))
    applied = cache.load(5, [
        record(0, key, encode_value(CommittedOffset(10, -1, "", 1))),
        record(1, b"\x00\x09junk", b""),  # unreadable: skipped, not fatal
        record(2, other, encode_value(CommittedOffset(3, -1, "", 1))),
        record(3, key, encode_value(CommittedOffset(20, -1, "", 2))),
        record(4, other, None),  # tombstone
    ])
    assert applied == 4
    assert cache.offsets("g") == {TP: CommittedOffset(20, -1, "", 2)}
    assert cache.group_ids() == ["g"]


def test_a_late_acknowledgement_never_overwrites_a_newer_commit() -> None:
    cache = OffsetCache()
    key = OffsetKey("g", TP)
    cache.commit(0, 11, key, CommittedOffset(200, -1, "", 2))
    cache.commit(0, 10, key, CommittedOffset(100, -1, "", 1))
    assert cache.get("g", TP) == CommittedOffset(200, -1, "", 2)


def test_unload_forgets_only_that_partitions_groups() -> None:
    cache = OffsetCache()
    cache.commit(1, 0, OffsetKey("a", TP), CommittedOffset(1, -1, "", 1))
    cache.commit(2, 0, OffsetKey("b", TP), CommittedOffset(2, -1, "", 1))
    assert cache.unload(1) == ["a"]
    assert cache.offsets("a") == {}
    assert cache.get("b", TP) == CommittedOffset(2, -1, "", 1)


def test_commits_of_groups_without_members_expire_after_the_retention() -> None:
    cache = OffsetCache()
    other = TopicPartition("orders", 4)
    cache.commit(1, 0, OffsetKey("quiet", TP), CommittedOffset(1, -1, "", 1_000))
    cache.commit(1, 1, OffsetKey("quiet", other), CommittedOffset(1, -1, "", 5_000))
    cache.commit(2, 0, OffsetKey("busy", TP), CommittedOffset(1, -1, "", 1_000))
    expired = cache.expired(now_ms=4_000, retention_ms=3_000, has_members=lambda group: group == "busy")
    assert expired == {1: [OffsetKey("quiet", TP)]}
