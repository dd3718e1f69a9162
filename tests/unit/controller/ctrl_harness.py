"""A small harness: a controller on a MemoryStore with brokers that register and heartbeat on command."""

from __future__ import annotations

import random
from collections.abc import Mapping

from insync.config import BrokerConfig
from insync.controller.controller import Controller
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
