"""A small harness: a controller on a MemoryStore with brokers that register and heartbeat on command, and the
steps several controller tests share."""

from __future__ import annotations

import random
from collections.abc import Mapping

from insync import errors
from insync.config import BrokerConfig
from insync.controller.controller import Controller
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.controller.store import MemoryStore, MetadataStore
from insync.events import Event

CONTROLLER_ID = 100
T0 = 1_000_000


class Harness:
    def __init__(self, overrides: Mapping[str, object] | None = None, store: MetadataStore | None = None,
                 seed: int = 7) -> None:
        self.config = BrokerConfig({"node.id": CONTROLLER_ID, **(overrides or {})})
        self.store = store or MemoryStore()
        self.now = T0
        self.controller = Controller(CONTROLLER_ID, self.config, self.store, self.now, random.Random(seed))
        self.epochs: dict[int, int] = {}
        self.events: list[Event] = []

    def advance(self, ms: int) -> None:
        self.now += ms

    def register(self, broker_id: int, incarnation: str | None = None, clean: bool = True) -> int:
        """Register `broker_id`; `clean`: its last life ended with a clean shutdown (it names its last epoch)."""
        previous_epoch = self.epochs.get(broker_id, -1) if clean else -1
        result = self.controller.register_broker(broker_id, incarnation or f"inc-{broker_id}", "127.0.0.1",
                                                 9000 + broker_id, self.now, previous_broker_epoch=previous_epoch)
        self.epochs[broker_id] = result.response
        return result.response

    def heartbeat(self, broker_id: int, **flags: bool):  # type: ignore[no-untyped-def]
        offset = self.controller.published_offset  # a broker that has read everything published
        return self.controller.heartbeat(broker_id, self.epochs[broker_id], self.now, offset, **flags).response

    def start(self, *broker_ids: int) -> None:
        """Register and unfence brokers."""
        for b in broker_ids:
            self.register(b)
        for b in broker_ids:
            assert not self.heartbeat(b).is_fenced

    def heartbeat_all(self, *broker_ids: int) -> None:
        for b in broker_ids:
            self.heartbeat(b)

    def drain(self) -> list[Event]:
        events = self.controller.drain_events()
        self.events.extend(events)
        return events

    def partition(self, topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
        image = self.controller.image
        t = image.topic(topic)
        assert t is not None
        return t.partitions[partition]

    def topic_id(self, topic: str) -> str:
        t = self.controller.image.topic(topic)
        assert t is not None
        return t.topic_id


SESSION_MS = 9000  # broker.session.timeout.ms default


def set_isr(h: Harness, topic: str, isr: tuple[int, ...], partition: int = 0) -> AlterPartitionDataResult:
    reg = h.partition(topic, partition)
    item = AlterPartitionData(h.topic_id(topic), partition, reg.leader_epoch, reg.partition_epoch, isr)
    result = h.controller.alter_partition(reg.leader, h.epochs[reg.leader], [item], h.now).response[0]
    assert result.error is errors.NONE, result
    return result


def expire(h: Harness, dead: set[int], live: tuple[int, ...]) -> None:
    """Let `dead` brokers' sessions run out while `live` ones keep heartbeating."""
    for _ in range(SESSION_MS // 1000 + 1):
        h.advance(1000)
        h.heartbeat_all(*live)
        h.controller.tick(h.now)
    assert all(h.controller.image.brokers[b].fenced for b in dead)


# Kafka 3.x's unclean election (the first live replica, at once): unclean recovery off. With a recovery strategy
# the election waits for the replicas' log reports (test_unclean_recovery.py).
RECOVERY_OFF = {"unclean.recovery.strategy": "None"}


def three_broker_topic(overrides: Mapping[str, object] | None = None,
                       topic_configs: Mapping[str, object] | None = None) -> Harness:
    h = Harness(overrides)
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 3, topic_configs or {}, h.now)
    return h


def below_min_isr() -> tuple[Harness, int]:
    """A topic with min.insync.replicas=2 whose ISR is down to its leader, the other two replicas in its ELR."""
    h = three_broker_topic({"min.insync.replicas": 2})
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    assert len(h.partition("t").elr) == 2
    return h, leader
