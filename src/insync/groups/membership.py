"""Group membership for the classic consumer-group protocol: Kafka's GroupCoordinator and GroupMetadata, sans-IO.

`GroupMembership` holds every group this broker coordinates, in memory, and reads no clock. A request that must
wait is held under its `token` and answered exactly once by a later call's `Completion`s. A group moves Empty ->
PreparingRebalance -> CompletingRebalance -> Stable, as in Kafka: the rebalance ends once every member rejoined
and no pending member is outstanding, or at the rebalance deadline, removing who did not rejoin; a rebalance from
Empty waits `initial_rebalance_delay_ms` (InitialDelayedJoin); members that have not synced by the rebalance
timeout are removed (DelayedSync); a session expires `session_timeout_ms` after the last join, sync, heartbeat
or commit, but not while a join or sync is held. The state is `group_metadata.py`, the deadline heap
`deadlines.py`. Deviations, for simplicity: a static member rejoining always rebalances and is removed like a
dynamic one when it misses a rebalance; a member's protocols are checked against the others only; at
`groups_max` a new group evicts an Empty one or is refused COORDINATOR_NOT_AVAILABLE; a superseded join or sync
is answered REBALANCE_IN_PROGRESS. A rebalance's end is for the caller to write (`take_records`, `restore`).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from insync import errors
from insync.errors import KafkaError
from insync.groups.deadlines import GroupDeadlines
from insync.groups.deletion import GroupView, subscribed_topics
from insync.groups.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    generation_error,
    protocol_error,
)
from insync.groups.group_records import GroupRecord, MemberRecord
from insync.groups.messages import (
    NO_GENERATION,
    UNKNOWN_MEMBER,
    Completion,
    GroupDescription,
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeaveResult,
    SyncGroup,
    SyncResult,
)


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
        self._groups: dict[str, GroupMetadata] = {}
        self._held: set[int] = set()  # tokens of held joins and syncs
        self._deadlines = GroupDeadlines()
        self._to_record: dict[str, int] = {}  # group -> the generation whose end is to be written, in order

    # ---- JoinGroup

    def join(self, now_ms: int, token: int, request: JoinGroup) -> list[Completion]:
        assert token not in self._held, token
        if not request.group_id:
            return [Completion(token, _join_error(errors.INVALID_GROUP_ID, request.member_id))]
        if not self._min_session_timeout_ms <= request.session_timeout_ms <= self._max_session_timeout_ms:
            return [Completion(token, _join_error(errors.INVALID_SESSION_TIMEOUT, request.member_id))]
        group = self._groups.get(request.group_id)
        if request.member_id == UNKNOWN_MEMBER:
            out = self._join_new_member(now_ms, token, request, group)
        elif group is None:
            out = [Completion(token, _join_error(errors.UNKNOWN_MEMBER_ID, request.member_id))]
        else:
            out = self._join_known_member(now_ms, token, request, group)
        if (group := self._groups.get(request.group_id)) is not None:
            self._arm(group)
        return out

    def _join_new_member(self, now_ms: int, token: int, request: JoinGroup,
                         group: GroupMetadata | None) -> list[Completion]:
        instance = request.group_instance_id
        replaced = None if group is None or instance is None else group.static.get(instance)
        error = self._joining_error(group, request, replaced)
        if error is errors.NONE and group is None:
            group = self._create_group(request.group_id)
            error = errors.COORDINATOR_NOT_AVAILABLE if group is None else errors.NONE
        if error is not errors.NONE:
            return [Completion(token, _join_error(error, request.member_id))]
        assert group is not None
        # Kafka names static members after their instance id, dynamic ones after their client id.
        member_id = f"{instance or request.client_id}-{uuid.UUID(int=self._random.getrandbits(128), version=4)}"
        assert member_id not in group.members and member_id not in group.pending
        if replaced is not None:
            # The old incarnation is fenced: its requests carry the instance id, which now maps to another member.
            out = self._remove_member(group, group.members[replaced], errors.FENCED_INSTANCE_ID)
            return out + self._add_member(now_ms, token, request, group, member_id)
        if request.require_known_member_id and instance is None:
            if len(group.pending) >= self._group_max_size:
                return [Completion(token, _join_error(errors.GROUP_MAX_SIZE_REACHED, request.member_id))]
            group.pending[member_id] = now_ms + request.session_timeout_ms
            return [Completion(token, _join_error(errors.MEMBER_ID_REQUIRED, member_id))]
        return self._add_member(now_ms, token, request, group, member_id)

    def _join_known_member(self, now_ms: int, token: int, request: JoinGroup,
                           group: GroupMetadata) -> list[Completion]:
        member_id = request.member_id
        if member_id in group.pending:
            error = self._joining_error(group, request, None)
            if error is not errors.NONE:
                return [Completion(token, _join_error(error, member_id))]
            del group.pending[member_id]
            return self._add_member(now_ms, token, request, group, member_id)
        error = group.member_error(member_id, request.group_instance_id)
        if error is errors.NONE:
            error = protocol_error(group, request, member_id)
        if error is not errors.NONE:
            return [Completion(token, _join_error(error, member_id))]
        member = group.members[member_id]
        member.last_seen_ms = now_ms
        unchanged = member.protocols == request.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # The member lost its join answer: repeat it (Kafka does) rather than rebalance again.
            return [Completion(token, group.join_answer(member))]
        if group.state is GroupState.STABLE and unchanged and member_id != group.leader:
            return [Completion(token, group.join_answer(member))]
        out = self._fail_held(member, errors.REBALANCE_IN_PROGRESS)  # superseded by this one
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.join_token = self._hold(token)
        return out + self._rebalance(group, now_ms)

    def _joining_error(self, group: GroupMetadata | None, request: JoinGroup, replaced: str | None) -> KafkaError:
        """Why a member that is not in the group yet may not join it (`replaced` is the member it replaces)."""
        if group is None:
            return protocol_error(None, request, None)
        if replaced is None and len(group.members) >= self._group_max_size:
            return errors.GROUP_MAX_SIZE_REACHED
        return protocol_error(group, request, replaced)

    def _add_member(self, now_ms: int, token: int, request: JoinGroup, group: GroupMetadata,
                    member_id: str) -> list[Completion]:
        assert member_id not in group.members and group.state is not GroupState.DEAD
        if not group.members:
            group.protocol_type = request.protocol_type
        group.members[member_id] = MemberMetadata(
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

    def _create_group(self, group_id: str) -> GroupMetadata | None:
        if len(self._groups) >= self._groups_max:  # scans at most groups_max, and only when full
            idle = next((g for g in self._groups.values() if not g.members and not g.pending), None)
            if idle is None:
                return None
            del self._groups[idle.group_id]
            self._deadlines.forget(idle.group_id)
        group = GroupMetadata(group_id)
        self._groups[group_id] = group
        assert len(self._groups) <= self._groups_max
        return group

    # ---- Rebalancing

    def _rebalance(self, group: GroupMetadata, now_ms: int) -> list[Completion]:
        """The membership changed: start a rebalance, or see whether the current one can end."""
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._maybe_complete_join(group, now_ms)
        assert group.state is not GroupState.DEAD and (group.members or group.state is not GroupState.EMPTY)
        out: list[Completion] = []
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their assignments are for a generation that will not be
                member.assignment = b""
                if member.sync_token is not None:
                    out.append(self._answer(member, _sync_error(errors.REBALANCE_IN_PROGRESS), now_ms))
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

    def _maybe_complete_join(self, group: GroupMetadata, now_ms: int) -> list[Completion]:
        assert group.state is GroupState.PREPARING_REBALANCE
        if group.initial_delay_remaining_ms is not None or group.pending:
            return []  # the initial delay runs to its deadline; pending members are expected to rejoin
        if any(member.join_token is None for member in group.members.values()):
            return []
        return self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: GroupMetadata, now_ms: int) -> list[Completion]:
        remaining_ms = group.initial_delay_remaining_ms
        if remaining_ms is not None and group.new_member_added and remaining_ms > 0:
            delay_ms = min(self._initial_rebalance_delay_ms, remaining_ms)
            group.join_deadline_ms = now_ms + delay_ms
            group.initial_delay_remaining_ms = remaining_ms - delay_ms
            group.new_member_added = False
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: GroupMetadata, now_ms: int) -> list[Completion]:
        """Kafka's onCompleteJoin: drop who did not rejoin, start the next generation, answer every join."""
        assert group.state is GroupState.PREPARING_REBALANCE
        out: list[Completion] = []
        for member in [m for m in group.members.values() if m.join_token is None]:
            out += self._remove_member(group, member, errors.UNKNOWN_MEMBER_ID)
        group.generation_id += 1
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            self._to_record[group.group_id] = group.generation_id
            return out
        group.protocol_name = group.select_protocol()
        group.state = GroupState.COMPLETING_REBALANCE
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in group.members.values())
        for member in group.members.values():
            out.append(self._answer(member, group.join_answer(member), now_ms))
        return out

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
            return [Completion(token, group.sync_answer(member))]
        assert group.state is GroupState.COMPLETING_REBALANCE
        out = self._fail_held(member, errors.REBALANCE_IN_PROGRESS)  # superseded by this one
        member.sync_token = self._hold(token)
        if member.member_id == group.leader:
            assignments = dict(request.assignments)
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            group.state = GroupState.STABLE
            self._to_record[group.group_id] = group.generation_id
            for each in group.members.values():
                if each.sync_token is not None:
                    out.append(self._answer(each, group.sync_answer(each), now_ms))
        self._arm(group)
        return out

    def _sync_error(self, group: GroupMetadata | None, request: SyncGroup) -> KafkaError:
        error = generation_error(group, request.member_id, request.group_instance_id, request.generation_id)
        if error is not errors.NONE:
            return error
        assert group is not None
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return errors.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return errors.INCONSISTENT_GROUP_PROTOCOL
        if group.state is GroupState.PREPARING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS
        assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE), group.state
        return errors.NONE

    # ---- Heartbeat, LeaveGroup, OffsetCommit

    def heartbeat(self, now_ms: int, request: Heartbeat) -> KafkaError:
        group = self._groups.get(request.group_id)
        error = generation_error(group, request.member_id, request.group_instance_id, request.generation_id)
        if error is not errors.NONE:
            return error
        assert group is not None and group.state is not GroupState.EMPTY  # an Empty group has no members
        group.members[request.member_id].last_seen_ms = now_ms  # only ever moves the deadline later
        if group.state is GroupState.PREPARING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave(self, now_ms: int, request: LeaveGroup) -> tuple[LeaveResult, list[Completion]]:
        group = self._groups.get(request.group_id)
        if group is None:
            unknown = tuple((m, i, errors.UNKNOWN_MEMBER_ID) for m, i in request.members)
            return LeaveResult(errors.NONE, unknown), []
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
            error = group.member_error(member_id, instance)
            if error is errors.NONE:
                out += self._remove_member(group, group.members[member_id], errors.UNKNOWN_MEMBER_ID)
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
            return errors.NONE if generation_id < 0 else errors.ILLEGAL_GENERATION
        if generation_id < 0 and member_id == UNKNOWN_MEMBER and group_instance_id is None:
            return errors.NONE if group.state is GroupState.EMPTY else errors.UNKNOWN_MEMBER_ID
        error = group.member_error(member_id, group_instance_id)
        if error is not errors.NONE:
            return error
        if generation_id != group.generation_id:
            return errors.ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return errors.REBALANCE_IN_PROGRESS  # the member knows the generation but not yet its assignment
        if now_ms is not None:
            group.members[member_id].last_seen_ms = now_ms
        return errors.NONE

    # ---- Time

    def tick(self, now_ms: int) -> list[Completion]:
        out: list[Completion] = []
        for group_id in self._deadlines.pop_due(now_ms):
            group = self._groups[group_id]
            out += self._expire(group, now_ms)
            self._arm(group)
        return out

    def _expire(self, group: GroupMetadata, now_ms: int) -> list[Completion]:
        out: list[Completion] = []
        pending_left = [m for m, expiry_ms in group.pending.items() if expiry_ms <= now_ms]
        for member_id in pending_left:
            del group.pending[member_id]
        expired = [m for m in group.members.values() if (d := m.session_deadline_ms()) is not None and d <= now_ms]
        for member in expired:
            out += self._remove_member(group, member, errors.UNKNOWN_MEMBER_ID)
        if expired or (pending_left and group.state is GroupState.PREPARING_REBALANCE):
            out += self._rebalance(group, now_ms)
        if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
            # Kafka's DelayedSync: whoever has not synced by now is gone, and the others must rejoin.
            assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE), group.state
            group.sync_deadline_ms = None
            late = [group.members[member_id] for member_id in group.pending_sync]
            for member in late:
                out += self._remove_member(group, member, errors.UNKNOWN_MEMBER_ID)
            if late:
                out += self._rebalance(group, now_ms)
        # Last: the steps above may have started a rebalance whose deadline is already here (nobody is left).
        if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
            out += self._on_join_deadline(group, now_ms)
        return out

    def next_deadline_ms(self) -> int | None:
        return self._deadlines.next_deadline_ms(lambda group_id: self._groups[group_id].deadline_ms())

    def _arm(self, group: GroupMetadata) -> None:
        """Keep the group's deadline entry no later than its earliest deadline (call after every change)."""
        self._deadlines.arm(group.group_id, group.deadline_ms())

    # ---- The group's record, coordinator moves, describing

    def take_records(self, now_ms: int) -> list[tuple[str, int, GroupRecord]]:
        """The groups whose rebalance ended since the last call, each as (group, generation, its record), for the
        caller to write (Kafka's storeGroup); one whose state moved on since is left to its next end."""
        out = []
        for group_id, generation_id in self._to_record.items():
            group = self._groups.get(group_id)
            if group is None or group.generation_id != generation_id or \
                    group.state not in (GroupState.STABLE, GroupState.EMPTY):
                continue
            protocol_name = group.protocol_name
            members = tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         m.rebalance_timeout_ms, m.session_timeout_ms,
                                         m.metadata(protocol_name) if protocol_name is not None else b"",
                                         m.assignment) for m in group.members.values())
            out.append((group_id, generation_id, GroupRecord(group.protocol_type, generation_id, protocol_name,
                                                             group.leader, now_ms, members)))
        self._to_record.clear()
        return out

    def restore(self, now_ms: int, group_id: str, record: GroupRecord) -> bool:
        """Take a group over from its record (Kafka's loadGroup): Stable with its members and their assignments,
        each session starting now, or Empty at its generation. False when the group is already here, or no room."""
        if group_id in self._groups or len(self._groups) >= self._groups_max:
            return False
        group = GroupMetadata(group_id, generation_id=record.generation_id, protocol_type=record.protocol_type)
        if record.members and record.protocol_name is not None:
            group.state, group.protocol_name, group.leader = GroupState.STABLE, record.protocol_name, record.leader
            for m in record.members:
                group.members[m.member_id] = MemberMetadata(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                    m.rebalance_timeout_ms, ((record.protocol_name, m.subscription),), now_ms, assignment=m.assignment)
                if m.group_instance_id is not None:
                    group.static[m.group_instance_id] = m.member_id
            if group.leader not in group.members:
                group.leader = next(iter(group.members))
        self._groups[group_id] = group
        self._arm(group)
        return True

    # ---- Coordinator moves, describing

    def remove_groups(self, group_ids: Iterable[str]) -> list[Completion]:
        out: list[Completion] = []
        for group_id in group_ids:
            group = self._groups.pop(group_id, None)
            if group is None:
                continue
            self._deadlines.forget(group_id)
            group.state = GroupState.DEAD
            for member in group.members.values():
                out += self._fail_held(member, errors.NOT_COORDINATOR)
        return out

    def describe(self, group_id: str) -> GroupDescription | None:
        """Kafka's GroupMetadata.summary, or None for a group this broker does not coordinate."""
        group = self._groups.get(group_id)
        return None if group is None else group.summary()

    def view(self, group_id: str) -> GroupView | None:
        """What DeleteGroups and OffsetDelete check (`deletion.py`), or None for a group without members' state."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        # A member that joined since the protocol was chosen (or before any was) is read by its first protocol.
        subscriptions = (dict(m.protocols).get(group.protocol_name or "", m.protocols[0][1])
                         for m in group.members.values())
        return GroupView(group.state, group.protocol_type, subscribed_topics(group.protocol_type, subscriptions))

    def list_groups(self) -> list[tuple[str, str, str]]:
        return [(g.group_id, g.protocol_type, g.state.value) for g in self._groups.values()]

    # ---- Held requests

    def _hold(self, token: int) -> int:
        assert token not in self._held, token
        self._held.add(token)
        return token

    def _answer(self, member: MemberMetadata, result: JoinResult | SyncResult, now_ms: int | None) -> Completion:
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

    def _fail_held(self, member: MemberMetadata, error: KafkaError) -> list[Completion]:
        """Answer whatever the member has held with `error`."""
        out: list[Completion] = []
        if member.join_token is not None:
            out.append(self._answer(member, _join_error(error, member.member_id), None))
        if member.sync_token is not None:
            out.append(self._answer(member, _sync_error(error), None))
        return out

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, error: KafkaError) -> list[Completion]:
        """Remove a member, answering its held requests with `error`; the caller decides whether to rebalance."""
        out = self._fail_held(member, error)
        del group.members[member.member_id]
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == member.member_id:
            del group.static[member.group_instance_id]
        group.pending_sync.discard(member.member_id)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        return out

