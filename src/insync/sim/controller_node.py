"""The simulated controller node: the real `Controller` core behind the simulated network.

It translates broker messages (`broker.messages`) into controller calls (replica log reports, for unclean
recovery, get no answer), answers with their results, and runs the
controller's timers (`tick` at `next_deadline_ms()`: session expiry and seed 003's propagation check). Whenever
the published metadata offset moves, it pushes the newly published records to every broker (the ZooKeeper-era
UpdateMetadata of seed 003; brokers also fetch with `MetadataFetchRequest` to repair a lost push).
`propagation_times_ms` records when each publication happened, for the isr-propagation scenario.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable

from insync import errors
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
    ReplicaLogReportRequest,
)
from insync.controller.store import MemoryStore
from insync.errors import KafkaException
from insync.events import Event
from insync.limits import METADATA_RECORDS_PER_BATCH_MAX
from insync.sim.network import Network, NodeId
from insync.sim.scheduler import Scheduler, Timer
from insync.types import BrokerEpoch

CONTROLLER_NODE_ID = 0
PUBLICATIONS_REMEMBERED_MAX = 1_000_000


class SimController:
    def __init__(self, config: BrokerConfig, scheduler: Scheduler, network: Network, broker_ids: list[int],
                 sink: Callable[[list[Event]], None], on_step: Callable[[], None] = lambda: None) -> None:
        self._scheduler = scheduler
        self._network = network
        self._broker_ids = broker_ids
        self._sink = sink
        self._on_step: Callable[[], None] = lambda: None
        self.controller = Controller(CONTROLLER_NODE_ID, config, MemoryStore(), scheduler.now_ms,
                                     random.Random(scheduler.rng.getrandbits(64)))
        self._pushed_offset = self.controller.published_offset
        self._timer: Timer | None = None
        self.publications: list[tuple[int, int]] = []  # (time, records published)
        network.register(CONTROLLER, self._on_message)
        self._after()
        self._on_step = on_step  # from now on: the owner is fully built

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.controller.create_topic(name, partitions, replication_factor, configs, self._scheduler.now_ms)
        self._after()

    def _on_message(self, src: NodeId, message: object) -> None:
        now = self._scheduler.now_ms
        reply: object | None = None
        if isinstance(message, BrokerRegistrationRequest):
            reply = self._register(now, message)
        elif isinstance(message, BrokerHeartbeatRequest):
            reply = self._heartbeat(now, message)
        elif isinstance(message, AlterPartitionRequest):
            reply = self._alter_partition(now, message)
        elif isinstance(message, ReplicaLogReportRequest):
            self._report_replica_logs(now, message)
        elif isinstance(message, MetadataFetchRequest):
            records, published = self.controller.records_since(message.from_offset, message.max_records)
            reply = MetadataUpdate(message.correlation_id, tuple(records), published)
        if reply is not None:
            self._network.send(CONTROLLER, src, reply)
        self._after()

    def _register(self, now: int, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        try:
            result = self.controller.register_broker(request.broker_id, f"incarnation-{request.incarnation_id}",
                                                     "sim", 9092, now,
                                                     previous_broker_epoch=request.previous_broker_epoch)
        except KafkaException as exc:
            return BrokerRegistrationResponse(request.correlation_id, exc.error, BrokerEpoch(-1))
        return BrokerRegistrationResponse(request.correlation_id, errors.NONE, BrokerEpoch(result.response))

    def _heartbeat(self, now: int, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        try:
            result = self.controller.heartbeat(request.broker_id, request.broker_epoch, now,
                                               request.metadata_offset, want_shutdown=request.want_shutdown)
        except KafkaException as exc:
            return BrokerHeartbeatResponse(request.correlation_id, exc.error, True, self.controller.published_offset)
        return BrokerHeartbeatResponse(request.correlation_id, errors.NONE, result.response.is_fenced,
                                       self.controller.published_offset, result.response.should_shut_down)

    def _report_replica_logs(self, now: int, request: ReplicaLogReportRequest) -> None:
        with contextlib.suppress(KafkaException):  # from a broker's previous life: its next heartbeat re-registers
            self.controller.report_replica_logs(request.broker_id, request.broker_epoch, request.reports, now)

    def _alter_partition(self, now: int, request: AlterPartitionRequest) -> AlterPartitionResponse:
        try:
            result = self.controller.alter_partition(request.broker_id, request.broker_epoch, request.items, now)
        except KafkaException as exc:
            return AlterPartitionResponse(request.correlation_id, exc.error, ())
        return AlterPartitionResponse(request.correlation_id, errors.NONE, result.response)

    def _tick(self) -> None:
        self._timer = None
        self.controller.tick(self._scheduler.now_ms)
        self._after()

    def _after(self) -> None:
        """Hand events to the sink, push what was published, re-arm the timer."""
        controller = self.controller
        events = controller.drain_events()
        if events:
            self._sink(events)
        if controller.published_offset > self._pushed_offset:
            self._push()
        self._on_step()
        deadline = max(controller.next_deadline_ms(), self._scheduler.now_ms)
        if self._timer is None or self._timer.time_ms != deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._scheduler.at(deadline, self._tick)

    def _push(self) -> None:
        now = self._scheduler.now_ms
        start = self._pushed_offset
        records, published = self.controller.records_since(start, METADATA_RECORDS_PER_BATCH_MAX)
        assert records, (start, published)
        self._pushed_offset = records[-1][0] + 1
        assert len(self.publications) < PUBLICATIONS_REMEMBERED_MAX
        self.publications.append((now, published - start))
        update = MetadataUpdate(0, tuple(records), published)
        for broker in self._broker_ids:
            self._network.send(CONTROLLER, broker, update)
        if self._pushed_offset < published:
            self._push()  # more than one batch's worth published at once
