"""Authorization of client requests at a broker, after Kafka's `KafkaApis` and `AuthHelper`: what each API needs.

`Authorization` builds the `security.authorizer.Authorizer` from the image's ACLs whenever they change; with no
authorizer configured nothing is checked. A `RequestAccess` is one request's view: principal, host, API, and the
denials it met (logged in `kafka.authorizer.logger`'s wording, recorded as `denied` events). As Kafka:
- whole-request refusals (`access_refusals`): cluster permissions (CLUSTER_AUTHORIZATION_FAILED), the
  single-group APIs (GROUP_AUTHORIZATION_FAILED), the transaction APIs (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
  a follower Fetch, an idempotent InitProducerId and a Produce of transactional batches (`request_error`);
- per-resource refusals (CreateTopics, DeleteGroups, AlterConfigs, ...): the rest goes on (`access_refusals.Split`);
- per-partition refusals (`deny_topics`) of Produce, consumer Fetch, ListOffsets, OffsetForLeaderEpoch,
  DeleteRecords, DescribeProducers and OffsetCommit's topics: TOPIC_AUTHORIZATION_FAILED for those only;
- answers that only some resources may see (`access_views`): Metadata, the Describe APIs, ListGroups,
  OffsetFetch, ListTransactions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from insync import errors
from insync.config import AuthorizerConfig
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import field_or
from insync.security.acl import CLUSTER_NAME, AclBinding, AclOperation, ResourceType
from insync.security.authorizer import Authorizer, audit_message
from insync.security.principal import KafkaPrincipal
from insync.types import TopicPartition
from insync.wire import fetch, versions
from insync.wire.entities import Decoded, Rejected

R = TypeVar("R")
Op = AclOperation
TOPIC_DENIED = errors.BY_NAME["TOPIC_AUTHORIZATION_FAILED"]
GROUP_DENIED = errors.BY_NAME["GROUP_AUTHORIZATION_FAILED"]
CLUSTER_DENIED = errors.BY_NAME["CLUSTER_AUTHORIZATION_FAILED"]
TRANSACTIONAL_ID_DENIED = errors.BY_NAME["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
# Kafka's ApiKeys names, for the audit log's `for request = ...`.
API_NAMES: Mapping[int, str] = {
    versions.PRODUCE: "PRODUCE", versions.FETCH: "FETCH", versions.LIST_OFFSETS: "LIST_OFFSETS",
    versions.METADATA: "METADATA", versions.OFFSET_COMMIT: "OFFSET_COMMIT", versions.OFFSET_FETCH: "OFFSET_FETCH",
    versions.FIND_COORDINATOR: "FIND_COORDINATOR", versions.JOIN_GROUP: "JOIN_GROUP",
    versions.HEARTBEAT: "HEARTBEAT", versions.LEAVE_GROUP: "LEAVE_GROUP", versions.SYNC_GROUP: "SYNC_GROUP",
    versions.DESCRIBE_GROUPS: "DESCRIBE_GROUPS", versions.LIST_GROUPS: "LIST_GROUPS",
    versions.CREATE_TOPICS: "CREATE_TOPICS", versions.DELETE_TOPICS: "DELETE_TOPICS",
    versions.DELETE_RECORDS: "DELETE_RECORDS", versions.INIT_PRODUCER_ID: "INIT_PRODUCER_ID",
    versions.OFFSET_FOR_LEADER_EPOCH: "OFFSET_FOR_LEADER_EPOCH", versions.DESCRIBE_ACLS: "DESCRIBE_ACLS",
    versions.CREATE_ACLS: "CREATE_ACLS", versions.DELETE_ACLS: "DELETE_ACLS",
    versions.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS", versions.ALTER_CONFIGS: "ALTER_CONFIGS",
    versions.ALTER_REPLICA_LOG_DIRS: "ALTER_REPLICA_LOG_DIRS", versions.DESCRIBE_LOG_DIRS: "DESCRIBE_LOG_DIRS",
    versions.CREATE_PARTITIONS: "CREATE_PARTITIONS", versions.DELETE_GROUPS: "DELETE_GROUPS",
    versions.ELECT_LEADERS: "ELECT_LEADERS", versions.INCREMENTAL_ALTER_CONFIGS: "INCREMENTAL_ALTER_CONFIGS",
    versions.ALTER_PARTITION_REASSIGNMENTS: "ALTER_PARTITION_REASSIGNMENTS",
    versions.LIST_PARTITION_REASSIGNMENTS: "LIST_PARTITION_REASSIGNMENTS", versions.OFFSET_DELETE: "OFFSET_DELETE",
    versions.DESCRIBE_CLUSTER: "DESCRIBE_CLUSTER", versions.DESCRIBE_PRODUCERS: "DESCRIBE_PRODUCERS",
    versions.DESCRIBE_TOPIC_PARTITIONS: "DESCRIBE_TOPIC_PARTITIONS", versions.API_VERSIONS: "API_VERSIONS",
    versions.DESCRIBE_USER_SCRAM_CREDENTIALS: "DESCRIBE_USER_SCRAM_CREDENTIALS",
    versions.ALTER_USER_SCRAM_CREDENTIALS: "ALTER_USER_SCRAM_CREDENTIALS", versions.ALTER_PARTITION: "ALTER_PARTITION",
    versions.DESCRIBE_CLIENT_QUOTAS: "DESCRIBE_CLIENT_QUOTAS", versions.ALTER_CLIENT_QUOTAS: "ALTER_CLIENT_QUOTAS",
    versions.BROKER_REGISTRATION: "BROKER_REGISTRATION", versions.BROKER_HEARTBEAT: "BROKER_HEARTBEAT",
    versions.DESCRIBE_TRANSACTIONS: "DESCRIBE_TRANSACTIONS", versions.LIST_TRANSACTIONS: "LIST_TRANSACTIONS",
}


@dataclass(frozen=True, slots=True)
class Denial:
    """One refused action: the audit line and the fields of its `denied` event."""

    api: str
    principal: str
    host: str
    operation: str
    resource_type: str
    resource: str
    message: str


class RequestAccess:
    """One request's view of the authorizer; `denials` collects what it refused (logged by the server)."""

    def __init__(self, authorizer: Authorizer, principal: KafkaPrincipal, host: str, api_key: int) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self.api_name = API_NAMES.get(api_key, str(api_key))
        self.denials: list[Denial] = []

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True) -> bool:
        """Whether the principal may; a refusal is a denial unless `log` is off (a filter, Kafka's
        logIfDenied=false: Metadata of every topic, ListGroups)."""
        decision = self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)
        if not decision.allowed and log:
            line = audit_message(self.principal, decision, operation, self.host, resource_type, name, self.api_name)
            self.denials.append(Denial(self.api_name, str(self.principal), self.host, operation.name,
                                       resource_type.name, name, line))
        return decision.allowed

    def allows_cluster(self, operation: AclOperation, *, log: bool = True) -> bool:
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME, log=log)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


class Authorization:
    """The broker's authorizer settings; `access` gives a request's view, or None when no authorizer is set."""

    def __init__(self, config: AuthorizerConfig) -> None:
        self.enabled = config.enabled
        self._super_users = config.super_users
        self._allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._acls: Mapping[str, AclBinding] | None = None
        self._authorizer = Authorizer()

    def authorizer(self, image: MetadataImage) -> Authorizer:
        if image.acls is not self._acls:  # images share the mapping until an ACL record replays
            self._acls = image.acls
            self._authorizer = Authorizer.create(image.acls.values(), self._super_users, self._allow_if_no_acl)
        return self._authorizer

    def access(self, image: MetadataImage, principal: KafkaPrincipal, host: str, api_key: int) -> RequestAccess | None:
        if not self.enabled:
            return None
        return RequestAccess(self.authorizer(image), principal, host, api_key)


# Per-partition refusals -------------------------------------------------------------------------------------

TOPIC_OPERATIONS: Mapping[int, AclOperation] = {
    versions.PRODUCE: Op.WRITE, versions.FETCH: Op.READ, versions.LIST_OFFSETS: Op.DESCRIBE,
    versions.OFFSET_FOR_LEADER_EPOCH: Op.DESCRIBE, versions.DELETE_RECORDS: Op.DELETE,
    versions.DESCRIBE_PRODUCERS: Op.READ,
}


def _topic_partition(item: Any) -> TopicPartition:
    """The partition of an internal request item: a TopicPartition, a `(TopicPartition, ...)` pair or an entity
    with one."""
    if isinstance(item, TopicPartition):
        return item
    found = getattr(item, "topic_partition", None)
    if found is None:
        found = item[0]
    assert isinstance(found, TopicPartition), item
    return found


def deny_topics(decoded: Decoded[R], access: RequestAccess, operation: AclOperation) -> Decoded[R]:
    """`decoded` with the partitions of topics the principal may not `operation` moved to its rejected ones
    (TOPIC_AUTHORIZATION_FAILED); each topic is decided, and a refusal logged, once."""
    verdicts: dict[str, bool] = {}
    kept, rejected = [], list(decoded.rejected)
    for item in decoded.request.partitions:  # type: ignore[attr-defined]
        tp = _topic_partition(item)
        if tp.topic not in verdicts:
            verdicts[tp.topic] = access.allows(operation, ResourceType.TOPIC, tp.topic)
        if verdicts[tp.topic]:
            kept.append(item)
        else:
            rejected.append(Rejected(decoded.key(tp.topic), tp.partition, TOPIC_DENIED))
    if len(kept) == len(decoded.request.partitions):  # type: ignore[attr-defined]
        return decoded
    request = dataclasses.replace(decoded.request, partitions=tuple(kept))  # type: ignore[type-var]
    return dataclasses.replace(decoded, request=request, rejected=tuple(rejected))


def deny_partitions(decoded: Decoded[R], error: KafkaError) -> Decoded[R]:
    """`decoded` with every partition it names refused `error`, as Kafka's `getErrorResponse` answers a request
    refused whole (a Produce of transactional batches without WRITE on their transactional id)."""
    rejected = [Rejected(r.topic, r.partition, error) for r in decoded.rejected]
    for item in decoded.request.partitions:  # type: ignore[attr-defined]
        tp = _topic_partition(item)
        rejected.append(Rejected(decoded.key(tp.topic), tp.partition, error))
    request = dataclasses.replace(decoded.request, partitions=())  # type: ignore[type-var]
    return dataclasses.replace(decoded, request=request, rejected=tuple(rejected))


def request_error(request: DecodedRequest, access: RequestAccess) -> KafkaError:
    """A follower Fetch (or OffsetForLeaderEpoch) needs CLUSTER_ACTION; an idempotent InitProducerId needs
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka's authorizeByResourceType); a Produce of
    transactional batches needs WRITE on its transactional id, else every partition is refused."""
    key, body = request.api_key, request.body
    if key == versions.PRODUCE and _has_transactional_batches(body):
        txn_id = field_or(body, "transactional_id", None)
        if txn_id is None or not access.allows(Op.WRITE, ResourceType.TRANSACTIONAL_ID, str(txn_id)):
            return TRANSACTIONAL_ID_DENIED
        return errors.NONE
    if key in (versions.FETCH, versions.OFFSET_FOR_LEADER_EPOCH) and _replica_id(request) >= 0:
        return errors.NONE if access.allows_cluster(Op.CLUSTER_ACTION) else CLUSTER_DENIED
    if key == versions.INIT_PRODUCER_ID and body.transactional_id is None:
        if access.allows_cluster(Op.IDEMPOTENT_WRITE, log=False) or access.authorizer.authorize_any(
                access.principal, access.host, Op.WRITE, ResourceType.TOPIC):
            return errors.NONE
        access.allows_cluster(Op.IDEMPOTENT_WRITE)  # for the log line
        return CLUSTER_DENIED
    return errors.NONE


# A v2 batch's magic byte and attributes (big-endian int16), whose bit 4 marks it transactional.
_MAGIC_AT, _ATTRIBUTES_AT, _TRANSACTIONAL = 16, 21, 0x10


def _has_transactional_batches(body: Any) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is transactional."""
    for topic in body.topic_data:
        for partition in topic.partition_data:
            records = partition.records
            if records and len(records) > _ATTRIBUTES_AT + 1 and records[_MAGIC_AT] == 2 and \
                    records[_ATTRIBUTES_AT + 1] & _TRANSACTIONAL:
                return True
    return False


def _replica_id(request: DecodedRequest) -> int:
    """The asking replica's broker id; negative for a consumer."""
    if request.api_key == versions.FETCH:
        return fetch.replica_id(request.body)
    return int(field_or(request.body, "replica_id", -1))
