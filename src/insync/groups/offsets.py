"""Committed consumer offsets: their records in `__consumer_offsets`, and the coordinator's cache of them.

As in Kafka, a group's offsets live in one partition of `__consumer_offsets`, chosen by `partition_for(group_id)`
(Java's `String.hashCode`, so the same partition number as in Kafka), whose leader is the group's coordinator. A
commit is a record in Kafka's formats (`OffsetCommitKey` v1, `OffsetCommitValue` v3) appended with acks=all, so
it survives the coordinator's failure like any record; a tombstone deletes the offset. The cache is rebuilt by
replaying the partition when a broker becomes its leader (`OffsetCache.load`) and updated as commits are
acknowledged; each entry keeps the log offset of its record, so a late acknowledgement never overwrites a newer
commit. The topic is compacted, as in Kafka: the cleaner keeps the last commit of each group and partition.
A commit of a group without members expires `offsets.retention.minutes` after it was made (`expired`): the
coordinator writes its tombstone, which the cleaner drops in turn after `delete.retention.ms`. A group's
membership shares the partition in its own records (`group_records`, key version 2).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from insync.protocol.records import Record
from insync.types import TopicPartition

KEY_VERSION = 1  # OffsetCommitKey; version 2 is GroupMetadataKey (membership, `group_records`)
VALUE_VERSION = 3  # OffsetCommitValue with the leader epoch (KIP-320)
NO_LEADER_EPOCH = -1
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class OffsetRecordError(ValueError):
    """A `__consumer_offsets` record that is not in a format this module reads."""


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions`, with Java's String.hashCode over UTF-16 units. Kafka's
    `Utils.abs` is the absolute value of the signed hash (0 for Integer.MIN_VALUE), not the hash's low 31 bits."""
    assert partitions > 0, partitions
    h = 0
    units = group_id.encode("utf-16-be")
    for i in range(0, len(units), 2):  # bounded by the id's length
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic_partition: TopicPartition


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # NO_LEADER_EPOCH when the client gave none
    metadata: str
    commit_timestamp_ms: int


def _string(value: str) -> bytes:
    raw = value.encode()
    assert len(raw) <= 0x7FFF, "group ids, topic names and metadata are bounded well below int16"
    return _I16.pack(len(raw)) + raw


def encode_key(key: OffsetKey) -> bytes:
    tp = key.topic_partition
    return _I16.pack(KEY_VERSION) + _string(key.group_id) + _string(tp.topic) + _I32.pack(tp.partition)


def encode_value(value: CommittedOffset) -> bytes:
    return (_I16.pack(VALUE_VERSION) + _I64.pack(value.offset) + _I32.pack(value.leader_epoch)
            + _string(value.metadata) + _I64.pack(value.commit_timestamp_ms))


class RecordReader:
    """Reads the big-endian fields of a coordinator record (here and in `transactions.log_records`), raising
    `error` on anything malformed."""

    error: type[ValueError] = OffsetRecordError

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, layout: struct.Struct) -> int:
        if self.pos + layout.size > len(self.data):
            raise self.error(f"{self.what} ends early at byte {self.pos}")
        (value,) = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return int(value)

    def string(self) -> str:
        return self.text(self.take(_I16))

    def text(self, length: int) -> str:
        """The next `length` bytes, as UTF-8."""
        if length < 0 or self.pos + length > len(self.data):
            raise self.error(f"{self.what} has a string of {length} bytes at byte {self.pos}")
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise self.error(f"{self.what} has a string that is not UTF-8") from None

    def count(self) -> int:
        count = self.take(_I32)
        if not 0 <= count <= len(self.data):  # each entry takes at least a byte: a larger count is garbage
            raise self.error(f"{self.what} has an array of {count} entries")
        return count


def decode_key(data: bytes) -> OffsetKey | None:
    """The offset key of a record, or None for a group-metadata record (key version 2), which holds no offset."""
    reader = RecordReader(data, "an offset key")
    version = reader.take(_I16)
    if version == 2:
        return None
    if version not in (0, 1):
        raise OffsetRecordError(f"unknown offset key version {version}")
    group_id, topic = reader.string(), reader.string()
    return OffsetKey(group_id, TopicPartition(topic, reader.take(_I32)))


def decode_value(data: bytes) -> CommittedOffset:
    """Kafka's OffsetCommitValue v0, v1 (expire timestamp, ignored) and v3 (leader epoch)."""
    reader = RecordReader(data, "an offset value")
    version = reader.take(_I16)
    if version not in (0, 1, 3):
        raise OffsetRecordError(f"unsupported offset value version {version}")
    offset = reader.take(_I64)
    epoch = reader.take(_I32) if version == 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    timestamp = reader.take(_I64) if version >= 1 else -1
    return CommittedOffset(offset, epoch, metadata, timestamp)


class OffsetCache:
    """The committed offsets of the groups whose `__consumer_offsets` partitions this broker leads."""

    def __init__(self) -> None:
        # group -> topic partition -> (log offset of the record, the committed offset)
        self._groups: dict[str, dict[TopicPartition, tuple[int, CommittedOffset]]] = {}
        self._partition_of: dict[str, int] = {}  # group -> its __consumer_offsets partition

    def load(self, partition: int, records: Iterable[Record]) -> int:
        """Replay a `__consumer_offsets` partition's records, in log order; returns how many were applied.
        Records this module cannot read are skipped and counted out (Kafka's loader skips unknown keys too)."""
        applied = 0
        for record in records:  # bounded by the partition's retained log
            if record.key is None:
                continue
            try:
                key = decode_key(record.key)
                value = None if record.value is None else decode_value(record.value)
            except OffsetRecordError:
                continue
            if key is not None:
                self._apply(partition, record.offset, key, value)
                applied += 1
        return applied

    def commit(self, partition: int, log_offset: int, key: OffsetKey, value: CommittedOffset | None) -> None:
        """An acknowledged commit (or tombstone) at `log_offset` of `partition`."""
        self._apply(partition, log_offset, key, value)

    def _apply(self, partition: int, log_offset: int, key: OffsetKey, value: CommittedOffset | None) -> None:
        offsets = self._groups.setdefault(key.group_id, {})
        self._partition_of[key.group_id] = partition
        current = offsets.get(key.topic_partition)
        if current is not None and current[0] > log_offset:
            return  # a newer commit is already applied
        if value is None:
            offsets.pop(key.topic_partition, None)
        else:
            offsets[key.topic_partition] = (log_offset, value)

    def unload(self, partition: int) -> list[str]:
        """Forget the groups of a partition this broker no longer leads; returns their ids."""
        gone = [g for g, p in self._partition_of.items() if p == partition]
        for group_id in gone:
            del self._partition_of[group_id]
            self._groups.pop(group_id, None)
        return gone

    def offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return {tp: value for tp, (_, value) in self._groups.get(group_id, {}).items()}

    def get(self, group_id: str, tp: TopicPartition) -> CommittedOffset | None:
        entry = self._groups.get(group_id, {}).get(tp)
        return None if entry is None else entry[1]

    def expired(self, now_ms: int, retention_ms: int, has_members: Callable[[str], bool]) -> dict[int, list[OffsetKey]]:
        """The commits older than `retention_ms` of the groups without members, by partition (Kafka's
        `GroupMetadataManager.cleanupGroupMetadata`, counted from each commit rather than from when the group
        emptied)."""
        found: dict[int, list[OffsetKey]] = {}
        for group_id, offsets in self._groups.items():
            if has_members(group_id):
                continue
            for tp, (_, value) in offsets.items():
                if 0 <= value.commit_timestamp_ms <= now_ms - retention_ms:
                    found.setdefault(self._partition_of[group_id], []).append(OffsetKey(group_id, tp))
        return found

    def group_ids(self) -> list[str]:
        return [g for g, offsets in self._groups.items() if offsets]
