"""The broker process: a sans-IO `BrokerCore` on an asyncio loop, behind the Kafka listener.

Requests arrive through the `Listener`; `ROUTES` (at the end) names the method that answers each API. The
`wire` translators turn most requests into the core's messages, fed to the core with a source address unique to
the request (`c<n>`), whose `Outgoing` answer resolves the request's future; the group APIs go to the
`GroupCoordinator`, the transaction APIs to the `TransactionCoordinator`, the admin APIs to the controller, the describe APIs are answered from the metadata image.
Everything else the core emits is carried out here: `Outgoing` to `CONTROLLER` or a broker id becomes a Kafka
request on a `KafkaConnection` whose answer goes back into the core (a lost connection fails the fetch, so the
fetcher backs off); `CompleteAfter(ms, token)`, a follower read reported slow (seed 000), completes `ms` later
on the loop without stalling anything else. A timer task calls `core.tick` at `core.next_deadline_ms()`; a
metadata task long-polls the controller's `__cluster_metadata` so leadership changes arrive at once. Events go
to `events.jsonl` after every core call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from insync import errors
from insync.broker.controller_channel import (
    METADATA_POLL_FIRST_CORRELATION,
    METADATA_POLL_RETRY_MS,
    METADATA_POLL_WAIT_MS,
)
from insync.broker.core import BrokerCore
from insync.broker.messages import CompleteAfter, ConsumerFetchResponse, ProduceResponse
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
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.replication.messages import FetchRequest
from insync.security.listeners import Endpoint, broker_listeners, controller_names
from insync.security.scram import ScramCredential, ScramMechanism
from insync.server.acceptor import ConnectionQuotas
from insync.server.access_gate import AccessGate
from insync.server.cleaner_threads import CleanerThreads
from insync.server.client import FailoverConnection, KafkaConnection
from insync.server.event_log import EventLog
from insync.server.event_topic import EventTopic
from insync.server.group_coordinator import GroupCoordinator
from insync.server.halt import Halter
from insync.server.metrics import MetricsSnapshot, NodeMetrics, snapshot
from insync.server.role import (
    MeteredDispatcher,
    client_sasl_for,
    client_tls_for,
    librdkafka_settings,
    make_listener,
    monotonic_now,
)
from insync.server.session import Session
from insync.server.topic_creation import TopicCreator
from insync.server.txn_coordinator import TransactionCoordinator
from insync.storage.log_manager import LogManager
from insync.storage.power_loss import open_disk
from insync.types import BrokerId, Outgoing
from insync.wire import (
    client_quotas,
    configs,
    controller_apis,
    describe_topic_partitions,
    fetch,
    forwarding,
    log_dirs,
    metadata,
    metadata_log,
    offsets,
    produce,
    producer_id,
    producers,
    replica_log_report,
    sasl,
    scram_credentials,
    versions,
)
from insync.wire import groups as group_api
from insync.wire.entities import Decoded

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
GROUP_APIS = frozenset((versions.FIND_COORDINATOR, versions.JOIN_GROUP, versions.SYNC_GROUP, versions.HEARTBEAT,
                        versions.LEAVE_GROUP, versions.OFFSET_COMMIT, versions.OFFSET_FETCH, versions.LIST_GROUPS,
                        versions.DESCRIBE_GROUPS, versions.DELETE_GROUPS, versions.OFFSET_DELETE,
                        versions.TXN_OFFSET_COMMIT))
TXN_APIS = frozenset((versions.ADD_PARTITIONS_TO_TXN, versions.ADD_OFFSETS_TO_TXN, versions.END_TXN,
                      versions.WRITE_TXN_MARKERS))
# What the controller answers: a broker forwards these as they are (`_forward`).
FORWARDED_APIS = frozenset((versions.CREATE_TOPICS, versions.DELETE_TOPICS, versions.CREATE_PARTITIONS,
                            versions.ELECT_LEADERS, versions.ALTER_PARTITION_REASSIGNMENTS,
                            versions.LIST_PARTITION_REASSIGNMENTS, versions.CREATE_ACLS, versions.DELETE_ACLS,
                            versions.ALTER_USER_SCRAM_CREDENTIALS))
# What the core answers at once (`broker.queries`): each API's (decode, encode) translators.
Translators = tuple[Callable[[DecodedRequest], Decoded[Any]], Callable[[Any, Decoded[Any]], Any]]
QUERY_TRANSLATORS: Mapping[int, Translators] = {
    versions.LIST_OFFSETS: (offsets.decode_list_offsets, offsets.encode_list_offsets),
    versions.OFFSET_FOR_LEADER_EPOCH: (offsets.decode_offset_for_leader_epoch,
                                       offsets.encode_offset_for_leader_epoch),
    versions.DELETE_RECORDS: (offsets.decode_delete_records, offsets.encode_delete_records),
    versions.INIT_PRODUCER_ID: (producer_id.decode_request, producer_id.encode_response),
    versions.DESCRIBE_LOG_DIRS: (log_dirs.decode_describe_log_dirs, log_dirs.encode_describe_log_dirs),
    versions.ALTER_REPLICA_LOG_DIRS: (log_dirs.decode_alter_replica_log_dirs, log_dirs.encode_alter_replica_log_dirs),
    versions.DESCRIBE_PRODUCERS: (producers.decode_request, producers.encode_response),
}


class BrokerNode(MeteredDispatcher):
    api_versions = versions.BROKER_API_VERSIONS

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._now = monotonic_now(self.clock)
        self.broker_id = BrokerId(config.node.node_id)
        # DescribeLogDirs names them so, as Kafka; the first also holds what is not a partition's (events)
        self.log_dirs = tuple(str(Path(d).absolute()) for d in config.log_dirs())
        self.log_dir = self.log_dirs[0]
        self.disk = open_disk(self.log_dir, config.storage.power_loss_journal)
        self.cleaner_threads = CleanerThreads(config.cleaner, self.disk)
        self.log_manager = LogManager.open(self.log_dirs, config, self.disk, self.clock, self.cleaner_threads)
        self.core = BrokerCore(self.broker_id, config, self.log_manager, random.getrandbits(62), self._now())
        self.endpoints = broker_listeners(config.listeners)
        quotas = ConnectionQuotas.from_config(config.sockets)
        # Kafka protects the inter-broker listener from max.connections when there are others for clients
        protected = self.endpoints.inter_broker.name if len(self.endpoints.bound) > 1 else None
        self.listeners = [make_listener(self, endpoint, config, quotas, endpoint.name == protected)
                          for endpoint in self.endpoints.bound]
        controller_listener = controller_names(config.listeners)[0]
        self.controller = FailoverConnection(
            _controller_addresses(config), client_id=f"broker-{self.broker_id}",
            tls=client_tls_for(config, controller_listener, self.endpoints.controller_protocol),
            sasl=client_sasl_for(config, controller_listener, self.endpoints.controller_protocol,
                                 "sasl.mechanism.controller.protocol"))
        inter_broker = self.endpoints.inter_broker
        self._peer_tls = client_tls_for(config, inter_broker.name, inter_broker.security_protocol)
        self._peer_sasl = client_sasl_for(config, inter_broker.name, inter_broker.security_protocol,
                                          "sasl.mechanism.inter.broker.protocol")
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
                                      librdkafka_settings(config, inter_broker, "sasl.mechanism.inter.broker.protocol"))
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
        self.groups = GroupCoordinator(config.groups, self.core, self.log_manager, self.controller, self._call,
                                       self._now)
        self.markers: dict[int, KafkaConnection] = {}  # to partition leaders, apart from the fetchers'
        self.transactions = TransactionCoordinator(config.transactions, self.core, self.log_manager, self.controller,
                                                   self._call, self._now, self._marker_peer, self.groups)
        self.topic_creator = TopicCreator(config.auto_create, self.controller, self._spawn, self.groups.create_offsets_topic)
        self.gate = AccessGate(config, self.broker_id, self.event_log, self._now, lambda: self.core.metadata.image)

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

    async def _call(self, message: Any) -> Any:
        """Hand a client's request to the core and wait for the core's answer to it (TimeoutError after
        REQUEST_TIMEOUT_MS, `_expire_waiters`)."""
        source = f"c{next(self._sources)}"
        key = (source, message.correlation_id)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        now_ms = self._now()
        self._waiters[key] = (future, now_ms + REQUEST_TIMEOUT_MS)
        try:
            self._feed(self.core.handle(now_ms, source, message))
            return await future
        finally:
            self._waiters.pop(key, None)

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
        route = ROUTES.get(request.api_key)
        assert route is not None, f"API {request.api_key} is advertised but has no route"
        # through the authorization gate (server.access_gate), which may route the request without refused topics
        return await self.gate.answer(request, session, lambda asked: route(self, asked, session))

    async def _api_versions(self, request: DecodedRequest, session: Session) -> Any:
        return versions.respond(request, versions.BROKER_API_VERSIONS, self.core.metadata.image)

    def _image(self, session: Session) -> MetadataImage:
        """The metadata image with every broker's address on the client's listener."""
        return self.core.metadata.image.as_seen_on(session.listener.name)

    async def _metadata(self, request: DecodedRequest, session: Session) -> Any:
        query, image = metadata.decode_request(request), self._image(session)
        query, denied, access = self.gate.metadata_query(request, query, session, image)
        self.topic_creator.create(metadata.topics_to_create(query, image, self.topic_creator.enabled))
        answer = metadata.encode_response(query, image, image.cluster_id, self.broker_id, self.topic_creator.enabled)
        return self.gate.metadata_view(request, answer, access, denied)

    async def _describe_cluster(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        return metadata.describe_cluster(request, image, image.cluster_id or "", self.broker_id)

    async def _describe_topic_partitions(self, request: DecodedRequest, session: Session) -> Any:
        return describe_topic_partitions.respond(request, self.core.metadata.image)

    async def _describe_configs(self, request: DecodedRequest, session: Session) -> Any:
        return configs.describe_configs(request, self.core.metadata.image, self.core.config, self.broker_id)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.core.metadata.image.scram_credential(mechanism, user)

    async def _describe_scram_credentials(self, request: DecodedRequest, session: Session) -> Any:
        return scram_credentials.describe_user_scram_credentials(request, self.core.metadata.image)

    async def _client_quotas(self, request: DecodedRequest, session: Session) -> Any:
        return client_quotas.respond(request)

    async def _sasl_out_of_turn(self, request: DecodedRequest, session: Session) -> Any:
        """SaslHandshake or SaslAuthenticate that no SASL exchange expects (a SASL listener's gate answers the
        others)."""
        return sasl.illegal_state_response(request)

    async def _group_request(self, request: DecodedRequest, session: Session) -> Any:
        key, groups = request.api_key, self.groups
        if key == versions.JOIN_GROUP:
            return await groups.join(request, session.client_host)
        if key == versions.SYNC_GROUP:
            return await groups.sync(request)
        if key == versions.OFFSET_COMMIT:
            return await groups.offset_commit(request)
        if key == versions.DELETE_GROUPS:
            return await groups.delete_groups(request)
        if key == versions.OFFSET_DELETE:
            return await groups.offset_delete(request)
        if key == versions.TXN_OFFSET_COMMIT:
            return await groups.txn_offset_commit(request)
        if key == versions.FIND_COORDINATOR:
            key_type, keys = group_api.find_coordinator_keys(request)
            if key_type == group_api.TRANSACTION_KEY_TYPE:
                return self.transactions.find_coordinator(request, self._image(session), keys)
            return groups.find_coordinator(request, self._image(session))
        answer = {versions.HEARTBEAT: groups.heartbeat,
                  versions.LEAVE_GROUP: groups.leave, versions.OFFSET_FETCH: groups.offset_fetch,
                  versions.LIST_GROUPS: groups.list_groups, versions.DESCRIBE_GROUPS: groups.describe_groups}[key]
        return answer(request)

    async def _txn_request(self, request: DecodedRequest, session: Session) -> Any:
        if request.api_key == versions.WRITE_TXN_MARKERS:
            return await self.transactions.write_markers(request)
        return await self.transactions.handle(request)

    async def _init_producer_id(self, request: DecodedRequest, session: Session) -> Any:
        """A transactional producer's goes to its coordinator, an idempotent one's to the core."""
        if request.body.transactional_id is not None:
            return await self.transactions.handle(request)
        return await self._query(request, session)

    async def _alter_configs(self, request: DecodedRequest, session: Session) -> Any:
        """(Incremental)AlterConfigs: a BROKER resource naming another broker is refused here, as Kafka's broker
        refuses it (`configs.preprocess`); the rest goes to the controller."""
        checked = configs.preprocess(request, self.broker_id)
        if checked.forward is None:
            return checked.answer(None)
        return checked.answer(await self._forward(dataclasses.replace(request, body=checked.forward), session))

    async def _forward(self, request: DecodedRequest, session: Session) -> Any:
        """CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, config, ACL, SCRAM credential alterations and
        partition reassignments go to the controller, as KRaft brokers forward them; if no controller answers,
        every resource is refused NOT_CONTROLLER (`wire.forwarding`)."""
        address = self.controller.address
        try:
            return await self.controller.request(request.body, self._controller_timeout_s)
        except (ConnectionError, OSError, TimeoutError) as exc:
            message = f"the controller at {address} did not answer ({exc or 'timeout'})"
            return forwarding.refuse_forwarded(request, self.config, self.core.metadata.image, message)

    async def _query(self, request: DecodedRequest, session: Session) -> Any:
        """ListOffsets, OffsetForLeaderEpoch, DeleteRecords, InitProducerId, DescribeLogDirs, AlterReplicaLogDirs,
        DescribeProducers: the core answers them at once; the translator alone answers what it refuses (a
        transactional InitProducerId)."""
        decode, encode = QUERY_TRANSLATORS[request.api_key]
        decoded = self.gate.checked(decode(request), request, session)
        if decoded.error is not errors.NONE:
            return encode(None, decoded)
        return encode(await self._call(decoded.request), decoded)

    async def _produce(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        decoded = self.gate.checked(produce.decode_request(request, image), request, session)
        internal = decoded.request
        if decoded.error is not errors.NONE or not internal.partitions:
            return produce.encode_response(ProduceResponse(internal.correlation_id, ()), decoded, image)
        if internal.acks == 0:
            self._feed(self.core.handle(self._now(), f"c{next(self._sources)}", internal))
            return None
        return produce.encode_response(await self._call(internal), decoded, self._image(session))

    async def _fetch(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        decoded = self.gate.checked(fetch.decode_request(request, image), request, session)
        if decoded.error is not errors.NONE:
            return fetch.encode_response(None, decoded, image)
        internal: Any = decoded.request if fetch.is_follower_fetch(decoded.request) else \
            fetch.consumer_request(decoded.request)
        if not internal.partitions:  # nothing for the core: none asked, or every topic id unknown (UNKNOWN_TOPIC_ID)
            return fetch.encode_response(ConsumerFetchResponse(internal.correlation_id, ()), decoded, image)
        return fetch.encode_response(await self._call(internal), decoded, self._image(session))

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
        return snapshot(self.core, self.event_log.counts)

    async def run(self, stop: asyncio.Event) -> None:
        for listener in self.listeners:
            await listener.start()
        if self.config.node.metrics_port:
            self.metrics.serve(self.config.node.metrics_port)
        self._feed(self.core.start(self._now()))
        self.cleaner_threads.start()
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
        self.cleaner_threads.close()
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


# Which method answers which API: every API in `versions.BROKER_API_VERSIONS` has a route.
Route = Callable[[BrokerNode, DecodedRequest, Session], Awaitable[Any]]
ROUTES: Mapping[int, Route] = {
    versions.PRODUCE: BrokerNode._produce,
    versions.FETCH: BrokerNode._fetch,
    versions.API_VERSIONS: BrokerNode._api_versions,
    versions.METADATA: BrokerNode._metadata,
    versions.DESCRIBE_CLUSTER: BrokerNode._describe_cluster,
    versions.DESCRIBE_TOPIC_PARTITIONS: BrokerNode._describe_topic_partitions,
    versions.DESCRIBE_CONFIGS: BrokerNode._describe_configs,
    versions.DESCRIBE_USER_SCRAM_CREDENTIALS: BrokerNode._describe_scram_credentials,
    versions.DESCRIBE_CLIENT_QUOTAS: BrokerNode._client_quotas,
    versions.ALTER_CLIENT_QUOTAS: BrokerNode._client_quotas,
    versions.SASL_HANDSHAKE: BrokerNode._sasl_out_of_turn,
    versions.SASL_AUTHENTICATE: BrokerNode._sasl_out_of_turn,
    **dict.fromkeys(GROUP_APIS, BrokerNode._group_request),
    **dict.fromkeys(FORWARDED_APIS, BrokerNode._forward),
    versions.INCREMENTAL_ALTER_CONFIGS: BrokerNode._alter_configs,
    versions.ALTER_CONFIGS: BrokerNode._alter_configs,
    **dict.fromkeys(QUERY_TRANSLATORS, BrokerNode._query),
    **dict.fromkeys(TXN_APIS, BrokerNode._txn_request),
    versions.INIT_PRODUCER_ID: BrokerNode._init_producer_id,
    versions.DESCRIBE_ACLS: BrokerNode._forward,  # never called: the gate answers it from the image
}
