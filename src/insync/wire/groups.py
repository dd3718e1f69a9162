"""Consumer-group APIs <-> `groups.messages` and plain values: FindCoordinator (v0-v6), JoinGroup (v0-v9),
SyncGroup (v0-v5), Heartbeat (v0-v4), LeaveGroup (v0-v5), OffsetCommit (v2-v9), OffsetFetch (v1-v9),
ListGroups (v0-v5), DescribeGroups (v0-v5), DeleteGroups (v0-v2), OffsetDelete (v0).

Version differences handled here, as Kafka's clients expect them:
- FindCoordinator v0-v3 ask for one key, v4+ for a list; key type 0 is a group. insync has no transactions
  (key type 1) or share groups (2): those keys get INVALID_REQUEST, naming why.
- JoinGroup v0 has no rebalance timeout (the session timeout serves); from v4 a first join is answered
  MEMBER_ID_REQUIRED with the id to rejoin with (REFERENCE 13). LeaveGroup v3+ lists members with their errors.
- OffsetCommit's leader epoch comes from v6 (-1 before); OffsetFetch v8+ asks for several groups at once,
  earlier versions for one. OffsetDelete with a group error answers no topics, as Kafka's getErrorResponse does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.errors import KafkaError
from insync.groups.deletion import OffsetDeletion
from insync.groups.messages import (
    GroupDescription,
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    SyncGroup,
    SyncResult,
)
from insync.groups.offsets import NO_LEADER_EPOCH, CommittedOffset
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, field_or, millis, nested, response_class
from insync.types import TopicPartition
from insync.wire.entities import group
from insync.wire.versions import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)

GROUP_KEY_TYPE = 0
_UNSTABLE = errors.BY_NAME["UNSTABLE_OFFSET_COMMIT"]
TRANSACTION_KEY_TYPE = 1
NO_OFFSET = -1
DESCRIBE_GROUPS_NOT_FOUND_VERSION = 6  # KIP-1043: an unknown group is GROUP_ID_NOT_FOUND from this version on


# FindCoordinator ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoordinatorAnswer:
    """One key's coordinator; `message` only for a refusal of insync's own (Kafka's words otherwise)."""

    key: str
    error: KafkaError
    node_id: int = -1
    host: str = ""
    port: int = -1
    message: str | None = None


def find_coordinator_keys(request: DecodedRequest) -> tuple[int, list[str]]:
    """(key type, keys asked for)."""
    body = request.body
    version = check_body(body, FIND_COORDINATOR)
    key_type = int(field_or(body, "key_type", GROUP_KEY_TYPE))
    keys = [str(k) for k in body.coordinator_keys] if version >= 4 else [str(body.key)]
    return key_type, keys


def encode_find_coordinator(request: DecodedRequest, answers: Sequence[CoordinatorAnswer]) -> Any:
    """The answer, with Kafka's messages unless an answer has its own: KafkaApis sets none on v4+ coordinators
    (the field's default, ""), and `Errors.message()` before v4 ("NONE" on success, else the error's words)."""
    cls = response_class(FIND_COORDINATOR, request.api_version)
    if request.api_version >= 4:
        coordinator_cls = nested(cls, "Coordinator")
        return build(cls, throttle_time=NO_THROTTLE, coordinators=tuple(
            build(coordinator_cls, key=a.key, node_id=a.node_id, host=a.host, port=a.port, error_code=code(a.error),
                  error_message="" if a.message is None else a.message) for a in answers))
    assert len(answers) == 1, answers
    a = answers[0]
    message = a.error.message or a.error.name if a.message is None else a.message
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(a.error), error_message=message,
                 node_id=a.node_id, host=a.host, port=a.port)


# JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------------------


def decode_join(request: DecodedRequest, client_host: str) -> JoinGroup:
    body = request.body
    version = check_body(body, JOIN_GROUP)
    session_ms = millis(body.session_timeout)
    rebalance = field_or(body, "rebalance_timeout", None)
    return JoinGroup(
        group_id=str(body.group_id), member_id=str(body.member_id),
        group_instance_id=field_or(body, "group_instance_id", None), session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
        protocol_type=str(body.protocol_type),
        protocols=tuple((str(p.name), bytes(p.metadata)) for p in body.protocols),
        require_known_member_id=version >= 4, client_id=request.client_id or "", client_host=client_host)


def encode_join(request: DecodedRequest, result: JoinResult) -> Any:
    cls = response_class(JOIN_GROUP, request.api_version)
    member_cls = nested(cls, "JoinGroupResponseMember")
    members = tuple(build(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          metadata=m.metadata) for m in result.members)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(result.error), generation_id=result.generation_id,
                 protocol_type=result.protocol_type,
                 protocol_name=result.protocol_name if request.api_version >= 7 else result.protocol_name or "",
                 leader=result.leader, skip_assignment=False, member_id=result.member_id, members=members)


def decode_sync(request: DecodedRequest) -> SyncGroup:
    body = request.body
    check_body(body, SYNC_GROUP)
    return SyncGroup(
        group_id=str(body.group_id), generation_id=int(body.generation_id), member_id=str(body.member_id),
        group_instance_id=field_or(body, "group_instance_id", None),
        protocol_type=field_or(body, "protocol_type", None), protocol_name=field_or(body, "protocol_name", None),
        assignments=tuple((str(a.member_id), bytes(a.assignment)) for a in body.assignments))


def sync_lacks_protocol(request: DecodedRequest) -> bool:
    """Kafka's KafkaApis answers a SyncGroup v5+ without its protocol type or name INCONSISTENT_GROUP_PROTOCOL
    before anything else (`SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent`)."""
    body = request.body
    return request.api_version >= 5 and (body.protocol_type is None or body.protocol_name is None)


def encode_sync(request: DecodedRequest, result: SyncResult) -> Any:
    cls = response_class(SYNC_GROUP, request.api_version)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(result.error), protocol_type=result.protocol_type,
                 protocol_name=result.protocol_name, assignment=result.assignment)


def decode_heartbeat(request: DecodedRequest) -> Heartbeat:
    body = request.body
    check_body(body, HEARTBEAT)
    return Heartbeat(str(body.group_id), int(body.generation_id), str(body.member_id),
                     field_or(body, "group_instance_id", None))


def encode_heartbeat(request: DecodedRequest, error: KafkaError) -> Any:
    return build(response_class(HEARTBEAT, request.api_version), throttle_time=NO_THROTTLE, error_code=code(error))


def decode_leave(request: DecodedRequest) -> LeaveGroup:
    body = request.body
    version = check_body(body, LEAVE_GROUP)
    if version < 3:
        return LeaveGroup(str(body.group_id), ((str(body.member_id), None),))
    return LeaveGroup(str(body.group_id), tuple((str(m.member_id), m.group_instance_id) for m in body.members))


def encode_leave(request: DecodedRequest, result: LeaveResult) -> Any:
    cls = response_class(LEAVE_GROUP, request.api_version)
    if request.api_version < 3:
        # One member: its own error is the request's (Kafka's v0-v2 answer has nothing else).
        error = result.error if result.error is not errors.NONE or not result.members else result.members[0][2]
        return build(cls, throttle_time=NO_THROTTLE, error_code=code(error))
    member_cls = nested(cls, "MemberResponse")
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(result.error), members=tuple(
        build(member_cls, member_id=m, group_instance_id=i, error_code=code(e)) for m, i, e in result.members))


# OffsetCommit, OffsetFetch ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[tuple[TopicPartition, CommittedOffset], ...]  # commit timestamps are the broker's, set later


def decode_offset_commit(request: DecodedRequest) -> OffsetCommit:
    body = request.body
    check_body(body, OFFSET_COMMIT)
    offsets = tuple(
        (TopicPartition(str(topic.name), int(p.partition_index)),
         CommittedOffset(int(p.committed_offset), int(field_or(p, "committed_leader_epoch", NO_LEADER_EPOCH)),
                         p.committed_metadata or "", -1))
        for topic in body.topics for p in topic.partitions)
    return OffsetCommit(str(body.group_id), int(body.generation_id_or_member_epoch),
                        str(body.member_id), field_or(body, "group_instance_id", None), offsets)


def encode_offset_commit(request: DecodedRequest, results: Sequence[tuple[TopicPartition, KafkaError]]) -> Any:
    cls = response_class(OFFSET_COMMIT, request.api_version)
    topic_cls, partition_cls = nested(cls, "OffsetCommitResponseTopic"), nested(cls, "OffsetCommitResponsePartition")
    topics = tuple(build(topic_cls, name=topic, partitions=tuple(partitions)) for topic, partitions in group(
        (tp.topic, build(partition_cls, partition_index=tp.partition, error_code=code(e))) for tp, e in results))
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


@dataclass(frozen=True, slots=True)
class OffsetFetchGroup:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None: every partition the group has offsets for
    require_stable: bool = False  # v7+ (KIP-447): partitions with a commit in an open transaction are refused


@dataclass(frozen=True, slots=True)
class FetchedOffsets:
    group_id: str
    error: KafkaError
    partitions: tuple[tuple[TopicPartition, CommittedOffset | None], ...]  # None: no committed offset
    unstable: frozenset[TopicPartition] = frozenset()  # answered UNSTABLE_OFFSET_COMMIT (require_stable)


def decode_offset_fetch(request: DecodedRequest) -> list[OffsetFetchGroup]:
    body = request.body
    version = check_body(body, OFFSET_FETCH)

    def topics(given: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
        if given is None:
            return None
        return tuple((str(t.name), tuple(int(p) for p in t.partition_indexes)) for t in given)

    stable = bool(field_or(body, "require_stable", False))
    if version >= 8:
        return [OffsetFetchGroup(str(g.group_id), topics(g.topics), stable) for g in body.groups]
    return [OffsetFetchGroup(str(body.group_id), topics(body.topics), stable)]


def encode_offset_fetch(request: DecodedRequest, answers: Sequence[FetchedOffsets]) -> Any:
    version = request.api_version
    cls = response_class(OFFSET_FETCH, version)
    suffix = "s" if version >= 8 else ""
    topic_cls = nested(cls, f"OffsetFetchResponseTopic{suffix}")
    partition_cls = nested(cls, f"OffsetFetchResponsePartition{suffix}")

    def topics(answer: FetchedOffsets) -> tuple[Any, ...]:
        # v1 has no group-level error: a coordinator error is every partition's.
        partition_error = answer.error if version < 2 else errors.NONE
        rows = ((tp.topic, build(partition_cls, partition_index=tp.partition,
                                 committed_offset=NO_OFFSET if c is None else c.offset,
                                 committed_leader_epoch=NO_LEADER_EPOCH if c is None else c.leader_epoch,
                                 metadata="" if c is None else c.metadata,
                                 error_code=code(_UNSTABLE if tp in answer.unstable else partition_error)))
                for tp, c in answer.partitions)
        return tuple(build(topic_cls, name=name, partitions=tuple(ps)) for name, ps in group(rows))

    if version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        return build(cls, throttle_time=NO_THROTTLE, groups=tuple(
            build(group_cls, group_id=a.group_id, topics=topics(a), error_code=code(a.error)) for a in answers))
    assert len(answers) == 1, answers
    return build(cls, throttle_time=NO_THROTTLE, topics=topics(answers[0]), error_code=code(answers[0].error))


# ListGroups, DescribeGroups -----------------------------------------------------------------------------------


def list_groups_filter(request: DecodedRequest) -> tuple[frozenset[str], frozenset[str]]:
    """(states, types) asked for; empty means all. Kafka matches states case-insensitively."""
    body = request.body
    check_body(body, LIST_GROUPS)
    states = frozenset(s.lower() for s in field_or(body, "states_filter", ()))
    types = frozenset(t.lower() for t in field_or(body, "types_filter", ()))
    return states, types


def encode_list_groups(request: DecodedRequest, error: KafkaError, listed: Sequence[tuple[str, str, str]]) -> Any:
    cls = response_class(LIST_GROUPS, request.api_version)
    group_cls = nested(cls, "ListedGroup")
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), groups=tuple(
        build(group_cls, group_id=g, protocol_type=t, group_state=s, group_type="classic") for g, t, s in listed))


def describe_groups_ids(request: DecodedRequest) -> list[str]:
    check_body(request.body, DESCRIBE_GROUPS)
    return [str(g) for g in request.body.groups]


def encode_describe_groups(request: DecodedRequest,
                           described: Sequence[tuple[str, KafkaError, GroupDescription | None]]) -> Any:
    """An unknown group (no description, no error) is Dead; from v6 (KIP-1043) also GROUP_ID_NOT_FOUND with
    Kafka's message, before it Dead alone, as Kafka's group coordinator answers each version."""
    cls = response_class(DESCRIBE_GROUPS, request.api_version)
    group_cls, member_cls = nested(cls, "DescribedGroup"), nested(cls, "DescribedGroupMember")
    not_found = request.api_version >= DESCRIBE_GROUPS_NOT_FOUND_VERSION

    def one(group_id: str, error: KafkaError, d: GroupDescription | None) -> Any:
        members = () if d is None else tuple(
            build(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                  client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
            for m in d.members)
        message = None
        if d is None and error is errors.NONE and not_found:
            error, message = errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        return build(group_cls, error_code=code(error), error_message=message, group_id=group_id,
                     group_state="Dead" if d is None else d.state, protocol_type="" if d is None else d.protocol_type,
                     protocol_data="" if d is None else d.protocol_name, members=members,
                     authorized_operations=-2147483648)

    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(one(*x) for x in described))


# DeleteGroups, OffsetDelete ----------------------------------------------------------------------------------


def decode_delete_groups(request: DecodedRequest) -> list[str]:
    check_body(request.body, DELETE_GROUPS)
    return [str(g) for g in request.body.groups_names]


def encode_delete_groups(request: DecodedRequest, results: Sequence[tuple[str, KafkaError]]) -> Any:
    cls = response_class(DELETE_GROUPS, request.api_version)
    result_cls = nested(cls, "DeletableGroupResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(result_cls, group_id=g, error_code=code(e)) for g, e in results))


def decode_offset_delete(request: DecodedRequest) -> tuple[str, list[TopicPartition]]:
    """(group id, the partitions asked for, in request order)."""
    body = request.body
    check_body(body, OFFSET_DELETE)
    return str(body.group_id), [TopicPartition(str(t.name), int(p.partition_index))
                                for t in body.topics for p in t.partitions]


def encode_offset_delete(request: DecodedRequest, answer: OffsetDeletion) -> Any:
    cls = response_class(OFFSET_DELETE, request.api_version)
    topic_cls, partition_cls = nested(cls, "OffsetDeleteResponseTopic"), nested(cls, "OffsetDeleteResponsePartition")
    topics = tuple(build(topic_cls, name=topic, partitions=tuple(partitions)) for topic, partitions in group(
        (tp.topic, build(partition_cls, partition_index=tp.partition, error_code=code(e)))
        for tp, e in answer.partitions))
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(answer.error), topics=topics)
