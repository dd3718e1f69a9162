"""The broker process: a sans-IO `BrokerCore` on an asyncio loop, behind the Kafka listener.

Requests arrive through the `Listener` and are answered by `BrokerApis` (`server.broker_apis`); those the core
answers are fed to it here with a source address unique to the request (`c<n>`), whose `Outgoing` answer resolves
the request's future. Everything else the core emits is carried out here: `Outgoing` to `CONTROLLER` or a broker
id becomes a Kafka request on a `KafkaConnection` whose answer goes back into the core (a lost connection fails the
fetch, so the fetcher backs off); `CompleteAfter(ms, token)`, a follower read reported slow (seed 000), completes
`ms` later on the loop without stalling anything else. A timer task calls `core.tick` at `core.next_deadline_ms()`;
a metadata task long-polls the controller's `__cluster_metadata` so leadership changes arrive at once. Events go
to `events.jsonl` after every core call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import random
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import Any

from insync.broker.controller_channel import (
    METADATA_POLL_FIRST_CORRELATION,
    METADATA_POLL_RETRY_MS,
    METADATA_POLL_WAIT_MS,
)
from insync.broker.core import BrokerCore
from insync.broker.messages import CompleteAfter
from insync.clock import Clock, SystemClock
from insync.config import BrokerConfig, ConfigError
from insync.controller.messages import (
    CONTROLLER,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    MetadataFetchRequest,
    ReplicaLogReportRequest,
)
from insync.errors import KafkaException
from insync.faults import POLL_INTERVAL_MS, FaultSpec, read_faults
from insync.protocol.codec import DecodedRequest
from insync.replication.messages import FetchRequest
from insync.security.listeners import Endpoint, broker_listeners, controller_names
from insync.security.scram import ScramCredential, ScramMechanism
from insync.server.acceptor import ConnectionQuotas
from insync.server.access_gate import AccessGate
from insync.server.broker_apis import BrokerApis, Coordinators
from insync.server.cleaner_processes import CleanerProcesses
from insync.server.client import FailoverConnection, KafkaConnection
from insync.server.event_log import EventLog
from insync.server.event_topic import EventTopic
from insync.server.group_coordinator import GroupCoordinator
from insync.server.halt import Halter
from insync.server.metrics import MetricsSnapshot, NodeMetrics, snapshot
from insync.server.request_queue import RequestQueue
from insync.server.role import (
    MeteredDispatcher,
    client_sasl_for,
    client_tls_for,
    librdkafka_settings,
    make_listener,
    steady_now,
)
from insync.server.session import Session
from insync.server.topic_creation import TopicCreator
from insync.server.txn_coordinator import TransactionCoordinator
from insync.storage.log_manager import LogManager
from insync.storage.power_loss import open_disk
from insync.types import BrokerId, Outgoing
from insync.wire import controller_apis, fetch, metadata_log, replica_log_report, versions

log = logging.getLogger("insync.broker")

REQUEST_TIMEOUT_MS = 60_000
PEER_TIMEOUT_S = 30.0
TIMER_MAX_MS = 1000
SHUTDOWN_DEADLINE_S = 5.0
CONTROLLED_SHUTDOWN_POLL_S = 0.02
TASKS_MAX = 10_000
VERSION_FETCH = 12
VERSION_FOLLOWER_FETCH = 15  # the first with ReplicaState{ReplicaId, ReplicaEpoch}: a follower's broker epoch
VERSION_REGISTRATION = 3
VERSION_HEARTBEAT = 1
VERSION_ALTER = 3


class BrokerNode(MeteredDispatcher):
    api_versions = versions.BROKER_API_VERSIONS

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._now = steady_now(self.clock)
        self.broker_id = BrokerId(config.node.node_id)
        # DescribeLogDirs names them so, as Kafka; the first also holds what is not a partition's (events)
        self.log_dirs = tuple(str(Path(d).absolute()) for d in config.log_dirs())
        self.log_dir = self.log_dirs[0]
        self.disk = open_disk(self.log_dir, config.storage.power_loss_journal)
        self.cleaners = CleanerProcesses(config.cleaner, self.disk)
        self.log_manager = LogManager.open(self.log_dirs, config, self.disk, self.clock, self.cleaners)
        self.core = BrokerCore(self.broker_id, config, self.log_manager, random.getrandbits(62), self._now())
        self.endpoints = broker_listeners(config.listeners)
        quotas = ConnectionQuotas.from_config(config.sockets)
        # Kafka protects the inter-broker listener from max.connections when there are others for clients
        protected = self.endpoints.inter_broker.name if len(self.endpoints.bound) > 1 else None
        self.request_queue = RequestQueue(config.sockets.queued_max_requests, config.sockets.queued_max_request_bytes)
        self.listeners = [make_listener(self, endpoint, config, quotas, self.request_queue, endpoint.name == protected)
                          for endpoint in self.endpoints.bound]
        controller_listener = controller_names(config.listeners)[0]
        self.controller = FailoverConnection(
            _controller_addresses(config), client_id=f"broker-{self.broker_id}",
            tls=client_tls_for(config, controller_listener, self.endpoints.controller_protocol),
            sasl=client_sasl_for(config, controller_listener, self.endpoints.controller_protocol, to_controller=True))
        inter_broker = self.endpoints.inter_broker
        self._peer_tls = client_tls_for(config, inter_broker.name, inter_broker.security_protocol)
        self._peer_sasl = client_sasl_for(config, inter_broker.name, inter_broker.security_protocol,
                                          to_controller=False)
        # A controller that does not answer within a broker session is not the active one any more (it may be a
        # paused process whose socket still accepts): give up on it then, and try the next voter.
        self._controller_timeout_s = min(PEER_TIMEOUT_S, config.lifecycle.session_timeout_ms / 1000)
        # replica.socket.timeout.ms: a follower fetch unanswered for this long is given up and its connection
        # dropped (config checks it is at least replica.fetch.wait.max.ms, the time a fetch may park)
        self._fetch_timeout_s = config.replication.fetch.request_timeout_ms / 1000
        self.peers: dict[int, KafkaConnection] = {}
        self.event_log = EventLog(self.log_dir)
        self.event_topic = EventTopic(config.events, self.broker_id, lambda: self.core.metadata.image,
                                      self._inter_broker_address, self.controller,
                                      librdkafka_settings(config, inter_broker, to_controller=False),
                                      now=self._now)
        self.metrics = NodeMetrics(self._snapshot)
        self.halter = Halter()
        # A client request's answer from the core, and when to give up on it (`_expire_waiters`).
        self._waiters: dict[tuple[object, int], tuple[asyncio.Future[object], int]] = {}
        self._expiry_due_ms = 0
        self._sources = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._timer_due_ms = 0  # when `_run_timers` next ticks unless woken: at once, until it first runs
        self._published_offset = 0
        self._faults = FaultSpec()
        self.groups = GroupCoordinator(config.groups, self.core, self.log_manager, self.controller, self.call,
                                       self._now)
        self.markers: dict[int, KafkaConnection] = {}  # to partition leaders, apart from the fetchers'
        self.transactions = TransactionCoordinator(config.transactions, self.core, self.log_manager, self.controller,
                                                   self.call, self._now, self._marker_peer, self.groups)
        self.topic_creator = TopicCreator(config.auto_create, self.controller, self._spawn, self.groups.create_offsets_topic)
        gate = AccessGate(config, self.broker_id, self.event_log, self._now, lambda: self.core.metadata.image)
        self.apis = BrokerApis(config, self, gate, Coordinators(self.groups, self.transactions), self.topic_creator,
                               self.controller, self._controller_timeout_s)

    # Feeding the core ------------------------------------------------------------------------------------

    def _feed(self, commands: list[Any]) -> None:
        """Carry out what the core asked for, record its events, and re-arm the timer."""
        for command in commands:
            if isinstance(command, CompleteAfter):
                asyncio.get_running_loop().call_later(command.delay_ms / 1000, self._complete_read, command.token)
                continue
            assert isinstance(command, Outgoing), command
            waiter = self._waiters.pop((command.destination, getattr(command.message, "correlation_id", -1)), None)
            if waiter is not None:
                if not waiter[0].done():
                    waiter[0].set_result(command.message)
            elif command.destination == CONTROLLER:
                self._spawn(self._to_controller(command.message))
            elif isinstance(command.destination, int):
                self._spawn(self._to_broker(command.destination, command.message))
        events = self.core.drain_events()
        if events:
            self.event_log.write(events)
            self.event_topic.offer(events)
        if self.core.next_deadline_ms() < self._timer_due_ms:
            self._wake.set()  # the timer sleeps past the core's new deadline: let it sleep less
        self.halter.check(self.core)

    def _complete_read(self, token: int) -> None:
        self._feed(self.core.complete_read(self._now(), token))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        if len(self._tasks) >= TASKS_MAX:
            coroutine.close()
            log.warning("Dropping an outgoing request: %d already in flight", len(self._tasks))
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def call(self, message: Any) -> Awaitable[Any]:
        """Hand a client's request to the core now; the awaitable is the core's answer to it (TimeoutError after
        REQUEST_TIMEOUT_MS, `_expire_waiters`)."""
        source = f"c{next(self._sources)}"
        key = (source, message.correlation_id)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        now_ms = self._now()
        self._waiters[key] = (future, now_ms + REQUEST_TIMEOUT_MS)
        try:
            self._feed(self.core.handle(now_ms, source, message))
        except BaseException:
            self._waiters.pop(key, None)
            raise
        return self._answer(key, future)

    async def _answer(self, key: tuple[object, int], future: asyncio.Future[object]) -> Any:
        try:
            return await future
        finally:
            self._waiters.pop(key, None)

    def send(self, message: Any) -> None:
        """Hand a client's request to the core without waiting for an answer (an acks=0 produce)."""
        self._feed(self.core.handle(self._now(), f"c{next(self._sources)}", message))

    def _expire_waiters(self, now_ms: int) -> None:
        """Fail the requests the core has not answered in REQUEST_TIMEOUT_MS. A guard only: the core answers every
        request by its own timeout (a produce's, a fetch's wait). One sweep a second, from the timer task, instead
        of a timer per request: `asyncio.wait_for` cost a future, a callback and a timer handle for each of the
        four or five requests an acks=all record brings a leader."""
        if now_ms < self._expiry_due_ms:
            return
        self._expiry_due_ms = now_ms + TIMER_MAX_MS
        for future, deadline_ms in list(self._waiters.values()):  # bounded by the requests in flight
            if deadline_ms <= now_ms and not future.done():
                future.set_exception(TimeoutError(f"no answer from the core in {REQUEST_TIMEOUT_MS} ms"))

    # Outgoing --------------------------------------------------------------------------------------------

    async def _to_controller(self, message: Any) -> None:
        try:
            if isinstance(message, BrokerRegistrationRequest):
                # Unknown ("") until the first metadata fetch; from then on the controller checks it.
                cluster_id = self.core.metadata.image.cluster_id or ""
                body = controller_apis.registration_request(message, VERSION_REGISTRATION, cluster_id,
                                                            self._advertised())
                reply: Any = controller_apis.registration_response_from_wire(
                    await self.controller.request(body, self._controller_timeout_s), message.correlation_id)
            elif isinstance(message, BrokerHeartbeatRequest):
                body = controller_apis.heartbeat_request(message, VERSION_HEARTBEAT)
                reply = controller_apis.heartbeat_response_from_wire(
                    await self.controller.request(body, self._controller_timeout_s), message.correlation_id,
                    self._published_offset)
            elif isinstance(message, AlterPartitionRequest):
                body = controller_apis.alter_partition_request(message, VERSION_ALTER)
                reply = controller_apis.alter_partition_response_from_wire(
                    await self.controller.request(body, self._controller_timeout_s), message)
            elif isinstance(message, ReplicaLogReportRequest):
                await self.controller.request(replica_log_report.encode_request(message), self._controller_timeout_s)
                return  # nothing to feed back: the next heartbeat reports again
            else:
                assert isinstance(message, MetadataFetchRequest), message
                reply = await self._fetch_metadata(message.correlation_id, 0)
        except (ConnectionError, OSError, TimeoutError, KafkaException) as exc:
            log.debug("Controller request %s failed: %s", type(message).__name__, exc)
            return  # the channel times the request out and retries
        self._feed(self.core.handle(self._now(), CONTROLLER, reply))

    async def _fetch_metadata(self, correlation_id: int, max_wait_ms: int) -> Any:
        body = metadata_log.fetch_request(correlation_id, self.broker_id, self.core.metadata.applied_offset,
                                          VERSION_FETCH, max_wait_ms)
        response = await self.controller.request(body, self._controller_timeout_s + max_wait_ms / 1000)
        update = metadata_log.update_from_fetch(response, correlation_id, self.broker_id)
        self._published_offset = max(self._published_offset, update.published_offset)
        return update

    async def _to_broker(self, broker_id: int, message: Any) -> None:
        assert isinstance(message, FetchRequest), message
        image = self.core.metadata.image
        try:
            if self._faults.delay_ms:
                await asyncio.sleep(self._faults.delay_ms / 1000)
            connection = self._peer(broker_id)
            body = fetch.encode_request(message, VERSION_FOLLOWER_FETCH, image)
            response = fetch.decode_response(await connection.request(body, self._fetch_timeout_s), message, image)
        except (ConnectionError, OSError, TimeoutError, ConfigError, KafkaException) as exc:
            log.debug("Fetch from broker %d failed: %s", broker_id, exc)
            self._feed(self.core.fetch_failed(self._now(), BrokerId(broker_id), message.correlation_id))
            return
        self._feed(self.core.handle(self._now(), broker_id, response))

    def _advertised(self) -> list[Endpoint]:
        """The advertised listeners, a port of 0 (bind any) replaced by the one the listener got."""
        return [advertised if advertised.port else dataclasses.replace(advertised, port=listener.port)
                for advertised, listener in zip(self.endpoints.advertised, self.listeners, strict=True)]

    def _inter_broker_address(self) -> str:
        name = self.endpoints.inter_broker.name
        endpoint = next(e for e in self._advertised() if e.name == name)
        return f"{endpoint.host}:{endpoint.port}"

    def _marker_peer(self, broker_id: int) -> KafkaConnection:
        """The transaction coordinator's connection to `broker_id`: markers do not queue behind parked fetches."""
        return self._peer(broker_id, self.markers, f"txn-marker-sender-{self.broker_id}")

    def _peer(self, broker_id: int, pool: dict[int, KafkaConnection] | None = None,
              client_id: str | None = None) -> KafkaConnection:
        """The connection to `broker_id` on the inter-broker listener (in `pool`, the fetchers' by default)."""
        pool = self.peers if pool is None else pool
        registration = self.core.metadata.image.brokers.get(broker_id)
        address = None if registration is None else registration.endpoint(self.endpoints.inter_broker.name)
        if address is None:
            raise ConfigError(f"broker {broker_id} is not registered with listener "
                              f"{self.endpoints.inter_broker.name}")
        connection = pool.get(broker_id)
        if connection is None or (connection.host, connection.port) != address:
            connection = KafkaConnection(*address, client_id=client_id or f"replica-fetcher-{self.broker_id}",
                                         tls=self._peer_tls, sasl=self._peer_sasl)
            pool[broker_id] = connection
        return connection

    # Dispatcher (what the listener calls) --------------------------------------------------------------------

    async def _handle(self, request: DecodedRequest, session: Session) -> Any:
        return await self.apis.answer(request, session)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.core.metadata.image.scram_credential(mechanism, user)

    # Background tasks -----------------------------------------------------------------------------------------

    async def _run_timers(self, stop: asyncio.Event) -> None:
        """Tick the core when its next deadline comes, as the simulator does (`sim.broker_node`), and at least every
        TIMER_MAX_MS. `_feed` wakes this early only when a call brought the next deadline forward, not after every
        request: a wake-up per request costs a task, a timer and a tick each, a visible share of a broker's CPU."""
        while not stop.is_set():
            now_ms = self._now()
            if self.core.next_deadline_ms() <= now_ms or self._timer_due_ms <= now_ms:
                self._feed(self.core.tick(now_ms))
            self._expire_waiters(now_ms)
            delay_ms = max(0, min(TIMER_MAX_MS, self.core.next_deadline_ms() - now_ms))
            self._timer_due_ms = now_ms + delay_ms
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)

    async def _run_metadata(self, stop: asyncio.Event) -> None:
        """Long-poll the controller's metadata log so leadership changes arrive at once."""
        correlation = itertools.count(METADATA_POLL_FIRST_CORRELATION)
        while not stop.is_set():
            try:
                update = await self._fetch_metadata(next(correlation), METADATA_POLL_WAIT_MS)
            except (ConnectionError, OSError, TimeoutError, KafkaException) as exc:
                # a refusal (CLUSTER_AUTHORIZATION_FAILED: no ClusterAction) is for the operator to fix: a warning
                log.log(logging.WARNING if isinstance(exc, KafkaException) else logging.DEBUG,
                        "Metadata fetch failed: %s", exc)
                await asyncio.sleep(METADATA_POLL_RETRY_MS / 1000)
                continue
            if update.records:
                self._feed(self.core.handle(self._now(), CONTROLLER, update))

    async def _run_faults(self, stop: asyncio.Event) -> None:
        """With fault.injection.enable, apply `faults.json` (written by `insync chaos`) as it changes."""
        node_dir = self.config_directory()
        while not stop.is_set():
            try:
                spec = read_faults(node_dir)
            except (ConfigError, OSError) as exc:
                log.warning("Ignoring faults file: %s", exc)
                spec = self._faults
            if spec != self._faults:
                self._apply_faults(spec)
            await asyncio.sleep(POLL_INTERVAL_MS / 1000)

    def config_directory(self) -> str:
        return str(Path(self.log_dir).parent)

    def _apply_faults(self, spec: FaultSpec) -> None:
        log.warning("Applying injected faults: %s", spec.to_json())
        self.disk.clear_faults()
        for key, ms in spec.slow_reads_ms.items():
            for log_dir in self.log_dirs:
                self.disk.set_slow_reads(f"{log_dir}/{key}/", ms)
        for key in spec.failed_partitions:
            for log_dir in self.log_dirs:
                self.disk.set_io_error(f"{log_dir}/{key}/", on_read=False, on_write=True)
        self._faults = spec

    def _snapshot(self) -> MetricsSnapshot:
        return dataclasses.replace(snapshot(self.core, self.event_log.counts),
                                   request_queue_size=self.request_queue.size)

    async def run(self, stop: asyncio.Event) -> None:
        for listener in self.listeners:
            await listener.start()
        if self.config.node.metrics_port:
            self.metrics.serve(self.config.node.metrics_port)
        self._feed(self.core.start(self._now()))
        self.cleaners.start()
        log.info("Broker %d serving on %s", self.broker_id, ",".join(str(e) for e in self._advertised()))
        halt = asyncio.Event()  # the background loops outlive `stop` until requests in flight are answered
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._run_timers(halt))
                group.create_task(self._run_metadata(halt))
                group.create_task(self.groups.run(halt))
                group.create_task(self.transactions.run(halt))
                group.create_task(self.event_topic.run(halt))
                if self.config.node.fault_injection_enable:
                    group.create_task(self._run_faults(halt))
                await stop.wait()
                if self.config.lifecycle.controlled_shutdown_enable:
                    await self._controlled_shutdown()
                await self.event_topic.close()  # while the listener still serves its own partition
                # Stop accepting and answer what is in flight while the timers still complete parked requests.
                await self._stop_listeners()
                halt.set()
                self._wake.set()
        finally:
            await self._shutdown()

    async def _stop_listeners(self) -> None:
        await asyncio.gather(*(listener.stop(deadline_s=SHUTDOWN_DEADLINE_S) for listener in self.listeners))

    async def _controlled_shutdown(self) -> None:
        """Hand this broker's leaderships to other in-sync replicas before going (Kafka's controlled shutdown):
        its partitions stay online, and its restart registers at once because the controller has fenced it. Bounded
        by the session timeout, after which the controller would fence it anyway."""
        self._feed(self.core.begin_controlled_shutdown(self._now()))
        deadline_ms = self._now() + self.config.lifecycle.session_timeout_ms
        while not self.core.shutdown_granted and self._now() < deadline_ms:  # bounded by the deadline
            await asyncio.sleep(CONTROLLED_SHUTDOWN_POLL_S)
        if self.core.shutdown_granted:
            log.info("Broker %d: controlled shutdown done", self.broker_id)
        else:
            log.warning("Broker %d: the controller did not complete the controlled shutdown in time; stopping anyway",
                        self.broker_id)

    async def _shutdown(self) -> None:
        await self._stop_listeners()  # no-op after a clean stop
        for task in list(self._tasks):
            task.cancel()
        self.groups.close()
        self.transactions.close()
        await self.controller.close()
        for connection in [*self.peers.values(), *self.markers.values()]:
            await connection.close()
        self.core.checkpoint()
        self.log_manager.stop_cleaning()  # a clean in progress stops at its next batch and is dropped
        self.cleaners.close()
        self.log_manager.close()
        self.core.mark_clean_shutdown()  # every log is flushed: the next registration is clean (KIP-966)
        self.metrics.close()
        self.event_log.close()
        log.info("Broker %d shut down", self.broker_id)


def _controller_addresses(config: BrokerConfig) -> list[tuple[str, int]]:
    """Every voter's host and port, in the order given (only the active controller listens)."""
    voters = config.node.controller_quorum_voters
    if not voters:
        raise ConfigError("controller.quorum.voters is empty: a broker needs its controller's id@host:port")
    addresses = []
    for voter in voters:
        _, _, address = voter.partition("@")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"controller.quorum.voters entry {voter!r} is not id@host:port")
        addresses.append((host, int(port)))
    return addresses

