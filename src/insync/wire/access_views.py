"""What a principal may see of an answer (see `authorization`'s docstring), after Kafka's KafkaApis.

- Metadata: a topic the principal may not DESCRIBE is left out of a listing of every topic (quietly, as Kafka's),
  and answered TOPIC_AUTHORIZATION_FAILED when asked for by name or id; so is a topic to be created automatically
  without CREATE, which is then not created (`metadata_query`). The authorized operations when asked for.
- DescribeCluster: `cluster_authorized_operations`. DescribeTopicPartitions: TOPIC_AUTHORIZATION_FAILED for a
  topic it may not DESCRIBE. DescribeConfigs: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or the
  cluster for a broker (CLUSTER_AUTHORIZATION_FAILED), the configs withheld.
- DescribeGroups: GROUP_AUTHORIZATION_FAILED for a group it may not DESCRIBE, its `authorized_operations`
  otherwise. ListGroups: every group with DESCRIBE on the cluster, else the groups it may DESCRIBE.
  OffsetFetch: GROUP_AUTHORIZATION_FAILED without DESCRIBE on the group; topics it may not DESCRIBE are left out.
- ListTransactions: the transactional ids it may DESCRIBE. DescribeTransactions: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  for an id it may not DESCRIBE, and only the topics it may DESCRIBE.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import ZERO_UUID, build, build_defaults, code, field_or, has_field, nested
from insync.security.acl import AclOperation, ResourceType
from insync.wire import versions
from insync.wire.authorization import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TOPIC_DENIED,
    TRANSACTIONAL_ID_DENIED,
    RequestAccess,
)
from insync.wire.metadata import MetadataQuery

Op = AclOperation
TOPIC_CONFIG_RESOURCE = 2
NOT_ASKED = -(2**31)  # Kafka's authorized_operations when the request did not ask for them


def metadata_query(query: MetadataQuery, access: RequestAccess, image: MetadataImage
                   ) -> tuple[MetadataQuery, tuple[str, ...]]:
    """The query without the named topics the principal may not see (or create), and those names."""
    if query.topics is None:
        return query, ()
    denied = tuple(name for name in query.topics if not _may_see(name, query, access, image))
    if not denied:
        return query, ()
    return dataclasses.replace(query, topics=tuple(n for n in query.topics if n not in denied)), denied


def _may_see(name: str, query: MetadataQuery, access: RequestAccess, image: MetadataImage) -> bool:
    if not access.allows(Op.DESCRIBE, ResourceType.TOPIC, name):
        return False
    if image.topic(name) is not None or not query.allow_auto_topic_creation:
        return True
    return access.allows_cluster(Op.CREATE, log=False) or access.allows(Op.CREATE, ResourceType.TOPIC, name)


def metadata_view(request: DecodedRequest, answer: Any, access: RequestAccess, denied: tuple[str, ...]) -> Any:
    body = request.body
    topic_cls = nested(type(answer), "MetadataResponseTopic")
    with_ops = bool(field_or(body, "include_topic_authorized_operations", False))
    listed_all = body.topics is None or (request.api_version == 0 and not body.topics)
    topics = []
    for topic in answer.topics:
        if listed_all and not access.allows(Op.DESCRIBE, ResourceType.TOPIC, str(topic.name), log=False):
            continue
        if not listed_all and topic.name is not None and not access.allows(Op.DESCRIBE, ResourceType.TOPIC,
                                                                          str(topic.name)):
            # asked for by id (names were taken out of the query): refused, its name not revealed
            topics.append(dataclasses.replace(topic, error_code=code(TOPIC_DENIED), name=None, partitions=()))
            continue
        if with_ops and has_field(topic, "topic_authorized_operations"):
            topic = dataclasses.replace(topic, topic_authorized_operations=access.operations(
                ResourceType.TOPIC, str(topic.name)))
        topics.append(topic)
    topics.extend(build(topic_cls, error_code=code(TOPIC_DENIED), name=name, topic_id=ZERO_UUID, is_internal=False,
                        partitions=(), topic_authorized_operations=NOT_ASKED) for name in denied)
    answer = dataclasses.replace(answer, topics=tuple(topics))
    if field_or(body, "include_cluster_authorized_operations", False) and has_field(
            answer, "cluster_authorized_operations"):
        answer = dataclasses.replace(answer, cluster_authorized_operations=_cluster_operations(access))
    return answer


def _cluster_operations(access: RequestAccess) -> int:
    """Kafka answers the cluster's operations only to a principal that may DESCRIBE it, 0 otherwise."""
    return access.operations(ResourceType.CLUSTER, "kafka-cluster") if access.allows_cluster(
        Op.DESCRIBE, log=False) else 0


def view(request: DecodedRequest, answer: Any, access: RequestAccess) -> Any:
    """`answer` as the principal may see it, for the describe APIs this module names; others unchanged."""
    key = request.api_key
    if answer is None:
        return answer
    if key == versions.DESCRIBE_CLUSTER:
        if request.body.include_cluster_authorized_operations:
            return dataclasses.replace(answer, cluster_authorized_operations=_cluster_operations(access))
        return answer
    if key == versions.DESCRIBE_TOPIC_PARTITIONS:
        # Asked for every topic, Kafka leaves out silently those the principal may not describe.
        listed = answer.topics if request.body.topics else tuple(
            t for t in answer.topics if access.allows(Op.DESCRIBE, ResourceType.TOPIC, str(t.name), log=False))
        return dataclasses.replace(answer, topics=tuple(_described_topic(t, access) for t in listed))
    if key == versions.DESCRIBE_CONFIGS:
        return dataclasses.replace(answer, results=tuple(_described_configs(r, access) for r in answer.results))
    if key == versions.DESCRIBE_GROUPS:
        with_ops = bool(field_or(request.body, "include_authorized_operations", False))
        return dataclasses.replace(answer, groups=tuple(_described_group(g, access, with_ops)
                                                        for g in answer.groups))
    if key == versions.LIST_GROUPS:
        if access.allows_cluster(Op.DESCRIBE, log=False):
            return answer
        return dataclasses.replace(answer, groups=tuple(
            g for g in answer.groups if access.allows(Op.DESCRIBE, ResourceType.GROUP, str(g.group_id), log=False)))
    if key == versions.OFFSET_FETCH:
        return _fetched_offsets(request, answer, access)
    if key == versions.LIST_TRANSACTIONS:
        return dataclasses.replace(answer, transaction_states=tuple(
            t for t in answer.transaction_states
            if access.allows(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, str(t.transactional_id), log=False)))
    if key == versions.DESCRIBE_TRANSACTIONS:
        return dataclasses.replace(answer, transaction_states=tuple(
            _described_transaction(t, access) for t in answer.transaction_states))
    return answer


def _described_transaction(state: Any, access: RequestAccess) -> Any:
    """A transaction without DESCRIBE on its id: its error alone, as Kafka's; with it, only the topics the
    principal may DESCRIBE."""
    if not access.allows(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, str(state.transactional_id)):
        return build_defaults(type(state), error_code=code(TRANSACTIONAL_ID_DENIED),
                              transactional_id=state.transactional_id)
    return dataclasses.replace(state, topics=tuple(
        t for t in state.topics if access.allows(Op.DESCRIBE, ResourceType.TOPIC, str(t.topic), log=False)))


def _described_topic(topic: Any, access: RequestAccess) -> Any:
    if topic.name is None or access.allows(Op.DESCRIBE, ResourceType.TOPIC, str(topic.name)):
        return topic
    return dataclasses.replace(topic, error_code=code(TOPIC_DENIED), topic_id=ZERO_UUID, partitions=())


def _described_configs(result: Any, access: RequestAccess) -> Any:
    name = str(result.resource_name)
    error: KafkaError | None = None
    if int(result.resource_type) == TOPIC_CONFIG_RESOURCE:
        if not access.allows(Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
            error = TOPIC_DENIED
    elif not access.allows_cluster(Op.DESCRIBE_CONFIGS):
        error = CLUSTER_DENIED
    if error is None:
        return result
    return dataclasses.replace(result, error_code=code(error), error_message=error.message, configs=())


def _described_group(described: Any, access: RequestAccess, with_ops: bool) -> Any:
    group_id = str(described.group_id)
    if not access.allows(Op.DESCRIBE, ResourceType.GROUP, group_id):
        return dataclasses.replace(described, error_code=code(GROUP_DENIED), group_state="", protocol_type="",
                                   protocol_data="", members=())
    if with_ops and has_field(described, "authorized_operations"):
        return dataclasses.replace(described, authorized_operations=access.operations(ResourceType.GROUP, group_id))
    return described


def _fetched_offsets(request: DecodedRequest, answer: Any, access: RequestAccess) -> Any:
    """v8+ answers per group; older versions answer one group at the top."""
    if has_field(answer, "groups"):
        return dataclasses.replace(answer, groups=tuple(_group_offsets(g, str(g.group_id), access)
                                                        for g in answer.groups))
    return _group_offsets(answer, str(request.body.group_id), access)


def _group_offsets(entity: Any, group_id: str, access: RequestAccess) -> Any:
    if not access.allows(Op.DESCRIBE, ResourceType.GROUP, group_id):
        return dataclasses.replace(entity, error_code=code(GROUP_DENIED), topics=())
    return dataclasses.replace(entity, topics=tuple(
        t for t in entity.topics if access.allows(Op.DESCRIBE, ResourceType.TOPIC, str(t.name), log=False)))
