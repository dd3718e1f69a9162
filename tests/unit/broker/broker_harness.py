"""A hand-driven cluster for BrokerCore's unit tests: a real controller and brokers, messages delivered in order,
time moved by hand; and the asking of one query of a core."""

from __future__ import annotations

import random
from collections import deque
from typing import TypeVar

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import (
    CompleteAfter,
    DeleteRecordsResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
)
from insync.config import BrokerConfig
from insync.controller.controller import Controller
from insync.controller.messages import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    MetadataFetchRequest,
    MetadataUpdate,
)
from insync.controller.store import MemoryStore
from insync.errors import KafkaException
from insync.protocol.records import build_batch
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import BrokerEpoch, BrokerId, Outgoing, TopicPartition

TP = TopicPartition("t", 0)
START = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = START

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.now


class Harness:
    def __init__(self, config: dict[str, object] | None = None, brokers: int = 2,
                 broker_config: dict[str, object] | None = None) -> None:
        """`config` for the controller and the brokers, `broker_config` for the brokers alone."""
        self.clock = Clock()
        base = {"replica.lag.time.max.ms": 10_000, "min.insync.replicas": brokers, **(config or {})}
        self.controller = Controller(0, BrokerConfig(base), MemoryStore(), START, random.Random(1))
        self.disks = {b: MemoryDisk() for b in range(1, brokers + 1)}
        self.cores: dict[int, BrokerCore] = {}
        self.queue: deque[tuple[int | str, int | str, object]] = deque()
        self.client: list[object] = []
        self.pushed = self.controller.published_offset
        self.reads: list[tuple[int, int, int]] = []  # (due, broker, token)
        for b in self.disks:
            config_b = BrokerConfig({**base, **(broker_config or {}), "node.id": b})
            # with log.dirs among the broker configs, each broker has those dirs under its own root
            dirs = tuple(f"/b{b}{d}" for d in config_b.log_dirs()) if "log.dirs" in (broker_config or {}) else f"/b{b}"
            manager = LogManager.open(dirs, config_b, self.disks[b], self.clock)
            self.cores[b] = BrokerCore(BrokerId(b), config_b, manager, 1, START)
            self._send(b, self.cores[b].start(START))
        self.run(0)

    def _send(self, src: int | str, commands: list[Outgoing | CompleteAfter]) -> None:
        for command in commands:
            if isinstance(command, CompleteAfter):
                assert isinstance(src, int)
                self.reads.append((self.clock.now + command.delay_ms, src, command.token))
            else:
                self.queue.append((src, command.destination, command.message))

    def _controller(self, src: int | str, message: object) -> None:
        now = self.clock.now
        c = self.controller
        reply: object
        if isinstance(message, BrokerRegistrationRequest):
            try:
                epoch = c.register_broker(message.broker_id, f"i{message.incarnation_id}", "h", 1, now).response
                reply = BrokerRegistrationResponse(message.correlation_id, errors.NONE, BrokerEpoch(epoch))
            except KafkaException as exc:
                reply = BrokerRegistrationResponse(message.correlation_id, exc.error, BrokerEpoch(-1))
        elif isinstance(message, BrokerHeartbeatRequest):
            hb = c.heartbeat(message.broker_id, message.broker_epoch, now, message.metadata_offset,
                             offline_log_dirs=message.offline_log_dirs).response
            reply = BrokerHeartbeatResponse(message.correlation_id, errors.NONE, hb.is_fenced, c.published_offset)
        elif isinstance(message, AlterPartitionRequest):
            try:
                results = c.alter_partition(message.broker_id, message.broker_epoch, message.items, now).response
                reply = AlterPartitionResponse(message.correlation_id, errors.NONE, results)
            except KafkaException as exc:
                reply = AlterPartitionResponse(message.correlation_id, exc.error, ())
        else:
            assert isinstance(message, MetadataFetchRequest)
            records, published = c.records_since(message.from_offset, message.max_records)
            reply = MetadataUpdate(message.correlation_id, tuple(records), published)
        self.queue.append((CONTROLLER, src, reply))

    def _push(self) -> None:
        records, published = self.controller.records_since(self.pushed, 10_000)
        if records:
            self.pushed = published
            for b in self.cores:
                self.queue.append((CONTROLLER, b, MetadataUpdate(0, tuple(records), published)))

    def run(self, ms: int, step_ms: int = 10) -> None:
        """Deliver everything (in order), then move time in steps, ticking whatever is due."""
        end = self.clock.now + ms
        for _ in range(100_000):
            self._push()
            if self.queue:
                src, dst, message = self.queue.popleft()
                if dst == CONTROLLER:
                    self._controller(src, message)
                elif isinstance(dst, int):
                    if dst not in self.cores:
                        continue  # a stopped broker: the message is lost
                    self._send(dst, self.cores[dst].handle(self.clock.now, src, message))
                else:
                    self.client.append(message)
                continue
            due = [r for r in self.reads if r[0] <= self.clock.now]
            if due:
                self.reads = [r for r in self.reads if r not in due]
                for _, b, token in due:
                    self._send(b, self.cores[b].complete_read(self.clock.now, token))
                continue
            ticked = False
            for b, core in self.cores.items():
                if core.next_deadline_ms() <= self.clock.now:
                    self._send(b, core.tick(self.clock.now))
                    ticked = True
            if self.controller.next_deadline_ms() <= self.clock.now:
                self.controller.tick(self.clock.now)
                ticked = True
            if ticked:
                continue
            if self.clock.now >= end:
                return
            self.clock.now = min(end, self.clock.now + step_ms)
        raise AssertionError("no quiescence")

    def leader(self) -> BrokerCore:
        reg = self.controller.image.topic("t")
        assert reg is not None
        return self.cores[reg.partitions[0].leader]

    def produce(self, acks: int, correlation: int, records: int = 3) -> None:
        batch = build_batch([(b"k", b"v%d" % i) for i in range(records)])
        self.queue.append(("client", self.leader().broker_id, ProduceRequest(correlation, acks, 30_000, ((TP, batch),))))


def cluster_with_topic(config: dict[str, object] | None = None, broker_config: dict[str, object] | None = None
                       ) -> Harness:
    h = Harness(config, broker_config=broker_config)
    h.run(3_000)
    h.controller.create_topic("t", 1, 2, {}, h.clock.now)
    h.run(1_000)
    return h


CORRELATION_ID = 9


Response = TypeVar("Response", ListOffsetsResponse, OffsetForLeaderEpochResponse, DeleteRecordsResponse,
                   InitProducerIdResponse)


def answer(h: Harness, core: BrokerCore, request: object, kind: type[Response]) -> Response:
    """The one message `core` sends back to the client asking `request`: a `kind` with the request's id."""
    [reply] = core.handle(h.clock.now, "client", request)
    assert isinstance(reply, Outgoing) and reply.destination == "client"
    assert isinstance(reply.message, kind) and reply.message.correlation_id == CORRELATION_ID
    return reply.message


def follower(h: Harness) -> BrokerCore:
    return next(core for core in h.cores.values() if core is not h.leader())


def registered(core: BrokerCore, now_ms: int) -> BrokerCore:
    """`core` started and registered with broker epoch 0, as a controller would answer it; no metadata yet."""
    [registration] = [o.message for o in core.start(now_ms) if isinstance(o.message, BrokerRegistrationRequest)]
    core.handle(now_ms, "controller", BrokerRegistrationResponse(registration.correlation_id, errors.NONE,
                                                                 BrokerEpoch(0)))
    return core
