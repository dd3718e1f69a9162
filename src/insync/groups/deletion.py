"""DeleteGroups and OffsetDelete, decided: Kafka 4.0's classic-group checks, as pure functions of the group's view.

A group exists on its coordinator when it has members' state (`GroupMembership`) or committed offsets: a consumer
that commits without joining (assign() and commit) makes a "simple" group, which Kafka keeps as an Empty group
without a protocol type. So:
- DeleteGroups (ClassicGroup.validateDeleteGroup): an unknown group is GROUP_ID_NOT_FOUND, one with members
  (PreparingRebalance, CompletingRebalance, Stable) NON_EMPTY_GROUP; an Empty one is deleted with all its offsets.
- OffsetDelete (ClassicGroup.validateOffsetDelete, then OffsetMetadataManager.deleteOffsets): an unknown group is
  GROUP_ID_NOT_FOUND; a group with members is refused NON_EMPTY_GROUP unless it is a consumer group ("consumer"
  protocol type), whose offsets may go for the topics none of its members subscribes to: the others get
  GROUP_SUBSCRIBED_TO_TOPIC. Every other partition asked for is answered NONE, whether it had an offset or not;
  a tombstone is written only for those that had one. Partitions of topics the cluster does not have are answered
  UNKNOWN_TOPIC_OR_PARTITION first (KafkaApis), and an empty group id is INVALID_GROUP_ID (GroupCoordinatorService).

A consumer group's subscriptions are its members' metadata for the chosen protocol, Kafka's
ConsumerProtocolSubscription: int16 version, then the topics as an int32 count of int16-length strings (all
versions start so; later fields are not needed here). Metadata that does not read as one leaves the subscriptions
unknown, and Kafka then treats no topic as subscribed (`subscribedTopics.getOrElse(false)`); so does insync.
Departure: Kafka computes the subscriptions when a rebalance completes, so during one it still reads the last
generation's members; insync reads the current members (a member without metadata for the chosen protocol by
its first one), which during a rebalance spares the topics a joining member subscribes to as well.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.groups.group_metadata import GroupState
from insync.types import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
E = errors.BY_NAME


@dataclass(frozen=True, slots=True)
class GroupView:
    """What the deletion checks read of a group this coordinator knows through its members."""

    state: GroupState
    protocol_type: str
    subscribed_topics: frozenset[str] | None  # None: not a consumer group, or subscriptions that do not read


@dataclass(frozen=True, slots=True)
class OffsetDeletion:
    error: KafkaError  # the group's; NONE when the partitions were decided one by one
    partitions: tuple[tuple[TopicPartition, KafkaError], ...]  # per partition asked for (empty with a group error)
    tombstones: tuple[TopicPartition, ...]  # the partitions whose committed offset goes


def subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None when `metadata` is not one."""
    try:
        version = _I16.unpack_from(metadata, 0)[0]
        count = _I32.unpack_from(metadata, _I16.size)[0]
        if version < 0 or count < 0 or count > len(metadata):
            return None
        position, topics = _I16.size + _I32.size, set()
        for _ in range(count):  # bounded: count <= len(metadata), checked above
            length = _I16.unpack_from(metadata, position)[0]
            position += _I16.size
            if length < 0 or position + length > len(metadata):
                return None
            topics.add(metadata[position:position + length].decode())
            position += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None


def subscribed_topics(protocol_type: str, subscriptions: Iterable[bytes]) -> frozenset[str] | None:
    """Kafka's ClassicGroup.computeSubscribedTopics: the union of the members' topics, for consumer groups only;
    unknown (None) when a member's subscription does not read."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    union: set[str] = set()
    for metadata in subscriptions:  # bounded by the group's members
        topics = subscription_topics(metadata)
        if topics is None:
            return None
        union |= topics
    return frozenset(union)


def group_id_error(group_id: str) -> KafkaError:
    """GroupCoordinatorService's isGroupIdNotEmpty."""
    return E["INVALID_GROUP_ID"] if not group_id else errors.NONE


def delete_group_error(view: GroupView | None, has_offsets: bool) -> KafkaError:
    if view is None:
        return errors.NONE if has_offsets else E["GROUP_ID_NOT_FOUND"]
    return errors.NONE if view.state is GroupState.EMPTY else E["NON_EMPTY_GROUP"]


def plan_offset_delete(view: GroupView | None, committed: frozenset[TopicPartition],
                       asked: Sequence[TopicPartition], exists: Callable[[TopicPartition], bool]) -> OffsetDeletion:
    """The answer to an OffsetDelete of `asked`, and the tombstones to write for it."""
    if view is None and not committed:
        return OffsetDeletion(E["GROUP_ID_NOT_FOUND"], (), ())
    active = view is not None and view.state is not GroupState.EMPTY
    if active and view is not None and view.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return OffsetDeletion(E["NON_EMPTY_GROUP"], (), ())
    subscribed = (view.subscribed_topics if view is not None else None) or frozenset()
    answers: list[tuple[TopicPartition, KafkaError]] = []
    tombstones: list[TopicPartition] = []
    for tp in asked:  # bounded by the request
        if not exists(tp):
            answers.append((tp, E["UNKNOWN_TOPIC_OR_PARTITION"]))
        elif tp.topic in subscribed:
            answers.append((tp, E["GROUP_SUBSCRIBED_TO_TOPIC"]))
        else:
            answers.append((tp, errors.NONE))
            if tp in committed:
                tombstones.append(tp)
    assert len(answers) == len(asked)
    return OffsetDeletion(errors.NONE, tuple(answers), tuple(dict.fromkeys(tombstones)))
