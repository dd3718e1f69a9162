"""DescribeTopicPartitions (v0, API 75, KIP-966), answered from a `MetadataImage`.

What Metadata answers, plus each partition's ELR and last known ELR, a page at a time, paged as Kafka's
`DescribeTopicPartitionsRequestHandler` does:
- Topics: the named ones, or all; only names at or after the cursor's topic; sorted by name. An unknown named
  topic gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); a cursor naming a topic
  outside the named ones gives every named topic INVALID_REQUEST.
- Partitions: the cursor's topic starts at the cursor's index, the others at 0; at most
  min(`response_partition_limit`, 2000) per answer (Kafka's `max.request.partition.size.limit` default). A topic
  cut short sets `next_cursor` at its first partition left out; a page full at a topic boundary points it at the
  next topic, partition 0 (which may not exist, as in Kafka).
- Per partition: leader (-1 when offline), epoch, replicas, ISR, offline replicas, ELR and last known ELR; the
  error code is always NONE, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.controller.replication_control import check_topic_name
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    ZERO_UUID,
    build,
    check_body,
    code,
    nested,
    response_class,
    wire_uuid,
)
from insync.types import OFFSETS_TOPIC
from insync.wire.versions import DESCRIBE_TOPIC_PARTITIONS

# Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds, whatever is asked.
RESPONSE_PARTITIONS_MAX = 2000


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts (request) or the next one would (response)."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class DescribeQuery:
    topics: tuple[str, ...] | None  # None: every topic
    partition_limit: int
    cursor: Cursor | None


def decode_request(request: DecodedRequest) -> DescribeQuery:
    body = request.body
    check_body(body, DESCRIBE_TOPIC_PARTITIONS)
    cursor = None if body.cursor is None else Cursor(body.cursor.topic_name, int(body.cursor.partition_index))
    names = tuple(t.name for t in body.topics)
    return DescribeQuery(names or None, int(body.response_partition_limit), cursor)


def respond(request: DecodedRequest, image: MetadataImage) -> Any:
    """The page `request` asks for, from `image`."""
    query = decode_request(request)
    cls = response_class(DESCRIBE_TOPIC_PARTITIONS, 0)
    start = "" if query.cursor is None else query.cursor.topic
    if query.topics is None:
        names = sorted(name for name in image.topic_ids_by_name if name >= start)
    else:
        names = sorted({name for name in query.topics if name >= start})
        if query.cursor is not None and query.cursor.topic not in names:
            return build(cls, throttle_time=NO_THROTTLE, next_cursor=None,
                         topics=tuple(_missing(cls, name, errors.INVALID_REQUEST) for name in query.topics))
    topics, next_cursor = _page(cls, image, names, query)
    cursor_cls = nested(cls, "Cursor")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics),
                 next_cursor=None if next_cursor is None else build(
                     cursor_cls, topic_name=next_cursor.topic, partition_index=next_cursor.partition))


def _page(cls: type, image: MetadataImage, names: list[str], query: DescribeQuery) -> tuple[list[Any], Cursor | None]:
    """Kafka's loop: whole topics while the partition budget lasts; a topic cut short ends the page."""
    remaining = min(RESPONSE_PARTITIONS_MAX, query.partition_limit)
    out: list[Any] = []
    for name in names:
        if remaining <= 0:
            # Kafka sets the cursor only when the budget is exactly used up (a negative limit answers nothing).
            return out, (Cursor(name, 0) if remaining == 0 else None)
        topic = image.topic(name)
        if topic is None:
            if query.topics is not None:
                out.append(_missing(cls, name, _unknown_topic_error(name)))
            continue
        first = query.cursor.partition if query.cursor is not None and query.cursor.topic == name else 0
        end = min(len(topic.partitions), first + remaining)
        entity = _topic(cls, image, topic, range(first, end))
        out.append(entity)
        if end < len(topic.partitions):
            return out, Cursor(name, end)
        remaining -= len(entity.partitions)
    assert len(out) <= len(names)
    return out, None


def _unknown_topic_error(name: str) -> KafkaError:
    try:
        check_topic_name(name)
    except KafkaException as exc:
        return exc.error
    return errors.UNKNOWN_TOPIC_OR_PARTITION


def _missing(cls: type, name: str, error: KafkaError) -> Any:
    # Kafka's error response to an invalid request calls no topic internal; an unknown topic is named as it is.
    internal = name == OFFSETS_TOPIC and error is not errors.INVALID_REQUEST
    return build(nested(cls, "DescribeTopicPartitionsResponseTopic"), error_code=code(error), name=name,
                 topic_id=ZERO_UUID, is_internal=internal, partitions=())


def _topic(cls: type, image: MetadataImage, topic: TopicImage, indexes: range) -> Any:
    partition_cls = nested(cls, "DescribeTopicPartitionsResponsePartition")
    partitions = tuple(_partition(partition_cls, image, index, topic.partitions[index])
                       for index in indexes if index in topic.partitions)
    return build(nested(cls, "DescribeTopicPartitionsResponseTopic"), error_code=code(errors.NONE),
                 name=topic.name, topic_id=wire_uuid(topic.topic_id), is_internal=topic.name == OFFSETS_TOPIC,
                 partitions=partitions)


def _partition(cls: type, image: MetadataImage, index: int, reg: PartitionRegistration) -> Any:
    offline = tuple(r for r in reg.replicas if r not in image.brokers or image.brokers[r].fenced)
    return build(cls, error_code=code(errors.NONE), partition_index=index, leader_id=reg.leader,
                 leader_epoch=reg.leader_epoch, replica_nodes=reg.replicas, isr_nodes=reg.isr,
                 eligible_leader_replicas=reg.elr, last_known_elr=reg.last_known_elr, offline_replicas=offline)
