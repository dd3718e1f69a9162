"""One consumer group's state, Kafka's GroupMetadata and MemberMetadata, with the checks that read only it.

`GroupMembership` (membership.py) owns these objects and is the only code that changes them; what is here reads
one group: its earliest deadline, the protocol its members vote for, whether a member is known or fenced, whether
a joining member speaks the group's protocols, and the answers a join or sync gets once the group allows one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from insync import errors
from insync.errors import KafkaError
from insync.groups.messages import (
    GroupDescription,
    JoinedMember,
    JoinGroup,
    JoinResult,
    MemberDescription,
    SyncResult,
)


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"  # forgotten by `remove_groups`; never seen by callers


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    last_seen_ms: int  # the last join, sync, heartbeat or commit: the session runs from here
    join_token: int | None = None  # a held join
    sync_token: int | None = None  # a held sync
    assignment: bytes = b""

    def session_deadline_ms(self) -> int | None:
        if self.join_token is not None or self.sync_token is not None:
            return None  # waiting for an answer: the session restarts with it
        return self.last_seen_ms + self.session_timeout_ms

    def metadata(self, protocol_name: str) -> bytes:
        return next(metadata for name, metadata in self.protocols if name == protocol_name)


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str = ""
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)  # in join order
    pending: dict[str, int] = field(default_factory=dict)  # member id told MEMBER_ID_REQUIRED -> expiry ms
    static: dict[str, str] = field(default_factory=dict)  # group instance id -> its current member id
    join_deadline_ms: int | None = None  # PreparingRebalance ends by then
    initial_delay_remaining_ms: int | None = None  # not None during the initial delay (InitialDelayedJoin)
    new_member_added: bool = False  # a join arrived during the current initial delay
    pending_sync: set[str] = field(default_factory=set)  # members whose sync for this generation is awaited
    sync_deadline_ms: int | None = None

    def deadline_ms(self) -> int | None:
        """The earliest of the rebalance and sync deadlines, the pending members' expiries and the sessions."""
        deadlines = [d for d in (self.join_deadline_ms, self.sync_deadline_ms) if d is not None]
        deadlines += self.pending.values()
        deadlines += [d for m in self.members.values() if (d := m.session_deadline_ms()) is not None]
        return min(deadlines, default=None)

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: each member votes for its first protocol that every member supports."""
        assert self.members
        members = self.members.values()
        candidates = set.intersection(*({name for name, _ in m.protocols} for m in members))
        assert candidates, "a join sharing no protocol with the group was accepted"
        votes = Counter(next(name for name, _ in m.protocols if name in candidates) for m in members)
        return max(votes, key=lambda name: votes[name])  # ties go to the earliest vote: deterministic

    def member_error(self, member_id: str, group_instance_id: str | None) -> KafkaError:
        """Kafka's isStaticMemberFenced, then whether the member is known."""
        if group_instance_id is not None and self.static.get(group_instance_id, member_id) != member_id:
            return errors.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return errors.UNKNOWN_MEMBER_ID
        return errors.NONE

    def join_answer(self, member: MemberMetadata) -> JoinResult:
        protocol_name, leader = self.protocol_name, self.leader
        assert protocol_name is not None and leader is not None and member.member_id in self.members
        members: tuple[JoinedMember, ...] = ()
        if member.member_id == leader:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol_name)) for m in self.members.values()
            )
        generation_id, protocol_type = self.generation_id, self.protocol_type
        return JoinResult(errors.NONE, generation_id, protocol_type, protocol_name, leader, member.member_id, members)

    def sync_answer(self, member: MemberMetadata) -> SyncResult:
        assert self.state is GroupState.STABLE
        return SyncResult(errors.NONE, self.protocol_type, self.protocol_name, member.assignment)

    def summary(self) -> GroupDescription:
        """Kafka's GroupMetadata.summary: protocol, metadata and assignments are shown only when Stable."""
        protocol_name = self.protocol_name if self.state is GroupState.STABLE else None
        members = tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
            if protocol_name is None
            else MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.metadata(protocol_name), m.assignment)
            for m in self.members.values()
        )
        return GroupDescription(self.group_id, self.state.value, self.protocol_type, protocol_name or "", members)


def protocol_error(group: GroupMetadata | None, request: JoinGroup, excluded: str | None) -> KafkaError:
    """Kafka's supportsProtocols: the member shares a protocol with every other member, of the same type."""
    if not request.protocol_type or not request.protocols:
        return errors.INCONSISTENT_GROUP_PROTOCOL
    others = [] if group is None else [m for m in group.members.values() if m.member_id != excluded]
    if not others:
        return errors.NONE
    assert group is not None
    if request.protocol_type != group.protocol_type:
        return errors.INCONSISTENT_GROUP_PROTOCOL
    common = {name for name, _ in request.protocols}
    for other in others:  # bounded by group_max_size
        common &= {name for name, _ in other.protocols}
    return errors.NONE if common else errors.INCONSISTENT_GROUP_PROTOCOL


def generation_error(group: GroupMetadata | None, member_id: str, group_instance_id: str | None,
                     generation_id: int) -> KafkaError:
    """What SyncGroup and Heartbeat both check first: the group, the member, then its generation."""
    if group is None:
        return errors.UNKNOWN_MEMBER_ID
    error = group.member_error(member_id, group_instance_id)
    if error is not errors.NONE:
        return error
    return errors.ILLEGAL_GENERATION if generation_id != group.generation_id else errors.NONE
