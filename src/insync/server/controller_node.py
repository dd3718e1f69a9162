"""The controller process: the sans-IO `ControllerCore` on an asyncio loop, behind the Kafka controller listener.

It serves exactly `wire.versions.CONTROLLER_API_VERSIONS`. The brokers' requests are decoded to
`controller.messages`, handed to `ControllerCore.handle` (the code the simulator drives too), and answered at
once or, for a parked metadata long poll, on publication or at the end of its wait. The admin APIs call the
`Controller` directly, then let the core answer the fetches a publication satisfied. A timer calls
`ControllerCore.tick` at its next deadline; every call's events go to `events.jsonl`. Metadata persists in
`metadata.jsonl` (`metadata.store=local`, one controller) or in ZooKeeper (`server.zk_store`, any number): there
a controller campaigns for the ephemeral `/controller` znode and is a standby until it wins, neither listening
nor holding metadata, so brokers reach only the active one. The winner bumps `/controller_epoch`, loads the
records and serves. If its session is lost, another controller took over, or an append is refused by the epoch
check (DESIGN 4's fencing), it exits non-zero at once, for its supervisor to restart it as a standby, as Kafka's
ZooKeeper-era controller resigns; nothing it did after losing the epoch reached the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import Sequence
from typing import Any

from insync import errors
from insync.clock import Clock, SystemClock
from insync.config import BrokerConfig, ConfigChange, ConfigError
from insync.controller import acl_control, scram_control
from insync.controller.controller import Controller
from insync.controller.node import ControllerCore
from insync.controller.reassignment import ReassignmentTarget
from insync.controller.replication_control import check_partitions_per_request
from insync.controller.scram_control import CredentialDeletion, CredentialUpsertion, UserResult
from insync.controller.store import ControllerFencedError, LocalFileStore, MetadataStore
from insync.errors import KafkaError, KafkaException
from insync.protocol.codec import DecodedRequest
from insync.security.listeners import controller_endpoint
from insync.security.scram import ScramCredential, ScramMechanism
from insync.server.acceptor import ConnectionQuotas
from insync.server.access_gate import AccessGate
from insync.server.event_log import EventLog
from insync.server.event_topic import EventTopic
from insync.server.metrics import MetricsSnapshot, NodeMetrics
from insync.server.request_queue import RequestQueue
from insync.server.role import (
    MeteredDispatcher,
    librdkafka_settings,
    make_listener,
    steady_now,
)
from insync.server.session import Session
from insync.types import Outgoing
from insync.wire import (
    acls,
    configs,
    controller_apis,
    metadata_log,
    reassignments,
    replica_log_report,
    sasl,
    scram_credentials,
    topics,
    versions,
)
from insync.wire.internal import (
    CreateTopicResult,
    CreateTopicsResponse,
    DeleteTopicResult,
    DeleteTopicsResponse,
    NewTopic,
    created,
)

log = logging.getLogger("insync.controller")

FENCED_EXIT_CODE = 3  # another controller took over: restart this one as a standby
STORE_UNAVAILABLE_EXIT_CODE = 4  # the metadata store could not be reached (the log names it)

TICK_MAX_S = 1.0


class ControllerNode(MeteredDispatcher):
    api_versions = versions.CONTROLLER_API_VERSIONS

    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.node_id = config.node.node_id
        self.log_dir = config.log_dirs()[0]
        self._now = steady_now(self.clock)
        self.core: ControllerCore  # set by `_become_active`, before the listener opens
        self.exit_code = 0  # FENCED_EXIT_CODE once it lost its epoch, STORE_UNAVAILABLE_EXIT_CODE without a store
        self._stop = asyncio.Event()  # `run`'s, once it runs
        self.event_log = EventLog(self.log_dir)
        endpoint = controller_endpoint(config.listeners)
        self.event_topic = EventTopic(config.events, self.node_id, lambda: self.controller.image, self._brokers, None,
                                      librdkafka_settings(config, endpoint, to_controller=True), now=self._now)
        self.request_queue = RequestQueue(config.sockets.queued_max_requests, config.sockets.queued_max_request_bytes)
        self.listener = make_listener(self, endpoint, config, ConnectionQuotas.from_config(config.sockets),
                                      self.request_queue)
        self.metrics = NodeMetrics(self._snapshot)
        self._waiters: dict[tuple[str, int], asyncio.Future[object]] = {}  # a broker request's answer from the core
        self._sources = itertools.count(1)
        self._wake_timer = asyncio.Event()
        self.gate = AccessGate(config, self.node_id, self.event_log, self._now, lambda: self.controller.image)

    @property
    def controller(self) -> Controller:
        return self.core.controller

    # Dispatcher ----------------------------------------------------------------------------------------

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.controller.image.scram_credential(mechanism, user)

    async def _handle(self, request: DecodedRequest, session: Session) -> Any:
        refused = self.gate.controller_refusal(request, session)  # with an authorizer: ClusterAction needed
        if refused is not None:
            return refused
        try:
            return await self._answer(request)
        except ControllerFencedError as exc:  # nothing of this request reached the store: the broker retries
            self._resign(str(exc))
            raise ConnectionError(f"controller {self.node_id} is no longer active") from None

    async def _answer(self, request: DecodedRequest) -> Any:
        key = request.api_key
        if key == versions.API_VERSIONS:
            return versions.respond(request, versions.CONTROLLER_API_VERSIONS, self.controller.image)
        if key in (versions.SASL_HANDSHAKE, versions.SASL_AUTHENTICATE):
            # What a SASL listener's gate did not answer (any on a PLAINTEXT or SSL listener), as Kafka's
            # ControllerApis answers it.
            return sasl.illegal_state_response(request)
        if key == versions.BROKER_REGISTRATION:
            registration = controller_apis.decode_registration(request, self.controller.image.cluster_id)
            response = await self._from_broker(registration.request.correlation_id, registration)
            return controller_apis.encode_registration_response(response, request.api_version)
        if key == versions.BROKER_HEARTBEAT:
            heartbeat = controller_apis.decode_heartbeat(request)
            response = await self._from_broker(request.correlation_id, heartbeat)
            return controller_apis.encode_heartbeat_response(response, request.api_version)
        if key == versions.ALTER_PARTITION:
            response = await self._from_broker(request.correlation_id, controller_apis.decode_alter_partition(request))
            return controller_apis.encode_alter_partition_response(response, request.api_version)
        if key == versions.CREATE_TOPICS:
            return self._create_topics(request)
        if key == versions.DELETE_TOPICS:
            return self._delete_topics(request)
        if key in (versions.INCREMENTAL_ALTER_CONFIGS, versions.ALTER_CONFIGS):
            response = configs.alter_configs(request, self._alter_topic, self._alter_broker)
            self._drain()
            return response
        if key == versions.CREATE_PARTITIONS:
            response = topics.create_partitions(request, self._grow_topic)
            self._drain()
            return response
        if key == versions.ELECT_LEADERS:
            response = topics.elect_leaders(request, self._elect)
            self._drain()
            return response
        if key == versions.ALTER_PARTITION_REASSIGNMENTS:
            response = reassignments.alter_partition_reassignments(request, self._reassign)
            self._drain()
            return response
        if key == versions.LIST_PARTITION_REASSIGNMENTS:
            return reassignments.list_partition_reassignments(request, self.controller.image)
        if key in (versions.CREATE_ACLS, versions.DELETE_ACLS):
            return self._alter_acls(request)
        if key == versions.ALTER_USER_SCRAM_CREDENTIALS:
            response = scram_credentials.alter_user_scram_credentials(request, self._alter_scram_credentials)
            self._drain()
            return response
        assert key == versions.FETCH, key
        return await self._fetch_metadata(request)

    async def _from_broker(self, correlation_id: int, message: object) -> Any:
        """Hand a broker's message to the core and wait for the core's answer to it: at once, or for a parked
        metadata fetch when the controller publishes or the fetch's wait ends (the timer task ticks the core)."""
        source = f"b{next(self._sources)}"
        key = (source, correlation_id)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiters[key] = future
        try:
            self._send(self.core.handle(self._now(), source, message))
            return await future
        finally:
            self._waiters.pop(key, None)

    def _send(self, outgoing: list[Outgoing]) -> None:
        self._resolve(outgoing)
        self._drain()

    def _resolve(self, outgoing: list[Outgoing]) -> None:
        """The core's answers to the requests waiting for them."""
        for answer in outgoing:
            future = self._waiters.pop((str(answer.destination), getattr(answer.message, "correlation_id", -1)), None)
            if future is not None and not future.done():  # else its connection closed while it waited
                future.set_result(answer.message)

    def _create_topics(self, request: DecodedRequest) -> Any:
        decoded = topics.decode_create_topics(request, self.config)
        try:
            check_partitions_per_request([topic.num_partitions for topic in decoded.request.topics])
            results = [self._create_topic(topic, decoded.request.validate_only) for topic in decoded.request.topics]
        except KafkaException as exc:  # the whole request, as Kafka refuses it
            results = [CreateTopicResult(topic.name, exc.error, exc.detail) for topic in decoded.request.topics]
        self._drain()
        response = CreateTopicsResponse(request.correlation_id, tuple(results))
        # The new topic's configs as brokers resolve them, the cluster-wide dynamic defaults included.
        resolved = self.config.with_dynamic(self.controller.image.dynamic_configs(""), {})
        return topics.encode_create_topics(response, decoded, resolved)

    def _create_topic(self, topic: NewTopic, validate_only: bool) -> CreateTopicResult:
        try:
            outcome = self.controller.create_topic(topic.name, topic.num_partitions, topic.replication_factor,
                                                   dict(topic.configs), self._now(), topic.assignments,
                                                   validate_only=validate_only)
        except KafkaException as exc:
            return CreateTopicResult(topic.name, exc.error, exc.detail)
        return created(topic, outcome.response.topic_id)

    def _delete_topics(self, request: DecodedRequest) -> Any:
        decoded = topics.decode_delete_topics(request, self.controller.image)
        results: list[DeleteTopicResult] = []
        for name in decoded.request.topics:
            try:
                topic_id = self.controller.delete_topic(name, self._now()).response
                results.append(DeleteTopicResult(name, errors.NONE, None, topic_id))
            except KafkaException as exc:
                results.append(DeleteTopicResult(name, exc.error, exc.detail))
        self._drain()
        return topics.encode_delete_topics(DeleteTopicsResponse(request.correlation_id, tuple(results)), decoded)

    def _alter_acls(self, request: DecodedRequest) -> Any:
        """CreateAcls and DeleteAcls, decided by `acl_control` from the image and committed as one batch."""
        if request.api_key == versions.CREATE_ACLS:
            creation = acl_control.create_acls(self.controller.image, acls.decode_create_acls(request))
            self.controller.commit_records(creation.records, self._now())
            response = acls.encode_create_acls(creation.results, request.api_version)
        else:
            deletion = acl_control.delete_acls(self.controller.image, acls.decode_delete_acls(request))
            self.controller.commit_records(deletion.records, self._now())
            response = acls.encode_delete_acls(deletion.results, request.api_version)
        self._drain()
        return response

    def _alter_scram_credentials(self, deletions: Sequence[CredentialDeletion],
                                 upsertions: Sequence[CredentialUpsertion]) -> list[UserResult]:
        records, results = scram_control.alter_credentials(self.controller.image, deletions, upsertions)
        self.controller.commit_records(records, self._now())
        return results

    def _elect(self, election_type: int, asked: list[tuple[str, int]] | None) -> dict[tuple[str, int], KafkaError]:
        if election_type == topics.UNCLEAN_ELECTION:
            return self.controller.elect_unclean_leaders(self._now(), asked).response
        return self.controller.elect_preferred_leaders(self._now(), asked).response

    def _reassign(self, targets: list[ReassignmentTarget]) -> tuple[KafkaException | None, ...]:
        return self.controller.alter_partition_reassignments(targets, self._now()).response

    def _alter_topic(self, name: str, changes: tuple[ConfigChange, ...], replace: bool, validate_only: bool) -> None:
        self.controller.alter_topic_configs(name, changes, self._now(), replace=replace, validate_only=validate_only)

    def _alter_broker(self, name: str, changes: tuple[ConfigChange, ...], replace: bool, validate_only: bool) -> None:
        self.controller.alter_broker_configs(name, changes, self._now(), replace=replace, validate_only=validate_only)

    def _grow_topic(self, name: str, count: int, validate_only: bool,
                    assignments: tuple[tuple[int, ...], ...] | None) -> None:
        self.controller.create_partitions(name, count, self._now(), validate_only=validate_only,
                                          assignments=assignments)

    async def _fetch_metadata(self, request: DecodedRequest) -> Any:
        try:
            report = replica_log_report.decode_request(request)
        except KafkaException as exc:
            log.warning("Refusing a replica log report: %s", exc)
            raise ConnectionError(str(exc)) from None  # Kafka closes the connection on an invalid request
        if report is not None:
            self._send(self.core.handle(self._now(), f"b{next(self._sources)}", report))  # no answer to wait for
            return replica_log_report.empty_response(request)
        decoded = metadata_log.decode_fetch(request)
        wanted = metadata_log.metadata_fetch_request(decoded)
        if wanted is None:
            return metadata_log.encode_fetch_response(None, decoded)
        return metadata_log.encode_fetch_response(await self._from_broker(request.correlation_id, wanted), decoded)

    # Timers and events ---------------------------------------------------------------------------------

    def _drain(self) -> None:
        """After every controller call: events to the log, re-arm the timer. An admin call's publication answers
        parked metadata fetches through `wake`."""
        events = self.controller.drain_events()
        if events:
            self.event_log.write(events)
            self.event_topic.offer(events)
        self._wake_timer.set()
        self._resolve(self.core.wake(self._now()))

    def _brokers(self) -> str:
        """Where the controller's `__insync_events` producer connects: the registered brokers' listeners."""
        return ",".join(f"{b.host}:{b.port}" for b in self.controller.image.brokers.values() if not b.fenced)

    async def run_timers(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            delay_s = max(0.0, min(TICK_MAX_S, (self.core.next_deadline_ms() - self._now()) / 1000))
            self._wake_timer.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_timer.wait(), delay_s)
            try:
                outgoing = self.core.tick(self._now())
            except ControllerFencedError as exc:
                self._resign(str(exc))
                return
            self._send(outgoing)

    def _snapshot(self) -> MetricsSnapshot:
        image = self.controller.image
        return MetricsSnapshot(offline_partitions=len(image.offline_partitions()), active_controller=1,
                               request_queue_size=self.request_queue.size)

    async def _become_active(self, stop: asyncio.Event) -> bool:
        """Open the store (campaigning first when it is ZooKeeper) and load the controller; False if `stop` came
        first."""
        store: MetadataStore
        settings = self.config.controller
        if settings.metadata_store == "zookeeper":
            from insync.server.zk_store import ZooKeeperStore  # kazoo: only controllers that use it

            connect = settings.zookeeper_connect or ""
            session_ms = settings.zookeeper_session_timeout_ms
            try:
                # Kafka's zookeeper.connection.timeout.ms defaults to the session timeout: so does this wait.
                zk = await asyncio.to_thread(ZooKeeperStore, connect, self.node_id, session_timeout_ms=session_ms,
                                             connect_timeout_s=session_ms / 1000)
            except ConfigError as exc:
                log.error("Controller %d cannot use its metadata store: %s", self.node_id, exc)
                self.exit_code = STORE_UNAVAILABLE_EXIT_CODE
                return False
            log.info("Controller %d is a standby: campaigning in ZooKeeper at %s", self.node_id, connect)
            if not await asyncio.to_thread(zk.campaign, stop.is_set):
                zk.close()
                return False
            loop = asyncio.get_running_loop()
            zk.on_lost(lambda: self._resign_soon(loop))
            store = zk
            log.info("Controller %d won the election (controller epoch %d)", self.node_id, zk.controller_epoch)
        else:
            store = LocalFileStore(self.log_dir)
        try:
            controller = Controller(self.node_id, self.config, store, self._now(), random.Random())
        except ControllerFencedError as exc:  # lost the epoch between winning and its first record
            self._resign(str(exc))
            store.close()
            return False
        self.core = ControllerCore(controller, self._now())
        self._drain()
        return True

    def _resign_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """From ZooKeeper's thread: the session or the /controller znode is gone."""
        loop.call_soon_threadsafe(self._resign, "its ZooKeeper session or /controller znode")

    def _resign(self, why: str) -> None:
        if self.exit_code == FENCED_EXIT_CODE:
            return  # already resigned
        if self._stop.is_set():
            return  # shutting down anyway: closing the store ends the session, which is no loss of the epoch
        log.error("Controller %d is no longer the active controller (%s); stopping", self.node_id, why)
        self.exit_code = FENCED_EXIT_CODE
        self._stop.set()

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        if not await self._become_active(stop):
            self.event_log.close()
            return
        await self.listener.start()
        metrics_port = self.config.node.metrics_port
        if metrics_port:
            self.metrics.serve(metrics_port)
        log.info("Controller %d serving on %s", self.node_id, self.listener.endpoint)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.run_timers(stop))
                group.create_task(self.event_topic.run(stop))
                await stop.wait()
                self._wake_timer.set()
                await self.event_topic.close()
        finally:
            await self.listener.stop(deadline_s=2.0)
            self.metrics.close()
            self.controller.close()
            self.event_log.close()
