"""The internal requests and results of the group coordinator (Kafka's classic consumer-group protocol).

Plain frozen dataclasses, like `broker.messages`: `wire.groups` translates JoinGroup (11), SyncGroup (14),
Heartbeat (12), LeaveGroup (13), ListGroups (16) and DescribeGroups (15) of any supported version to and from
them, and `groups.membership.GroupMembership` (sans-IO) answers them. A request that must wait (a join while the
group rebalances, a sync before the leader's assignment) is answered later, through a `Completion` naming the
`token` the driver gave with the request.

Member metadata and assignments stay opaque bytes: the coordinator never reads them (the client-side assignor
does), it only checks that every member speaks a common protocol of the same protocol type.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.errors import KafkaError

UNKNOWN_MEMBER = ""  # the member id of a first join
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinGroup:
    group_id: str
    member_id: str  # UNKNOWN_MEMBER on a first join
    group_instance_id: str | None  # static membership (KIP-345); None for dynamic members
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the translator passes the session timeout, as Kafka does
    protocol_type: str  # "consumer" for Kafka's consumers
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, subscription metadata), in preference order
    require_known_member_id: bool  # v4+: a first join is answered MEMBER_ID_REQUIRED with the id to rejoin with
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes  # the member's subscription for the chosen protocol


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: KafkaError
    generation_id: int  # NO_GENERATION with an error
    protocol_type: str | None
    protocol_name: str | None
    leader: str  # the leader's member id ("" with an error)
    member_id: str  # the id the member must use from now on (also with MEMBER_ID_REQUIRED)
    members: tuple[JoinedMember, ...]  # every member, to the leader only; empty for the others


@dataclass(frozen=True, slots=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+: checked against the group's when given
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member id, assignment): from the leader only


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: KafkaError
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes  # b"" with an error, or for a member the leader gave nothing


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    group_id: str
    members: tuple[tuple[str, str | None], ...]  # (member id, group instance id); v0-v2 send one, by member id


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: KafkaError  # the group's: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ... or NONE
    members: tuple[tuple[str, str | None, KafkaError], ...]  # per member asked for


@dataclass(frozen=True, slots=True)
class Completion:
    """The answer to a request that waited: `token` is what the driver passed with it."""

    token: int
    result: JoinResult | SyncResult


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # for the group's chosen protocol; b"" while it is not chosen
    assignment: bytes  # b"" until the group is Stable


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol_name: str  # "" until chosen
    members: tuple[MemberDescription, ...]
