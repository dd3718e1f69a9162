"""The pure parts of `__insync_events`: its assignment, each node's partition, the bounded queue."""

from __future__ import annotations

from types import MappingProxyType

from insync.config import BrokerConfig
from insync.events import Event, EventType
from insync.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from insync.server import event_topic
from insync.server.event_topic import EventTopic, assignment, partition_for
from insync.types import BrokerId


def _topic(first_replicas: list[int]) -> TopicImage:
    parts = {p: PartitionRegistration(replicas=(BrokerId(b),), isr=(BrokerId(b),), leader=BrokerId(b),
                                      leader_epoch=0, partition_epoch=0) for p, b in enumerate(first_replicas)}
    return TopicImage("__insync_events", "id", MappingProxyType(parts))


def test_one_partition_per_broker_each_led_first_by_its_broker() -> None:
    assert assignment([3, 1, 2], 3) == ((0, (1, 2, 3)), (1, (2, 3, 1)), (2, (3, 1, 2)))
    assert assignment([5, 7], 3) == ((0, (5, 7)), (1, (7, 5)))  # the factor is at most the brokers


def test_a_node_writes_to_the_partition_it_leads_by_preference_else_id_modulo() -> None:
    topic = _topic([1, 2, 3])
    assert [partition_for(n, topic) for n in (1, 2, 3)] == [0, 1, 2]
    assert partition_for(0, topic) == 0  # the controller
    assert partition_for(7, topic) == 1  # a broker added after the topic was created


def _writer(**values: object) -> EventTopic:
    return EventTopic(BrokerConfig({"node.id": 1, **values}).events, 1, MetadataImage, lambda: "127.0.0.1:1", None,
                      now=lambda: 0)


def _events(count: int) -> list[Event]:
    return [Event(i, 1, EventType.UNDER_REPLICATED_START, "t", 0) for i in range(count)]


def test_the_queue_is_bounded_and_drops_the_oldest() -> None:
    writer = _writer()
    writer.offer(_events(event_topic.EVENTS_TOPIC_PENDING_MAX + 5))
    assert writer.dropped == 5
    assert len(writer._pending) == event_topic.EVENTS_TOPIC_PENDING_MAX
    assert writer._pending[0].ts_ms == 5


def test_turned_off_it_keeps_nothing() -> None:
    writer = _writer(**{"insync.events.topic.enable": False})
    writer.offer(_events(3))
    assert not writer._pending and writer.dropped == 0
