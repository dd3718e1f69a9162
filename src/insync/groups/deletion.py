"""DeleteGroups and OffsetDelete, decided: Kafka 4.0's classic-group checks, as pure functions of the group's view.

A group exists when it has members' state or committed offsets (a consumer that commits without joining makes
a "simple" group, which Kafka keeps as Empty without a protocol type).
- DeleteGroups: an unknown group is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP; an Empty one is
  deleted with all its offsets.
- OffsetDelete: an unknown group is GROUP_ID_NOT_FOUND; a group with members is NON_EMPTY_GROUP unless it is a
  consumer group, whose offsets may go for topics none of its members subscribes to (the others get
  GROUP_SUBSCRIBED_TO_TOPIC). Other partitions answer NONE, tombstoned where they had an offset; unknown topics
  are UNKNOWN_TOPIC_OR_PARTITION first, an empty group id INVALID_GROUP_ID.
Subscriptions are read from the members' ConsumerProtocolSubscription (version, then the topics); metadata that
does not parse subscribes no topic, as in Kafka. Unlike Kafka, which keeps the last generation's subscriptions
during a rebalance, insync reads the current members, which also spares the topics a joining member subscribes to.
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
