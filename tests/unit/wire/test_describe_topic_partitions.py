from __future__ import annotations

import uuid
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from apis_helpers import TOPIC_ID, client_request, cluster_image, request_entity, wire

from insync import errors
from insync.metadata.image import MetadataImage
from insync.metadata.records import PartitionRecord, TopicRecord
from insync.wire import describe_topic_partitions
from insync.wire.versions import DESCRIBE_TOPIC_PARTITIONS


def describe(image: MetadataImage, *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    topics = tuple(request_entity(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=n) for n in names)
    wire_cursor = None if cursor is None else request_entity(DESCRIBE_TOPIC_PARTITIONS, 0, "Cursor",
                                                             topic_name=cursor[0], partition_index=cursor[1])
    request = client_request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=topics, response_partition_limit=limit,
                             cursor=wire_cursor)
    return wire(describe_topic_partitions.respond(request, image))


def with_elr(image: MetadataImage, topic_id: str, partition: int, elr: tuple[int, ...],
             last_known_elr: tuple[int, ...]) -> MetadataImage:
    topic = image.topics_by_id[topic_id]
    registration = replace(topic.partitions[partition], elr=elr, last_known_elr=last_known_elr)
    partitions = MappingProxyType({**topic.partitions, partition: registration})
    topics = MappingProxyType({**image.topics_by_id, topic_id: replace(topic, partitions=partitions)})
    return replace(image, topics_by_id=topics)


def paged(image: MetadataImage, limit: int) -> list[tuple[str, int]]:
    """Every (topic, partition) of the whole cluster, read page by page as a client follows `next_cursor`."""
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(100):
        body = describe(image, limit=limit, cursor=cursor)
        seen += [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        if body.next_cursor is None:
            return seen
        cursor = (body.next_cursor.topic_name, body.next_cursor.partition_index)
    raise AssertionError("the pages never ended")


def test_named_topics_sorted_with_elr_and_unknown_ones() -> None:
    image = with_elr(cluster_image(), TOPIC_ID, 1, elr=(3,), last_known_elr=())
    body = describe(image, "orders", "nope", "bad/name", "logs")
    assert [(t.name, t.error_code) for t in body.topics] == [
        ("bad/name", errors.INVALID_TOPIC_EXCEPTION.code), ("logs", 0), ("nope", errors.UNKNOWN_TOPIC_OR_PARTITION.code),
        ("orders", 0)]
    logs, orders = body.topics[1], body.topics[3]
    assert orders.topic_id == uuid.UUID(TOPIC_ID) and not orders.is_internal
    assert body.topics[2].topic_id in (None, uuid.UUID(int=0)) and body.topics[2].partitions == ()  # kio reads zero as None
    p0, p1, p2 = orders.partitions
    assert (p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == (
        1, 4, (1, 2, 3), (1, 2, 3), (3,))  # broker 3 is fenced
    assert (p1.isr_nodes, p1.eligible_leader_replicas, p1.last_known_elr) == ((2, 1), (3,), ())
    assert (p2.eligible_leader_replicas, p2.last_known_elr) == ((), ())
    offline = logs.partitions[0]
    assert (offline.error_code, offline.leader_id, offline.isr_nodes, offline.offline_replicas) == (0, -1, (3,), (3,))
    assert body.next_cursor is None


def test_no_topics_named_describes_all_and_reports_nothing_missing() -> None:
    body = describe(cluster_image())
    assert [t.name for t in body.topics] == ["logs", "orders"]
    assert [len(t.partitions) for t in body.topics] == [1, 3]


def many_topics() -> MetadataImage:
    """cluster_image plus "a" (5 partitions) and "z" (2), all on broker 1."""
    image = cluster_image()
    for name, count in (("a", 5), ("z", 2)):
        topic_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
        image = image.replay(TopicRecord(name, topic_id))
        for index in range(count):
            image = image.replay(PartitionRecord(topic_id, index, (1,), (1,), 1, 0, 0))
    return image


def test_pages_cut_topics_at_the_partition_limit_and_resume_at_the_cursor() -> None:
    image = many_topics()
    body = describe(image, limit=3)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics] == [("a", [0, 1, 2])]
    assert (body.next_cursor.topic_name, body.next_cursor.partition_index) == ("a", 3)
    body = describe(image, limit=3, cursor=("a", 3))
    assert [(t.name, len(t.partitions)) for t in body.topics] == [("a", 2), ("logs", 1)]
    assert (body.next_cursor.topic_name, body.next_cursor.partition_index) == ("orders", 0)  # a full page
    everything = [(t, p) for t, count in (("a", 5), ("logs", 1), ("orders", 3), ("z", 2)) for p in range(count)]
    for limit in (1, 2, 3, 4, 11, 2000):
        assert paged(image, limit) == everything, limit


def test_the_limit_is_capped_at_kafkas_2000_and_a_negative_one_answers_nothing() -> None:
    image = cluster_image()
    for index in range(3, 2003):
        image = image.replay(PartitionRecord(TOPIC_ID, index, (1,), (1,), 1, 0, 0))
    body = describe(image, "orders", limit=5000)
    assert len(body.topics[0].partitions) == 2000
    assert (body.next_cursor.topic_name, body.next_cursor.partition_index) == ("orders", 2000)
    empty = describe(image, limit=-1)
    assert (empty.topics, empty.next_cursor) == ((), None)


def test_named_topics_with_a_cursor_start_there_and_must_include_it() -> None:
    image = many_topics()
    body = describe(image, "z", "orders", "a", cursor=("orders", 2))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics] == [("orders", [2]),
                                                                                      ("z", [0, 1])]
    refused = describe(image, "z", "a", cursor=("orders", 0))
    assert [(t.name, t.error_code) for t in refused.topics] == [("z", errors.INVALID_REQUEST.code),
                                                                ("a", errors.INVALID_REQUEST.code)]
