"""Group membership for the classic consumer-group protocol: Kafka's GroupCoordinator and GroupMetadata, sans-IO.

`GroupMembership` holds every group this broker coordinates, in memory, and reads no clock: each call takes
`now_ms`, and the driver calls `tick` when the clock passes `next_deadline_ms()`. A request answered at once is
answered in the returned `Completion`s; one that must wait (a join during a rebalance, a follower's sync before
the leader's assignment) is held under its `token` and answered by the return value of a later call. Any call may
return answers to other held requests; every token is answered exactly once.

A group moves Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back to PreparingRebalance when its
membership changes, and to Empty when the last member goes (the generation is still bumped, as in Kafka):
- PreparingRebalance ends once every member has rejoined and no pending member (told MEMBER_ID_REQUIRED) is
  outstanding, or at the rebalance deadline (the largest rebalance timeout when the rebalance began), which
  removes who did not rejoin. The group then gets generation + 1, the protocol every member supports with the
  most first-choice votes, and a leader (the old one if it rejoined), whose join answer lists every member.
- A rebalance from Empty first waits `initial_rebalance_delay_ms` (Kafka's InitialDelayedJoin): while members
  keep joining a generation-0 group the wait is extended by the delay, up to the rebalance timeout in all.
  0 turns the stage off: the rebalance then ends as soon as everybody has joined.
- CompletingRebalance holds syncs until the leader's brings the assignments. Members that have not synced by
  the rebalance timeout are removed and the group rebalances (Kafka 3.2's DelayedSync).
- A session expires `session_timeout_ms` after the member's last join, sync, heartbeat or commit, but not while
  a join or sync of it is held (as in Kafka; the rebalance and sync deadlines bound those waits).
Deadlines are indexed by group in a heap holding one live entry per group, never later than the group's
earliest deadline: a heartbeat only moves a deadline later, so it pushes nothing; a stale entry is corrected
when it reaches the top.

Deviations from Kafka, for simplicity:
- A static member (group.instance.id) joining with an empty member id replaces the old member and always
  triggers a rebalance (Kafka skips it when nothing changed); static members that miss a rebalance are removed
  like dynamic ones (Kafka keeps them until their session expires).
- A known member's protocols are checked against the other members only (Kafka counts its old ones too).
- Nothing is persisted. At `groups_max` groups, a join that would create one evicts an Empty group without
  pending members, or is refused COORDINATOR_NOT_AVAILABLE.
- A join or sync superseded by a newer one of the same member is answered REBALANCE_IN_PROGRESS (Kafka drops
  the older callback).
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from insync import errors
from insync.errors import KafkaError
from insync.groups.messages import (
    NO_GENERATION,
    UNKNOWN_MEMBER,
    Completion,
    GroupDescription,
    Heartbeat,
    JoinedMember,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    MemberDescription,
    SyncGroup,
    SyncResult,
)

_UNKNOWN_MEMBER_ID = errors.BY_NAME["UNKNOWN_MEMBER_ID"]
_ILLEGAL_GENERATION = errors.BY_NAME["ILLEGAL_GENERATION"]
_REBALANCE_IN_PROGRESS = errors.BY_NAME["REBALANCE_IN_PROGRESS"]
_INCONSISTENT_GROUP_PROTOCOL = errors.BY_NAME["INCONSISTENT_GROUP_PROTOCOL"]
_FENCED_INSTANCE_ID = errors.BY_NAME["FENCED_INSTANCE_ID"]
_MEMBER_ID_REQUIRED = errors.BY_NAME["MEMBER_ID_REQUIRED"]
_GROUP_MAX_SIZE_REACHED = errors.BY_NAME["GROUP_MAX_SIZE_REACHED"]
_INVALID_SESSION_TIMEOUT = errors.BY_NAME["INVALID_SESSION_TIMEOUT"]
_INVALID_GROUP_ID = errors.BY_NAME["INVALID_GROUP_ID"]
_NOT_COORDINATOR = errors.BY_NAME["NOT_COORDINATOR"]
_COORDINATOR_NOT_AVAILABLE = errors.BY_NAME["COORDINATOR_NOT_AVAILABLE"]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"  # forgotten by `remove_groups`; never seen by callers


@dataclass(slots=True)
class _Member:
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
class _Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str = ""
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)  # in join order
    pending: dict[str, int] = field(default_factory=dict)  # member id told MEMBER_ID_REQUIRED -> expiry ms
    static: dict[str, str] = field(default_factory=dict)  # group instance id -> its current member id
    join_deadline_ms: int | None = None  # PreparingRebalance ends by then
    initial_delay_remaining_ms: int | None = None  # not None during the initial delay (InitialDelayedJoin)
    new_member_added: bool = False  # a join arrived during the current initial delay
    pending_sync: set[str] = field(default_factory=set)  # members whose sync for this generation is awaited
    sync_deadline_ms: int | None = None


def _join_error(error: KafkaError, member_id: str) -> JoinResult:
    return JoinResult(error, NO_GENERATION, None, None, "", member_id, ())


def _sync_error(error: KafkaError) -> SyncResult:
    return SyncResult(error, None, None, b"")


class GroupMembership:
    def __init__(self, *, seed: int, min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1_800_000,
                 initial_rebalance_delay_ms: int = 3000, group_max_size: int = 1000, groups_max: int = 10_000) -> None:
        assert 0 <= min_session_timeout_ms <= max_session_timeout_ms
        assert initial_rebalance_delay_ms >= 0 and group_max_size > 0 and groups_max > 0
        self._random = random.Random(seed)  # member ids: the simulator replays them from its seed
        self._min_session_timeout_ms = min_session_timeout_ms
        self._max_session_timeout_ms = max_session_timeout_ms
        self._initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._group_max_size = group_max_size
        self._groups_max = groups_max
        self._groups: dict[str, _Group] = {}
        self._held: set[int] = set()  # tokens of held joins and syncs
        self._heap: list[tuple[int, str]] = []  # (deadline ms, group id), see `_arm`
        self._armed: dict[str, int] = {}  # group id -> deadline of its live heap entry

    # ---- JoinGroup

    def join(self, now_ms: int, token: int, request: JoinGroup) -> list[Completion]:
        assert token not in self._held, token
        if not request.group_id:
            return [Completion(token, _join_error(_INVALID_GROUP_ID, request.member_id))]
        if not self._min_session_timeout_ms <= request.session_timeout_ms <= self._max_session_timeout_ms:
            return [Completion(token, _join_error(_INVALID_SESSION_TIMEOUT, request.member_id))]
        group = self._groups.get(request.group_id)
        if request.member_id == UNKNOWN_MEMBER:
            out = self._join_new_member(now_ms, token, request, group)
        elif group is None:
            out = [Completion(token, _join_error(_UNKNOWN_MEMBER_ID, request.member_id))]
        else:
            out = self._join_known_member(now_ms, token, request, group)
        if (group := self._groups.get(request.group_id)) is not None:
            self._arm(group)
        return out

    def _join_new_member(self, now_ms: int, token: int, request: JoinGroup,
                         group: _Group | None) -> list[Completion]:
        instance = request.group_instance_id
        replaced = None if group is None or instance is None else group.static.get(instance)
        error = self._joining_error(group, request, replaced)
        if error is errors.NONE and group is None:
            group = self._create_group(request.group_id)
            error = _COORDINATOR_NOT_AVAILABLE if group is None else errors.NONE
        if error is not errors.NONE:
            return [Completion(token, _join_error(error, request.member_id))]
        assert group is not None
        # Kafka names static members after their instance id, dynamic ones after their client id.
        member_id = f"{instance or request.client_id}-{uuid.UUID(int=self._random.getrandbits(128), version=4)}"
        assert member_id not in group.members and member_id not in group.pending
        if replaced is not None:
            # The old incarnation is fenced: its requests carry the instance id, which now maps to another member.
            out = self._remove_member(group, group.members[replaced], _FENCED_INSTANCE_ID)
            return out + self._add_member(now_ms, token, request, group, member_id)
        if request.require_known_member_id and instance is None:
            if len(group.pending) >= self._group_max_size:
                return [Completion(token, _join_error(_GROUP_MAX_SIZE_REACHED, request.member_id))]
            group.pending[member_id] = now_ms + request.session_timeout_ms
            return [Completion(token, _join_error(_MEMBER_ID_REQUIRED, member_id))]
        return self._add_member(now_ms, token, request, group, member_id)

    def _join_known_member(self, now_ms: int, token: int, request: JoinGroup, group: _Group) -> list[Completion]:
        member_id = request.member_id
        if member_id in group.pending:
            error = self._joining_error(group, request, None)
            if error is not errors.NONE:
                return [Completion(token, _join_error(error, member_id))]
            del group.pending[member_id]
            return self._add_member(now_ms, token, request, group, member_id)
        error = self._member_error(group, member_id, request.group_instance_id)
        if error is errors.NONE:
            error = self._protocol_error(group, request, member_id)
        if error is not errors.NONE:
            return [Completion(token, _join_error(error, member_id))]
        member = group.members[member_id]
        member.last_seen_ms = now_ms
        unchanged = member.protocols == request.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # The member lost its join answer: repeat it (Kafka does) rather than rebalance again.
            return [Completion(token, self._join_answer(group, member))]
        if group.state is GroupState.STABLE and unchanged and member_id != group.leader:
            return [Completion(token, self._join_answer(group, member))]
        out = self._fail_held(member, _REBALANCE_IN_PROGRESS)  # superseded by this one
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.join_token = self._hold(token)
        return out + self._rebalance(group, now_ms)

    def _joining_error(self, group: _Group | None, request: JoinGroup, replaced: str | None) -> KafkaError:
        """Why a member that is not in the group yet may not join it (`replaced` is the member it replaces)."""
        if group is None:
            return self._protocol_error(None, request, None)
        if replaced is None and len(group.members) >= self._group_max_size:
            return _GROUP_MAX_SIZE_REACHED
        return self._protocol_error(group, request, replaced)

    def _protocol_error(self, group: _Group | None, request: JoinGroup, excluded: str | None) -> KafkaError:
        """Kafka's supportsProtocols: the member shares a protocol with every other member, of the same type."""
        if not request.protocol_type or not request.protocols:
            return _INCONSISTENT_GROUP_PROTOCOL
        others = [] if group is None else [m for m in group.members.values() if m.member_id != excluded]
        if not others:
            return errors.NONE
        assert group is not None
        if request.protocol_type != group.protocol_type:
            return _INCONSISTENT_GROUP_PROTOCOL
        common = {name for name, _ in request.protocols}
        for other in others:  # bounded by group_max_size
            common &= {name for name, _ in other.protocols}
        return errors.NONE if common else _INCONSISTENT_GROUP_PROTOCOL

    def _add_member(self, now_ms: int, token: int, request: JoinGroup, group: _Group,
                    member_id: str) -> list[Completion]:
        assert member_id not in group.members and group.state is not GroupState.DEAD
        if not group.members:
            group.protocol_type = request.protocol_type
        group.members[member_id] = _Member(
            member_id, request.group_instance_id, request.client_id, request.client_host, request.session_timeout_ms,
            request.rebalance_timeout_ms, request.protocols, now_ms, join_token=self._hold(token),
        )
        if request.group_instance_id is not None:
            group.static[request.group_instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True  # Kafka extends the initial delay only for a brand new group
        return self._rebalance(group, now_ms)

    def _create_group(self, group_id: str) -> _Group | None:
        if len(self._groups) >= self._groups_max:  # scans at most groups_max, and only when full
            idle = next((g for g in self._groups.values() if not g.members and not g.pending), None)
            if idle is None:
                return None
            del self._groups[idle.group_id]
            self._armed.pop(idle.group_id, None)
        group = _Group(group_id)
        self._groups[group_id] = group
        assert len(self._groups) <= self._groups_max
        return group

    # ---- Rebalancing

    def _rebalance(self, group: _Group, now_ms: int) -> list[Completion]:
        """The membership changed: start a rebalance, or see whether the current one can end."""
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._maybe_complete_join(group, now_ms)
        assert group.state is not GroupState.DEAD and (group.members or group.state is not GroupState.EMPTY)
        out: list[Completion] = []
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their assignments are for a generation that will not be
                member.assignment = b""
                if member.sync_token is not None:
                    out.append(self._answer(member, _sync_error(_REBALANCE_IN_PROGRESS), now_ms))
        rebalance_timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay_ms = self._initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and delay_ms > 0:
            group.join_deadline_ms = now_ms + delay_ms
            group.initial_delay_remaining_ms = max(rebalance_timeout_ms - delay_ms, 0)
            group.new_member_added = False
        else:
            group.join_deadline_ms = now_ms + rebalance_timeout_ms
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        group.state = GroupState.PREPARING_REBALANCE
        return out + self._maybe_complete_join(group, now_ms)

    def _maybe_complete_join(self, group: _Group, now_ms: int) -> list[Completion]:
        assert group.state is GroupState.PREPARING_REBALANCE
        if group.initial_delay_remaining_ms is not None or group.pending:
            return []  # the initial delay runs to its deadline; pending members are expected to rejoin
        if any(member.join_token is None for member in group.members.values()):
            return []
        return self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: _Group, now_ms: int) -> list[Completion]:
        remaining_ms = group.initial_delay_remaining_ms
        if remaining_ms is not None and group.new_member_added and remaining_ms > 0:
            delay_ms = min(self._initial_rebalance_delay_ms, remaining_ms)
            group.join_deadline_ms = now_ms + delay_ms
            group.initial_delay_remaining_ms = remaining_ms - delay_ms
            group.new_member_added = False
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: _Group, now_ms: int) -> list[Completion]:
        """Kafka's onCompleteJoin: drop who did not rejoin, start the next generation, answer every join."""
        assert group.state is GroupState.PREPARING_REBALANCE
        out: list[Completion] = []
        for member in [m for m in group.members.values() if m.join_token is None]:
            out += self._remove_member(group, member, _UNKNOWN_MEMBER_ID)
        group.generation_id += 1
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            return out
        group.protocol_name = _select_protocol(list(group.members.values()))
        group.state = GroupState.COMPLETING_REBALANCE
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in group.members.values())
        for member in group.members.values():
            out.append(self._answer(member, self._join_answer(group, member), now_ms))
        return out

    def _join_answer(self, group: _Group, member: _Member) -> JoinResult:
        protocol_name, leader = group.protocol_name, group.leader
        assert protocol_name is not None and leader is not None and member.member_id in group.members
        members: tuple[JoinedMember, ...] = ()
        if member.member_id == leader:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol_name)) for m in group.members.values()
            )
        generation_id, protocol_type = group.generation_id, group.protocol_type
        return JoinResult(errors.NONE, generation_id, protocol_type, protocol_name, leader, member.member_id, members)

    # ---- SyncGroup

    def sync(self, now_ms: int, token: int, request: SyncGroup) -> list[Completion]:
        assert token not in self._held, token
        group = self._groups.get(request.group_id)
        error = self._sync_error(group, request)
        if error is not errors.NONE:
            return [Completion(token, _sync_error(error))]
        assert group is not None
        member = group.members[request.member_id]
        member.last_seen_ms = now_ms
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None
        if group.state is GroupState.STABLE:
            return [Completion(token, self._sync_answer(group, member))]
        assert group.state is GroupState.COMPLETING_REBALANCE
        out = self._fail_held(member, _REBALANCE_IN_PROGRESS)  # superseded by this one
        member.sync_token = self._hold(token)
        if member.member_id == group.leader:
            assignments = dict(request.assignments)
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            group.state = GroupState.STABLE
            for each in group.members.values():
                if each.sync_token is not None:
                    out.append(self._answer(each, self._sync_answer(group, each), now_ms))
        self._arm(group)
        return out

    def _generation_error(self, group: _Group | None, member_id: str, group_instance_id: str | None,
                          generation_id: int) -> KafkaError:
        """What SyncGroup and Heartbeat both check first: the group, the member, then its generation."""
        if group is None:
            return _UNKNOWN_MEMBER_ID
        error = self._member_error(group, member_id, group_instance_id)
        if error is not errors.NONE:
            return error
        return _ILLEGAL_GENERATION if generation_id != group.generation_id else errors.NONE

    def _sync_error(self, group: _Group | None, request: SyncGroup) -> KafkaError:
        error = self._generation_error(group, request.member_id, request.group_instance_id, request.generation_id)
        if error is not errors.NONE:
            return error
        assert group is not None
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return _INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return _INCONSISTENT_GROUP_PROTOCOL
        if group.state is GroupState.PREPARING_REBALANCE:
            return _REBALANCE_IN_PROGRESS
        assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE), group.state
        return errors.NONE

    def _sync_answer(self, group: _Group, member: _Member) -> SyncResult:
        assert group.state is GroupState.STABLE
        return SyncResult(errors.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # ---- Heartbeat, LeaveGroup, OffsetCommit

    def heartbeat(self, now_ms: int, request: Heartbeat) -> KafkaError:
        group = self._groups.get(request.group_id)
        error = self._generation_error(group, request.member_id, request.group_instance_id, request.generation_id)
        if error is not errors.NONE:
            return error
        assert group is not None and group.state is not GroupState.EMPTY  # an Empty group has no members
        group.members[request.member_id].last_seen_ms = now_ms  # only ever moves the deadline later
        if group.state is GroupState.PREPARING_REBALANCE:
            return _REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave(self, now_ms: int, request: LeaveGroup) -> tuple[LeaveResult, list[Completion]]:
        group = self._groups.get(request.group_id)
        if group is None:
            return LeaveResult(errors.NONE, tuple((m, i, _UNKNOWN_MEMBER_ID) for m, i in request.members)), []
        results: list[tuple[str, str | None, KafkaError]] = []
        out: list[Completion] = []
        members_left = pending_left = False
        for asked_id, instance in request.members:  # bounded by the request
            member_id = asked_id
            if member_id == UNKNOWN_MEMBER and instance is not None:
                member_id = group.static.get(instance, UNKNOWN_MEMBER)  # leaving by instance id alone
            if member_id in group.pending:
                del group.pending[member_id]
                pending_left = True
                results.append((asked_id, instance, errors.NONE))
                continue
            error = self._member_error(group, member_id, instance)
            if error is errors.NONE:
                out += self._remove_member(group, group.members[member_id], _UNKNOWN_MEMBER_ID)
                members_left = True
            results.append((asked_id, instance, error))
        if members_left or (pending_left and group.state is GroupState.PREPARING_REBALANCE):
            out += self._rebalance(group, now_ms)
        self._arm(group)
        return LeaveResult(errors.NONE, tuple(results)), out

    def validate_commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                        *, now_ms: int | None = None) -> KafkaError:
        """Kafka's validateOffsetCommit; a valid commit from a member also refreshes its session (given now_ms)."""
        group = self._groups.get(group_id)
        if group is None:
            # A standalone consumer (no generation) may commit; anyone else is from a generation long gone.
            return errors.NONE if generation_id < 0 else _ILLEGAL_GENERATION
        if generation_id < 0 and member_id == UNKNOWN_MEMBER and group_instance_id is None:
            return errors.NONE if group.state is GroupState.EMPTY else _UNKNOWN_MEMBER_ID
        error = self._member_error(group, member_id, group_instance_id)
        if error is not errors.NONE:
            return error
        if generation_id != group.generation_id:
            return _ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return _REBALANCE_IN_PROGRESS  # the member knows the generation but not yet its assignment
        if now_ms is not None:
            group.members[member_id].last_seen_ms = now_ms
        return errors.NONE

    def _member_error(self, group: _Group, member_id: str, group_instance_id: str | None) -> KafkaError:
        """Kafka's isStaticMemberFenced, then whether the member is known."""
        if group_instance_id is not None and group.static.get(group_instance_id, member_id) != member_id:
            return _FENCED_INSTANCE_ID
        if member_id not in group.members:
            return _UNKNOWN_MEMBER_ID
        return errors.NONE

    # ---- Time

    def tick(self, now_ms: int) -> list[Completion]:
        due: dict[str, None] = {}
        for _ in range(len(self._heap)):
            if not self._heap or self._heap[0][0] > now_ms:
                break
            deadline_ms, group_id = heapq.heappop(self._heap)
            if self._armed.get(group_id) == deadline_ms:
                del self._armed[group_id]
                due[group_id] = None
        out: list[Completion] = []
        for group_id in due:
            group = self._groups[group_id]
            out += self._expire(group, now_ms)
            self._arm(group)
        return out

    def _expire(self, group: _Group, now_ms: int) -> list[Completion]:
        out: list[Completion] = []
        pending_left = [m for m, expiry_ms in group.pending.items() if expiry_ms <= now_ms]
        for member_id in pending_left:
            del group.pending[member_id]
        expired = [m for m in group.members.values() if (d := m.session_deadline_ms()) is not None and d <= now_ms]
        for member in expired:
            out += self._remove_member(group, member, _UNKNOWN_MEMBER_ID)
        if expired or (pending_left and group.state is GroupState.PREPARING_REBALANCE):
            out += self._rebalance(group, now_ms)
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
            # Kafka's DelayedSync: whoever has not synced by now is gone, and the others must rejoin.
            assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE), group.state
            group.sync_deadline_ms = None
            late = [group.members[member_id] for member_id in group.pending_sync]
            for member in late:
                out += self._remove_member(group, member, _UNKNOWN_MEMBER_ID)
            if late:
                out += self._rebalance(group, now_ms)
        # Last: the steps above may have started a rebalance whose deadline is already here (nobody is left).
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            out += self._on_join_deadline(group, now_ms)
        return out

    def next_deadline_ms(self) -> int | None:
        # Bounded: each turn drops a stale entry or corrects a live one, and a corrected entry is exact.
        for _ in range(len(self._heap) + 1):
            if not self._heap:
                return None
            deadline_ms, group_id = self._heap[0]
            if self._armed.get(group_id) != deadline_ms:
                heapq.heappop(self._heap)
                continue
            group = self._groups[group_id]
            if _group_deadline_ms(group) == deadline_ms:
                return deadline_ms
            heapq.heappop(self._heap)
            del self._armed[group_id]
            self._arm(group)
        raise AssertionError("the deadline heap did not settle")

    def _arm(self, group: _Group) -> None:
        """Keep the group's heap entry no later than its earliest deadline (call after every change)."""
        deadline_ms = _group_deadline_ms(group)
        armed_ms = self._armed.get(group.group_id)
        if deadline_ms is None or (armed_ms is not None and armed_ms <= deadline_ms):
            return
        self._armed[group.group_id] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, group.group_id))
        if len(self._heap) > 2 * len(self._armed) + 64:  # superseded entries: rebuild from the live ones
            self._heap = [(armed, group_id) for group_id, armed in self._armed.items()]
            heapq.heapify(self._heap)

    # ---- Coordinator moves, describing

    def remove_groups(self, group_ids: Iterable[str]) -> list[Completion]:
        out: list[Completion] = []
        for group_id in group_ids:
            group = self._groups.pop(group_id, None)
            if group is None:
                continue
            self._armed.pop(group_id, None)
            group.state = GroupState.DEAD
            for member in group.members.values():
                out += self._fail_held(member, _NOT_COORDINATOR)
        return out

    def describe(self, group_id: str) -> GroupDescription | None:
        """Kafka's GroupMetadata.summary: protocol, metadata and assignments are shown only when Stable."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        protocol_name = group.protocol_name if group.state is GroupState.STABLE else None
        members = tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
            if protocol_name is None
            else MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.metadata(protocol_name), m.assignment)
            for m in group.members.values()
        )
        return GroupDescription(group_id, group.state.value, group.protocol_type, protocol_name or "", members)

    def list_groups(self) -> list[tuple[str, str, str]]:
        return [(g.group_id, g.protocol_type, g.state.value) for g in self._groups.values()]

    # ---- Held requests

    def _hold(self, token: int) -> int:
        assert token not in self._held, token
        self._held.add(token)
        return token

    def _answer(self, member: _Member, result: JoinResult | SyncResult, now_ms: int | None) -> Completion:
        """Answer the member's held join (a JoinResult) or sync (a SyncResult)."""
        if isinstance(result, JoinResult):
            token, member.join_token = member.join_token, None
        else:
            token, member.sync_token = member.sync_token, None
        assert token is not None and token in self._held, token
        self._held.remove(token)
        if now_ms is not None:
            member.last_seen_ms = now_ms  # the session restarts when the member stops waiting
        return Completion(token, result)

    def _fail_held(self, member: _Member, error: KafkaError) -> list[Completion]:
        """Answer whatever the member has held with `error`."""
        out: list[Completion] = []
        if member.join_token is not None:
            out.append(self._answer(member, _join_error(error, member.member_id), None))
        if member.sync_token is not None:
            out.append(self._answer(member, _sync_error(error), None))
        return out

    def _remove_member(self, group: _Group, member: _Member, error: KafkaError) -> list[Completion]:
        """Remove a member, answering its held requests with `error`; the caller decides whether to rebalance."""
        out = self._fail_held(member, error)
        del group.members[member.member_id]
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == member.member_id:
            del group.static[member.group_instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        return out


def _select_protocol(members: list[_Member]) -> str:
    """Kafka's selectProtocol: each member votes for its first protocol that every member supports."""
    assert members
    candidates = set.intersection(*({name for name, _ in m.protocols} for m in members))
    assert candidates, "a join sharing no protocol with the group was accepted"
    votes = Counter(next(name for name, _ in m.protocols if name in candidates) for m in members)
    return max(votes, key=lambda name: votes[name])  # ties go to the earliest vote: deterministic


def _group_deadline_ms(group: _Group) -> int | None:
    deadlines = [d for d in (group.join_deadline_ms, group.sync_deadline_ms) if d is not None]
    deadlines += group.pending.values()
    deadlines += [d for m in group.members.values() if (d := m.session_deadline_ms()) is not None]
    return min(deadlines, default=None)
