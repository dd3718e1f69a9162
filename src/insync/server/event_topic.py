"""`__insync_events`: every node's replication-health events, also as records of an internal topic.

`events.jsonl` stays the record of a node's events; this copy is for readers that cannot reach the node's disk
(`insync monitor`). Each record is one `events.jsonl` line, keyed by node id, timestamped with the event's time,
so a reader's event-time watermark follows the events and not their delivery. The topic has one partition per
broker registered at creation, each led by preference by one broker, which appends there (acks=1), so its
writes stay local and a paused broker holds up no other's events; other nodes use `node id % partitions`. The
first broker to find it missing asks the controller to create it (`insync.events.topic.*` settings). Writing is
off the request path: `offer` queues events (bounded, the oldest dropped and counted) and `run` hands them to a
librdkafka producer every PUBLISH_INTERVAL_S. `insync.events.topic.enable=false` turns all of this off. Each node
also sends a `heartbeat` record (not an event) every HEARTBEAT_INTERVAL_MS, so a reader's event time follows the
cluster's clock when nothing happens and stops when the cluster stops: a shut-down cluster raises no duration
alerts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaException, Producer

from insync import errors
from insync.config import EventsTopicConfig
from insync.events import SCHEMA_VERSION, Event
from insync.metadata.image import MetadataImage, TopicImage
from insync.server.client import FailoverConnection
from insync.types import EVENTS_TOPIC
from insync.wire import topics
from insync.wire.internal import NewTopic

log = logging.getLogger("insync.events")

EVENTS_TOPIC_PENDING_MAX = 10_000  # events waiting for the producer; the oldest go first past it
PRODUCER_QUEUE_MAX = 10_000  # librdkafka's queue.buffering.max.messages
PUBLISH_INTERVAL_S = 0.1
CREATE_TIMEOUT_S = 10.0
CREATE_WAIT_S = 10.0  # how long the first broker waits for replication-factor brokers before creating it anyway
HEARTBEAT_INTERVAL_MS = 500
HEARTBEAT = "heartbeat"
CLOSE_FLUSH_S = 1.0  # a stopping node waits at most this for its last events to be delivered
DELIVERY_TIMEOUT_MS = 30_000


def heartbeat(node_id: int, now_ms: int) -> bytes:
    """The record a node sends every HEARTBEAT_INTERVAL_MS (not an event: events.jsonl never has it)."""
    return json.dumps({"v": SCHEMA_VERSION, "ts_ms": now_ms, "broker": node_id, "type": HEARTBEAT},
                      separators=(",", ":")).encode()


def assignment(broker_ids: Iterable[int], replication_factor: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """One partition per broker: partition `p` has the `p`-th broker (id order) first, then the next ones."""
    ids = sorted(broker_ids)
    assert ids and replication_factor >= 1, (ids, replication_factor)
    factor = min(replication_factor, len(ids))
    return tuple((p, tuple(ids[(p + i) % len(ids)] for i in range(factor))) for p in range(len(ids)))


def partition_for(node_id: int, topic: TopicImage) -> int:
    """The partition `node_id` leads by preference, else `node_id % partitions`."""
    assert topic.partitions, topic
    for index, registration in sorted(topic.partitions.items()):
        if registration.replicas and registration.replicas[0] == node_id:
            return index
    return node_id % len(topic.partitions)


class EventTopic:
    """One node's writer to `__insync_events`. `controller` is given on brokers only: they create the topic.
    `client` are the producer's security settings (librdkafka's names) on a secured cluster. `now` is the node's
    steady time, the events' own clock, which heartbeats follow."""

    def __init__(self, config: EventsTopicConfig, node_id: int, image: Callable[[], MetadataImage],
                 bootstrap: Callable[[], str], controller: FailoverConnection | None,
                 client: Mapping[str, str] | None = None, *, now: Callable[[], int]) -> None:
        self.enabled = config.enable
        self._config = config
        self._node_id = node_id
        self._image = image
        self._bootstrap = bootstrap
        self._client = dict(client or {})
        self._controller = controller
        self._pending: deque[Event] = deque()
        self._producer: Producer | None = None
        self.dropped = 0  # events never handed to the producer (queue full), or that it failed to deliver
        self._creating = False
        self._first_try_s = 0.0  # when this node first saw a registered broker and no topic
        self._now = now
        self._next_heartbeat_ms = 0

    def offer(self, events: list[Event]) -> None:
        if not self.enabled or not events:
            return
        self._pending.extend(events)
        overflow = len(self._pending) - EVENTS_TOPIC_PENDING_MAX
        for _ in range(max(0, overflow)):  # bounded by the overflow
            self._pending.popleft()
        if overflow > 0:
            self.dropped += overflow
            log.warning("__insync_events: %d events dropped (%d so far): the producer cannot keep up", overflow,
                        self.dropped)

    async def run(self, stop: asyncio.Event) -> None:
        while self.enabled and not stop.is_set():
            try:
                await self._publish()
            except KafkaException as exc:
                log.warning("__insync_events: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), PUBLISH_INTERVAL_S)

    async def _publish(self) -> None:
        topic = self._image().topic(EVENTS_TOPIC)
        if topic is None or not topic.partitions:
            if self._controller is not None and not self._creating:
                await self._create()
            return
        if self._producer is None:
            self._producer = Producer(self._producer_config())
        partition = partition_for(self._node_id, topic)
        key = str(self._node_id).encode()
        while self._pending:  # bounded by EVENTS_TOPIC_PENDING_MAX
            event = self._pending[0]
            try:
                self._producer.produce(EVENTS_TOPIC, event.to_json().encode(), key, partition=partition,
                                       timestamp=event.ts_ms, on_delivery=self._delivered)
            except BufferError:
                break  # librdkafka's queue is full: the rest waits for the next round
            self._pending.popleft()
        now_ms = self._now()
        if now_ms >= self._next_heartbeat_ms:
            self._next_heartbeat_ms = now_ms + HEARTBEAT_INTERVAL_MS
            with contextlib.suppress(BufferError):  # a full queue: the next heartbeat will do
                self._producer.produce(EVENTS_TOPIC, heartbeat(self._node_id, now_ms), key, partition=partition,
                                       timestamp=now_ms)
        self._producer.poll(0)

    def _producer_config(self) -> dict[str, object]:
        return {**self._client, "bootstrap.servers": self._bootstrap(), "acks": 1, "linger.ms": 20, "enable.idempotence": False,
                "queue.buffering.max.messages": PRODUCER_QUEUE_MAX, "message.timeout.ms": DELIVERY_TIMEOUT_MS,
                "client.id": f"insync-events-{self._node_id}", "logger": log}

    def _delivered(self, error: object, _message: object) -> None:
        if error is not None:
            self.dropped += 1
            log.info("__insync_events: an event was not delivered: %s", error)

    async def _create(self) -> None:
        assert self._controller is not None
        live = [b.broker_id for b in self._image().brokers.values() if b.is_eligible]
        if not live:
            return
        self._first_try_s = self._first_try_s or time.monotonic()
        factor = self._config.replication_factor
        waited_s = time.monotonic() - self._first_try_s
        if len(live) < factor and waited_s < CREATE_WAIT_S:
            return  # the brokers of a cluster start together: give the others a moment to register
        configs = (("retention.ms", str(self._config.retention_ms)),)
        new = NewTopic(EVENTS_TOPIC, len(live), min(factor, len(live)), configs, assignment(live, factor))
        self._creating = True
        try:
            response = await self._controller.request(topics.create_topics_request((new,), int(CREATE_TIMEOUT_S * 1000)),
                                                      CREATE_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("Could not create %s: %s", EVENTS_TOPIC, exc or "timeout")
            return
        finally:
            self._creating = False
        for result in response.topics:
            if int(result.error_code) not in (0, errors.TOPIC_ALREADY_EXISTS.code):
                log.warning("Could not create %s: %s %s", EVENTS_TOPIC, errors.by_code(int(result.error_code)).name,
                            result.error_message or "")

    async def close(self) -> None:
        """Publish what is queued and wait (CLOSE_FLUSH_S at most) for its delivery. Asynchronous, never
        `Producer.flush`: the node's own listener, on this event loop, may be what the producer is waiting for."""
        if self._producer is None:
            return
        with contextlib.suppress(KafkaException):
            await self._publish()
        deadline = time.monotonic() + CLOSE_FLUSH_S
        while len(self._producer) and time.monotonic() < deadline:  # bounded by the deadline
            self._producer.poll(0)
            await asyncio.sleep(PUBLISH_INTERVAL_S / 10)
        self._producer = None
