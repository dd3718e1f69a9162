"""What answers each client API on a broker: `ROUTES` (at the end) names the `BrokerApis` method for every API
the broker advertises, each reached through the authorization gate (`server.access_gate`).

The `wire` translators turn produce, fetch and the queries into the core's messages, which the node hands to the
core (`CoreCalls`) and whose answers they translate back; the group APIs go to the `GroupCoordinator`, the admin
APIs to the controller as they are, the transaction APIs to the `TransactionCoordinator`, and the describe APIs
are answered from the metadata image.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import (
    ConsumerFetchResponse,
    PartitionProduceResult,
    ProduceRequest,
    ProduceResponse,
)
from insync.config import BrokerConfig
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.server.access_gate import AccessGate
from insync.server.client import FailoverConnection
from insync.server.group_coordinator import GroupCoordinator
from insync.server.session import Session
from insync.server.topic_creation import TopicCreator
from insync.server.txn_coordinator import TransactionCoordinator
from insync.types import BrokerId
from insync.wire import (
    client_quotas,
    configs,
    describe_topic_partitions,
    fetch,
    forwarding,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_id,
    producers,
    sasl,
    scram_credentials,
    versions,
)
from insync.wire import groups as group_api
from insync.wire import transactions as txn_api
from insync.wire.entities import Decoded

GROUP_APIS = frozenset((versions.FIND_COORDINATOR, versions.JOIN_GROUP, versions.SYNC_GROUP, versions.HEARTBEAT,
                        versions.LEAVE_GROUP, versions.OFFSET_COMMIT, versions.OFFSET_FETCH, versions.LIST_GROUPS,
                        versions.DESCRIBE_GROUPS, versions.DELETE_GROUPS, versions.OFFSET_DELETE,
                        versions.TXN_OFFSET_COMMIT))
TXN_APIS = frozenset((versions.ADD_PARTITIONS_TO_TXN, versions.ADD_OFFSETS_TO_TXN, versions.END_TXN,
                      versions.WRITE_TXN_MARKERS))
# What the controller answers: a broker forwards these as they are (`BrokerApis.forward`).
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


class CoreCalls(Protocol):
    """How the APIs reach the broker's core: through the node that drives it."""

    core: BrokerCore

    def call(self, message: Any) -> Awaitable[Any]:
        """Hand `message` to the core now (a produce's append happens here); the awaitable is the core's answer."""
        ...

    def send(self, message: Any) -> None:
        """Hand `message` to the core without waiting for an answer (an acks=0 produce)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Coordinators:
    """The broker's coordinators: of consumer groups, and of transactions."""

    groups: GroupCoordinator
    transactions: TransactionCoordinator


class BrokerApis:
    def __init__(self, config: BrokerConfig, node: CoreCalls, gate: AccessGate, coordinators: Coordinators,
                 topic_creator: TopicCreator, controller: FailoverConnection, controller_timeout_s: float) -> None:
        assert controller_timeout_s > 0, controller_timeout_s
        self._config = config
        self._broker_id = BrokerId(config.node.node_id)
        self._node = node
        self._gate = gate
        self._groups = coordinators.groups
        self._transactions = coordinators.transactions
        self._topic_creator = topic_creator
        self._controller = controller
        self._controller_timeout_s = controller_timeout_s

    async def answer(self, request: DecodedRequest, session: Session) -> Any:
        """The response body to `request` from the client of `session`, or None for none."""
        route = ROUTES.get(request.api_key)
        assert route is not None, f"API {request.api_key} is advertised but has no route"
        # through the authorization gate (server.access_gate), which may route the request without refused topics
        return await self._gate.answer(request, session, lambda asked: route(self, asked, session))

    async def api_versions(self, request: DecodedRequest, session: Session) -> Any:
        return versions.respond(request, versions.BROKER_API_VERSIONS, self._node.core.metadata.image)

    def _image(self, session: Session) -> MetadataImage:
        """The metadata image with every broker's address on the client's listener."""
        return self._node.core.metadata.image.as_seen_on(session.listener.name)

    async def metadata(self, request: DecodedRequest, session: Session) -> Any:
        query, image = metadata.decode_request(request), self._image(session)
        query, denied, access = self._gate.metadata_query(request, query, session, image)
        self._topic_creator.create(metadata.topics_to_create(query, image, self._topic_creator.enabled))
        answer = metadata.encode_response(query, image, image.cluster_id, self._broker_id, self._topic_creator.enabled)
        return self._gate.metadata_view(request, answer, access, denied)

    async def describe_cluster(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        return metadata.describe_cluster(request, image, image.cluster_id or "", self._broker_id)

    async def describe_topic_partitions(self, request: DecodedRequest, session: Session) -> Any:
        return describe_topic_partitions.respond(request, self._node.core.metadata.image)

    async def describe_configs(self, request: DecodedRequest, session: Session) -> Any:
        core = self._node.core
        return configs.describe_configs(request, core.metadata.image, core.config, self._broker_id)

    async def describe_scram_credentials(self, request: DecodedRequest, session: Session) -> Any:
        return scram_credentials.describe_user_scram_credentials(request, self._node.core.metadata.image)

    async def client_quotas(self, request: DecodedRequest, session: Session) -> Any:
        return client_quotas.respond(request)

    async def sasl_out_of_turn(self, request: DecodedRequest, session: Session) -> Any:
        """SaslHandshake or SaslAuthenticate that no SASL exchange expects (a SASL listener's gate answers the
        others)."""
        return sasl.illegal_state_response(request)

    async def group_request(self, request: DecodedRequest, session: Session) -> Any:
        key, groups = request.api_key, self._groups
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
            return await groups.txn_offset_commit(request, self._transactions.check_offsets_partition)
        if key == versions.FIND_COORDINATOR:
            key_type, keys = group_api.find_coordinator_keys(request)
            if key_type == group_api.TRANSACTION_KEY_TYPE:
                return self._transactions.find_coordinator(request, self._image(session), keys)
            return groups.find_coordinator(request, self._image(session))
        answer = {versions.HEARTBEAT: groups.heartbeat,
                  versions.LEAVE_GROUP: groups.leave, versions.OFFSET_FETCH: groups.offset_fetch,
                  versions.LIST_GROUPS: groups.list_groups, versions.DESCRIBE_GROUPS: groups.describe_groups}[key]
        return answer(request)

    async def txn_request(self, request: DecodedRequest, session: Session) -> Any:
        if request.api_key == versions.WRITE_TXN_MARKERS:
            return await self._transactions.write_markers(request)
        if request.api_key == versions.ADD_PARTITIONS_TO_TXN and request.api_version >= txn_api.BATCHED_VERSION:
            return await self._transactions.batched(request)
        return await self._transactions.handle(request)

    async def txn_view(self, request: DecodedRequest, session: Session) -> Any:
        if request.api_key == versions.LIST_TRANSACTIONS:
            return self._transactions.list_transactions(request)
        return self._transactions.describe_transactions(request)

    async def init_producer_id(self, request: DecodedRequest, session: Session) -> Any:
        """A transactional producer's goes to its coordinator, an idempotent one's to the core."""
        if request.body.transactional_id is not None:
            return await self._transactions.handle(request)
        return await self.query(request, session)

    async def alter_configs(self, request: DecodedRequest, session: Session) -> Any:
        """(Incremental)AlterConfigs: a BROKER resource naming another broker is refused here, as Kafka's broker
        refuses it (`configs.preprocess`); the rest goes to the controller."""
        checked = configs.preprocess(request, self._broker_id)
        if checked.forward is None:
            return checked.answer(None)
        return checked.answer(await self.forward(dataclasses.replace(request, body=checked.forward), session))

    async def forward(self, request: DecodedRequest, session: Session) -> Any:
        """CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, config, ACL, SCRAM credential alterations and
        partition reassignments go to the controller, as KRaft brokers forward them; if no controller answers,
        every resource is refused NOT_CONTROLLER (`wire.forwarding`)."""
        address = self._controller.address
        try:
            return await self._controller.request(request.body, self._controller_timeout_s)
        except (ConnectionError, OSError, TimeoutError) as exc:
            message = f"the controller at {address} did not answer ({exc or 'timeout'})"
            return forwarding.refuse_forwarded(request, self._config, self._node.core.metadata.image, message)

    async def query(self, request: DecodedRequest, session: Session) -> Any:
        """ListOffsets, OffsetForLeaderEpoch, DeleteRecords, InitProducerId, DescribeLogDirs, AlterReplicaLogDirs,
        DescribeProducers: the core answers them at once; the translator alone answers what it refuses."""
        decode, encode = QUERY_TRANSLATORS[request.api_key]
        decoded = self._gate.checked(decode(request), request, session)
        if decoded.error is not errors.NONE:
            return encode(None, decoded)
        return encode(await self._node.call(decoded.request), decoded)

    async def produce(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        decoded = self._gate.checked(produce.decode_request(request, image), request, session)
        internal = decoded.request
        if decoded.error is not errors.NONE or not internal.partitions:
            return produce.encode_response(ProduceResponse(internal.correlation_id, ()), decoded, image)
        transactional_id = request.body.transactional_id
        refused: tuple[PartitionProduceResult, ...] = ()
        if not transactional_id:
            answering = self._submit(internal)
        else:
            with session.appends.turn() as earlier_done:
                refused = await self._transactions.unverified(transactional_id, internal.partitions,
                                                              request.api_version, earlier_done)
                gone = {result.topic_partition for result in refused}
                internal = dataclasses.replace(
                    internal, partitions=tuple(p for p in internal.partitions if p[0] not in gone))
                answering = self._submit(internal)
        if answering is None:
            return None
        answered = await answering
        if refused:
            answered = dataclasses.replace(answered, results=answered.results + refused)
        return produce.encode_response(answered, decoded, self._image(session))

    def _submit(self, internal: ProduceRequest) -> Awaitable[ProduceResponse] | None:
        """Hand a produce's batches to the core now (their append); what it returns is the answer, None for acks=0."""
        if internal.acks == 0:
            if internal.partitions:
                self._node.send(internal)
            return None
        if not internal.partitions:
            return asyncio.sleep(0, ProduceResponse(internal.correlation_id, ()))
        return self._node.call(internal)

    async def fetch(self, request: DecodedRequest, session: Session) -> Any:
        image = self._image(session)
        decoded = self._gate.checked(fetch.decode_request(request, image), request, session)
        if decoded.error is not errors.NONE:
            return fetch.encode_response(None, decoded, image)
        internal: Any = decoded.request if fetch.is_follower_fetch(decoded.request) else \
            fetch.consumer_request(decoded.request)
        # Nothing for the core: none asked, or every topic id unknown (UNKNOWN_TOPIC_ID). A follower's fetch always
        # goes there: an incremental one that lists nothing still fetches its whole session.
        if not internal.partitions and not fetch.is_follower_fetch(decoded.request):
            return fetch.encode_response(ConsumerFetchResponse(internal.correlation_id, ()), decoded, image)
        return fetch.encode_response(await self._node.call(internal), decoded, self._image(session))


# Which method answers which API: every API in `versions.BROKER_API_VERSIONS` has a route.
Route = Callable[[BrokerApis, DecodedRequest, Session], Awaitable[Any]]
ROUTES: Mapping[int, Route] = {
    versions.PRODUCE: BrokerApis.produce,
    versions.FETCH: BrokerApis.fetch,
    versions.API_VERSIONS: BrokerApis.api_versions,
    versions.METADATA: BrokerApis.metadata,
    versions.DESCRIBE_CLUSTER: BrokerApis.describe_cluster,
    versions.DESCRIBE_TOPIC_PARTITIONS: BrokerApis.describe_topic_partitions,
    versions.DESCRIBE_CONFIGS: BrokerApis.describe_configs,
    versions.DESCRIBE_USER_SCRAM_CREDENTIALS: BrokerApis.describe_scram_credentials,
    versions.DESCRIBE_CLIENT_QUOTAS: BrokerApis.client_quotas,
    versions.ALTER_CLIENT_QUOTAS: BrokerApis.client_quotas,
    versions.SASL_HANDSHAKE: BrokerApis.sasl_out_of_turn,
    versions.SASL_AUTHENTICATE: BrokerApis.sasl_out_of_turn,
    **dict.fromkeys(GROUP_APIS, BrokerApis.group_request),
    **dict.fromkeys(FORWARDED_APIS, BrokerApis.forward),
    versions.INCREMENTAL_ALTER_CONFIGS: BrokerApis.alter_configs,
    versions.ALTER_CONFIGS: BrokerApis.alter_configs,
    **dict.fromkeys(QUERY_TRANSLATORS, BrokerApis.query),
    **dict.fromkeys(TXN_APIS, BrokerApis.txn_request),
    versions.INIT_PRODUCER_ID: BrokerApis.init_producer_id,
    versions.DESCRIBE_TRANSACTIONS: BrokerApis.txn_view,
    versions.LIST_TRANSACTIONS: BrokerApis.txn_view,
    versions.DESCRIBE_ACLS: BrokerApis.forward,  # never called: the gate answers it from the image
}
