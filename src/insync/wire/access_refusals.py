"""Whole-request authorization refusals at a broker, before anything is done (see `authorization`'s docstring).

`refusal(request, access, config, image)` is the answer refusing a request the principal may not make, or None
when it may go on. Each API's answer is built by its own translator's encoder, so a refused request reads as
every other refusal of that API does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.broker.log_dirs import AlterReplicaLogDirsResponse, DescribeLogDirsResponse
from insync.config import BrokerConfig
from insync.controller.messages import (
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
)
from insync.errors import KafkaError
from insync.groups.deletion import OffsetDeletion
from insync.groups.messages import JoinResult, LeaveResult, SyncResult
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import code
from insync.security.acl import AclOperation, ResourceType
from insync.types import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, BrokerEpoch
from insync.wire import (
    acls,
    client_quotas,
    configs,
    controller_apis,
    forwarding,
    groups,
    log_dirs,
    metadata_log,
    reassignments,
    scram_credentials,
    topics,
    versions,
)
from insync.wire import transactions as txn_api
from insync.wire.authorization import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TOPIC_DENIED,
    TRANSACTIONAL_ID_DENIED,
    RequestAccess,
)
from insync.wire.entities import wire_topic_key

Op = AclOperation
TOPIC_CONFIG_RESOURCE = 2  # Kafka's ConfigResource.Type codes
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
# The cluster operation each API needs (Kafka's KafkaApis), refused CLUSTER_AUTHORIZATION_FAILED.
CLUSTER_OPERATIONS: Mapping[int, AclOperation] = {
    versions.ELECT_LEADERS: Op.ALTER, versions.ALTER_PARTITION_REASSIGNMENTS: Op.ALTER,
    versions.LIST_PARTITION_REASSIGNMENTS: Op.DESCRIBE, versions.CREATE_ACLS: Op.ALTER,
    versions.DELETE_ACLS: Op.ALTER, versions.DESCRIBE_ACLS: Op.DESCRIBE, versions.DESCRIBE_LOG_DIRS: Op.DESCRIBE,
    versions.ALTER_REPLICA_LOG_DIRS: Op.ALTER, versions.DESCRIBE_USER_SCRAM_CREDENTIALS: Op.DESCRIBE,
    versions.ALTER_USER_SCRAM_CREDENTIALS: Op.ALTER, versions.DESCRIBE_CLIENT_QUOTAS: Op.DESCRIBE_CONFIGS,
    versions.ALTER_CLIENT_QUOTAS: Op.ALTER_CONFIGS,
}
# The transaction APIs, each checked as Kafka's KafkaApis checks it (`_txn_refusal`).
TXN_APIS = frozenset((versions.INIT_PRODUCER_ID, versions.ADD_PARTITIONS_TO_TXN, versions.ADD_OFFSETS_TO_TXN,
                      versions.END_TXN, versions.TXN_OFFSET_COMMIT, versions.WRITE_TXN_MARKERS))
INTERNAL_TOPICS = frozenset((OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC))
NOT_ATTEMPTED = errors.BY_NAME["OPERATION_NOT_ATTEMPTED"]
# What a controller serves without ClusterAction: the handshake that precedes any request.
CONTROLLER_OPEN_APIS = frozenset((versions.API_VERSIONS, versions.SASL_HANDSHAKE, versions.SASL_AUTHENTICATE))
# The group operation of the APIs about one group, refused GROUP_AUTHORIZATION_FAILED.
GROUP_OPERATIONS: Mapping[int, AclOperation] = {
    versions.JOIN_GROUP: Op.READ, versions.SYNC_GROUP: Op.READ, versions.HEARTBEAT: Op.READ,
    versions.LEAVE_GROUP: Op.READ, versions.OFFSET_COMMIT: Op.READ, versions.OFFSET_DELETE: Op.DELETE,
}


def refusal(request: DecodedRequest, access: RequestAccess, config: BrokerConfig,
            image: MetadataImage) -> Any | Split | None:
    """The answer refusing the request, a `Split` of a topic admin request some of whose topics are refused,
    or None."""
    key = request.api_key
    if key in CLUSTER_OPERATIONS:
        if access.allows_cluster(CLUSTER_OPERATIONS[key]):
            return None
        return _cluster_refusal(request, config, image)
    if key in GROUP_OPERATIONS:
        return _group_refusal(request, access)
    if key == versions.FIND_COORDINATOR:
        return _coordinator_refusal(request, access)
    if key == versions.DELETE_GROUPS:
        refused = [not access.allows(Op.DELETE, ResourceType.GROUP, str(g)) for g in request.body.groups_names]
        return _split(request, "groups_names", refused, "results", lambda asked: groups.encode_delete_groups(
            asked, [(str(name), GROUP_DENIED) for name in asked.body.groups_names]))
    if key in (versions.CREATE_TOPICS, versions.DELETE_TOPICS, versions.CREATE_PARTITIONS):
        return _topics_refusal(request, access, config, image)
    if key in (versions.ALTER_CONFIGS, versions.INCREMENTAL_ALTER_CONFIGS):
        return _configs_refusal(request, access)
    if key in TXN_APIS:
        return _txn_refusal(request, access, image)
    return None


def _cluster_refusal(request: DecodedRequest, config: BrokerConfig, image: MetadataImage) -> Any:
    message = CLUSTER_DENIED.message
    key = request.api_key
    if key in (versions.CREATE_ACLS, versions.DELETE_ACLS, versions.DESCRIBE_ACLS):
        return acls.refuse(request, CLUSTER_DENIED, message)
    if key in (versions.ALTER_PARTITION_REASSIGNMENTS, versions.LIST_PARTITION_REASSIGNMENTS):
        return reassignments.refuse(request, CLUSTER_DENIED, message)
    if key == versions.ELECT_LEADERS:  # Kafka sets the top-level error too
        return _with_error_code(topics.refuse_all(request, config, image, CLUSTER_DENIED, message), CLUSTER_DENIED)
    if key == versions.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return scram_credentials.refuse_describe(request, CLUSTER_DENIED, message)
    if key == versions.ALTER_USER_SCRAM_CREDENTIALS:
        return scram_credentials.refuse_alter(request, CLUSTER_DENIED, message)
    if key == versions.DESCRIBE_CLIENT_QUOTAS:
        return client_quotas.refuse_describe(request, CLUSTER_DENIED, message)
    if key == versions.ALTER_CLIENT_QUOTAS:
        return client_quotas.refuse_alter(request, CLUSTER_DENIED, message)
    if key == versions.DESCRIBE_LOG_DIRS:
        decoded = log_dirs.decode_describe_log_dirs(request)
        answer = log_dirs.encode_describe_log_dirs(
            DescribeLogDirsResponse(request.correlation_id, ()), decoded)
        return _with_error_code(answer, CLUSTER_DENIED)
    assert key == versions.ALTER_REPLICA_LOG_DIRS, key
    altered = log_dirs.decode_alter_replica_log_dirs(request)
    results = tuple((tp, CLUSTER_DENIED) for tp, _ in altered.request.destinations)
    return log_dirs.encode_alter_replica_log_dirs(AlterReplicaLogDirsResponse(request.correlation_id, results),
                                                  altered)


def _with_error_code(answer: Any, error: KafkaError) -> Any:
    return dataclasses.replace(answer, error_code=code(error))


def _group_refusal(request: DecodedRequest, access: RequestAccess) -> Any | Split | None:
    """READ (etc.) on the group refuses the whole request; OffsetCommit also needs READ on each topic, and, as
    Kafka's `handleOffsetCommitRequest`, commits the topics it may read while the others' partitions are
    answered TOPIC_AUTHORIZATION_FAILED."""
    key = request.api_key
    group_id = str(request.body.group_id)
    if key == versions.SYNC_GROUP and groups.sync_lacks_protocol(request):  # Kafka checks it before access
        return _group_answer(request, errors.INCONSISTENT_GROUP_PROTOCOL)
    if not access.allows(GROUP_OPERATIONS[key], ResourceType.GROUP, group_id):
        return _group_answer(request, GROUP_DENIED)
    if key == versions.OFFSET_COMMIT:
        refused = [not access.allows(Op.READ, ResourceType.TOPIC, str(t.name)) for t in request.body.topics]
        return _split(request, "topics", refused, "topics", lambda asked: _group_answer(asked, TOPIC_DENIED))
    return None


def _group_answer(request: DecodedRequest, error: KafkaError) -> Any:
    """The refusal of a one-group request: the group's error (OffsetCommit: each partition's)."""
    key = request.api_key
    if key == versions.JOIN_GROUP:
        member_id = str(request.body.member_id)
        return groups.encode_join(request, JoinResult(error, -1, None, None, "", member_id, ()))
    if key == versions.SYNC_GROUP:
        return groups.encode_sync(request, SyncResult(error, None, None, b""))
    if key == versions.HEARTBEAT:
        return groups.encode_heartbeat(request, error)
    if key == versions.LEAVE_GROUP:
        return groups.encode_leave(request, LeaveResult(error, ()))
    if key == versions.OFFSET_DELETE:
        return groups.encode_offset_delete(request, OffsetDeletion(error, (), ()))
    assert key == versions.OFFSET_COMMIT, key
    commit = groups.decode_offset_commit(request)
    return groups.encode_offset_commit(request, [(tp, error) for tp, _ in commit.offsets])


def _coordinator_refusal(request: DecodedRequest, access: RequestAccess) -> Any | Split | None:
    """FindCoordinator: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or transactional id (its error); with
    several keys (v4+) each key refused alone."""
    key_type, keys = groups.find_coordinator_keys(request)
    resource_type, error = ((ResourceType.TRANSACTIONAL_ID, TRANSACTIONAL_ID_DENIED) if key_type == TRANSACTION_KEY
                            else (ResourceType.GROUP, GROUP_DENIED))
    refused = [not access.allows(Op.DESCRIBE, resource_type, k) for k in keys]

    def refuse(asked: DecodedRequest) -> Any:
        return groups.encode_find_coordinator(asked, [groups.CoordinatorAnswer(k, error)
                                                      for k in groups.find_coordinator_keys(asked)[1]])

    if request.api_version < 4:  # one key, in `key`
        return refuse(request) if any(refused) else None
    return _split(request, "coordinator_keys", refused, "coordinators", refuse)


@dataclass(frozen=True, slots=True)
class Split:
    """Some topics of a topic admin request refused, as Kafka refuses them: `permitted` is the request without
    them, for the route; `refused` the API's answer refusing them, whose entries `merge` adds to the route's."""

    permitted: DecodedRequest
    refused: Any
    field: str  # the answer's list of per-topic results

    def merge(self, answer: Any) -> Any:
        merged = (*getattr(answer, self.field), *getattr(self.refused, self.field))
        return dataclasses.replace(answer, **{self.field: merged})


RESULT_FIELDS = {versions.CREATE_TOPICS: "topics", versions.CREATE_PARTITIONS: "results",
                 versions.DELETE_TOPICS: "responses"}


def _topics_refusal(request: DecodedRequest, access: RequestAccess, config: BrokerConfig,
                    image: MetadataImage) -> Any | Split | None:
    """CreateTopics: CREATE on the cluster, else on each topic; DeleteTopics: DELETE; CreatePartitions: ALTER.
    The topics refused are answered TOPIC_AUTHORIZATION_FAILED while the others go on (a `Split`)."""
    key, body = request.api_key, request.body
    if key == versions.CREATE_TOPICS and access.allows_cluster(Op.CREATE, log=False):
        return None
    operation = {versions.CREATE_TOPICS: Op.CREATE, versions.DELETE_TOPICS: Op.DELETE,
                 versions.CREATE_PARTITIONS: Op.ALTER}[key]
    field = "topic_names" if key == versions.DELETE_TOPICS and request.api_version < 6 else "topics"

    def name(entry: Any) -> str | None:  # a DeleteTopics topic id the image does not know names none
        return str(entry) if field == "topic_names" else wire_topic_key(image, entry).name

    names = sorted({n for n in map(name, getattr(body, field)) if n is not None})
    denied = {n for n in names if not access.allows(operation, ResourceType.TOPIC, n)}
    return _split(request, field, [name(e) in denied for e in getattr(body, field)], RESULT_FIELDS[key],
                  lambda asked: topics.refuse_all(asked, config, image, TOPIC_DENIED, TOPIC_DENIED.message))


def _split(request: DecodedRequest, field: str, refused: list[bool], result_field: str,
           refuse: Callable[[DecodedRequest], Any]) -> Any | Split | None:
    """The request's entries in `field` refused where `refused` says: None when none is, `refuse`'s answer to
    the request when all are, else a `Split` (the request without them, and the answer refusing them)."""
    entries = getattr(request.body, field)
    assert len(refused) == len(entries), (refused, entries)
    if not any(refused):
        return None
    refusal = refuse(_with(request, field, tuple(e for e, no in zip(entries, refused, strict=True) if no)))
    if all(refused):
        return refusal
    permitted = _with(request, field, tuple(e for e, no in zip(entries, refused, strict=True) if not no))
    return Split(permitted, refusal, result_field)


def _with(request: DecodedRequest, field: str, entries: tuple[Any, ...]) -> DecodedRequest:
    return dataclasses.replace(request, body=dataclasses.replace(request.body, **{field: entries}))


def _configs_refusal(request: DecodedRequest, access: RequestAccess) -> Any | Split | None:
    """(Incremental)AlterConfigs: ALTER_CONFIGS on each topic (TOPIC_AUTHORIZATION_FAILED), or on the cluster for
    broker resources (CLUSTER_AUTHORIZATION_FAILED); the resources refused are answered so, the others go on."""
    errors_by_resource = [_config_error(resource, access) for resource in request.body.resources]

    def refuse(asked: DecodedRequest) -> Any:
        answer = configs.refuse_alter_configs(asked, TOPIC_DENIED, TOPIC_DENIED.message)
        mine = [e for e in errors_by_resource if e is not None]
        return dataclasses.replace(answer, responses=tuple(  # each resource with its own error
            dataclasses.replace(r, error_code=code(e), error_message=e.message)
            for r, e in zip(answer.responses, mine, strict=True)))

    return _split(request, "resources", [e is not None for e in errors_by_resource], "responses", refuse)


def _config_error(resource: Any, access: RequestAccess) -> KafkaError | None:
    if int(resource.resource_type) == TOPIC_CONFIG_RESOURCE:
        permitted = access.allows(Op.ALTER_CONFIGS, ResourceType.TOPIC, str(resource.resource_name))
        return None if permitted else TOPIC_DENIED
    return None if access.allows_cluster(Op.ALTER_CONFIGS) else CLUSTER_DENIED


def _txn_refusal(request: DecodedRequest, access: RequestAccess, image: MetadataImage) -> Any | Split | None:
    """WRITE on the transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then what each API adds: READ
    on the group (AddOffsetsToTxn, TxnOffsetCommit), WRITE on AddPartitionsToTxn's topics and READ on
    TxnOffsetCommit's. The brokers' own requests (AddPartitionsToTxn v4, WriteTxnMarkers) need CLUSTER_ACTION
    (WriteTxnMarkers takes ALTER on the cluster too). An InitProducerId without an id is `request_error`'s."""
    key, body = request.api_key, request.body
    if key == versions.WRITE_TXN_MARKERS:
        if access.allows_cluster(Op.ALTER, log=False) or access.allows_cluster(Op.CLUSTER_ACTION):
            return None
        marked = txn_api.decode_markers(request)
        return txn_api.encode_markers_response(request, [(m, dict.fromkeys(m.partitions, CLUSTER_DENIED))
                                                         for m in marked])
    if key == versions.ADD_PARTITIONS_TO_TXN and request.api_version >= txn_api.BATCHED_VERSION:
        if access.allows_cluster(Op.CLUSTER_ACTION):
            return None
        return _with_error_code(txn_api.encode_batched(request, []), CLUSTER_DENIED)
    if key == versions.INIT_PRODUCER_ID and body.transactional_id is None:
        return None
    if key == versions.TXN_OFFSET_COMMIT:
        return _txn_offset_commit_refusal(request, access)
    asked = txn_api.decode(request)
    if not access.allows(Op.WRITE, ResourceType.TRANSACTIONAL_ID, asked.transactional_id):
        return txn_api.encode(request, TRANSACTIONAL_ID_DENIED)
    if key == versions.ADD_OFFSETS_TO_TXN and not access.allows(Op.READ, ResourceType.GROUP, asked.group_id):
        return txn_api.encode(request, GROUP_DENIED)
    if key != versions.ADD_PARTITIONS_TO_TXN:
        return None
    # Every partition refused if any is: the refused with their error, the others OPERATION_NOT_ATTEMPTED.
    allowed = {t: t not in INTERNAL_TOPICS and access.allows(Op.WRITE, ResourceType.TOPIC, t)
               for t in sorted({tp.topic for tp in asked.partitions})}
    if all(allowed.values()):
        return None
    refused = {tp: TOPIC_DENIED if not allowed[tp.topic] else errors.UNKNOWN_TOPIC_OR_PARTITION
               for tp in asked.partitions if not allowed[tp.topic] or not _exists(image, tp.topic, tp.partition)}
    return txn_api.encode(request, NOT_ATTEMPTED, partition_errors=refused)


def _txn_offset_commit_refusal(request: DecodedRequest, access: RequestAccess) -> Any | Split | None:
    """TxnOffsetCommit: WRITE on the transactional id, READ on the group, each refused for every partition; then
    the topics it may not READ refused TOPIC_AUTHORIZATION_FAILED while the others are committed."""
    commit = txn_api.decode_txn_offset_commit(request)

    def refuse(asked: DecodedRequest, error: KafkaError) -> Any:
        return txn_api.encode_txn_offset_commit(asked, [(tp, error) for tp, *_ in
                                                        txn_api.decode_txn_offset_commit(asked).offsets])

    if not access.allows(Op.WRITE, ResourceType.TRANSACTIONAL_ID, commit.transactional_id):
        return refuse(request, TRANSACTIONAL_ID_DENIED)
    if not access.allows(Op.READ, ResourceType.GROUP, commit.group_id):
        return refuse(request, GROUP_DENIED)
    refused = [not access.allows(Op.READ, ResourceType.TOPIC, str(t.name)) for t in request.body.topics]
    return _split(request, "topics", refused, "topics", lambda asked: refuse(asked, TOPIC_DENIED))


def _exists(image: MetadataImage, topic: str, partition: int) -> bool:
    topic_id = image.topic_ids_by_name.get(topic)
    return topic_id is not None and image.partition(topic_id, partition) is not None


def controller_refusal(request: DecodedRequest, access: RequestAccess, config: BrokerConfig,
                       image: MetadataImage) -> Any | None:
    """At the controller every request but the handshake needs ClusterAction on the cluster, as KRaft's controller
    APIs do (a broker's registration, heartbeats, AlterPartition and metadata fetches, and the admin requests
    brokers forward, which the broker authorized for its client first): CLUSTER_AUTHORIZATION_FAILED."""
    key = request.api_key
    if key in CONTROLLER_OPEN_APIS or access.allows_cluster(Op.CLUSTER_ACTION):
        return None
    if key == versions.BROKER_REGISTRATION:
        return controller_apis.encode_registration_response(
            BrokerRegistrationResponse(request.correlation_id, CLUSTER_DENIED, BrokerEpoch(-1)), request.api_version)
    if key == versions.BROKER_HEARTBEAT:
        return controller_apis.encode_heartbeat_response(
            BrokerHeartbeatResponse(request.correlation_id, CLUSTER_DENIED, True, 0), request.api_version)
    if key == versions.ALTER_PARTITION:
        return controller_apis.encode_alter_partition_response(
            AlterPartitionResponse(request.correlation_id, CLUSTER_DENIED, ()), request.api_version)
    if key == versions.FETCH:
        decoded = metadata_log.decode_fetch(request)
        return metadata_log.encode_fetch_response(None, dataclasses.replace(decoded, error=CLUSTER_DENIED))
    return forwarding.refuse_forwarded(request, config, image, CLUSTER_DENIED.message, CLUSTER_DENIED)
