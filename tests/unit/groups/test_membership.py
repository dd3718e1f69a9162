"""GroupMembership, Kafka's classic group coordinator: joins, syncs, heartbeats, leaves, deadlines and bounds.

Each test drives the sans-IO core with explicit times and tokens, the way the broker does, and reads the
completions it returns. The last test runs random request sequences and checks that every token is answered
exactly once.
"""

from __future__ import annotations

import random

import pytest
from membership_helpers import (
    REBALANCE_MS,
    SESSION_MS,
    join,
    join_request,
    join_result,
    member_id_for,
    stable_group,
    state,
    sync,
    sync_result,
    tokens,
)

from insync import errors
from insync.errors import KafkaError
from insync.groups.membership import GroupMembership
from insync.groups.messages import (
    Completion,
    Heartbeat,
    JoinResult,
    LeaveGroup,
    SyncGroup,
)

UNKNOWN_MEMBER_ID = errors.BY_NAME["UNKNOWN_MEMBER_ID"]
ILLEGAL_GENERATION = errors.BY_NAME["ILLEGAL_GENERATION"]
REBALANCE_IN_PROGRESS = errors.BY_NAME["REBALANCE_IN_PROGRESS"]
INCONSISTENT_GROUP_PROTOCOL = errors.BY_NAME["INCONSISTENT_GROUP_PROTOCOL"]
FENCED_INSTANCE_ID = errors.BY_NAME["FENCED_INSTANCE_ID"]
MEMBER_ID_REQUIRED = errors.BY_NAME["MEMBER_ID_REQUIRED"]
GROUP_MAX_SIZE_REACHED = errors.BY_NAME["GROUP_MAX_SIZE_REACHED"]
INVALID_SESSION_TIMEOUT = errors.BY_NAME["INVALID_SESSION_TIMEOUT"]
INVALID_GROUP_ID = errors.BY_NAME["INVALID_GROUP_ID"]
NOT_COORDINATOR = errors.BY_NAME["NOT_COORDINATOR"]
COORDINATOR_NOT_AVAILABLE = errors.BY_NAME["COORDINATOR_NOT_AVAILABLE"]


def heartbeat(gm: GroupMembership, now_ms: int, member_id: str, generation: int, instance: str | None = None) -> KafkaError:
    return gm.heartbeat(now_ms, Heartbeat("g", generation, member_id, instance))


@pytest.fixture
def gm() -> GroupMembership:
    return GroupMembership(seed=7, initial_rebalance_delay_ms=0)


def test_two_members_get_member_ids_then_complete_as_soon_as_both_rejoined(gm: GroupMembership) -> None:
    a = member_id_for(gm, 0, "a")
    b = member_id_for(gm, 0, "b")
    token_a, out = join(gm, 10, join_request(a))
    assert out == []  # b is still pending: the rebalance waits for it
    assert state(gm) == "PreparingRebalance"
    token_b, out = join(gm, 20, join_request(b))
    # Both rejoined at t=20: no waiting for the 30 s rebalance timeout.
    leader, follower = join_result(out, token_a), join_result(out, token_b)
    assert leader.error == follower.error == errors.NONE
    assert leader.generation_id == follower.generation_id == 1
    assert leader.leader == follower.leader == a
    assert leader.protocol_name == "range" and leader.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in leader.members] == [(a, b"sub-range"), (b, b"sub-range")]
    assert follower.members == () and follower.member_id == b
    assert state(gm) == "CompletingRebalance"


def test_followers_sync_waits_for_the_leader_and_every_member_gets_its_assignment(gm: GroupMembership) -> None:
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    follower_token, out = sync(gm, 5, b, 1)
    assert out == []  # held until the leader brings the assignment
    leader_token, out = sync(gm, 6, a, 1, ((a, b"for-a"), (b, b"for-b")))
    assert sync_result(out, leader_token).assignment == b"for-a"
    assert sync_result(out, follower_token).assignment == b"for-b"
    assert sync_result(out, follower_token).protocol_name == "range"
    assert state(gm) == "Stable"
    # In Stable a sync is answered at once with the member's current assignment.
    token, out = sync(gm, 7, b, 1)
    assert sync_result(out, token).assignment == b"for-b"
    description = gm.describe("g")
    assert description is not None and description.protocol_name == "range"
    assert [(m.member_id, m.assignment, m.metadata) for m in description.members] == [
        (a, b"for-a", b"sub-range"),
        (b, b"for-b", b"sub-range"),
    ]


def test_a_member_the_leader_left_out_gets_an_empty_assignment(gm: GroupMembership) -> None:
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    follower_token, _ = sync(gm, 1, b, 1)
    _, out = sync(gm, 1, a, 1, ((a, b"all"),))
    assert sync_result(out, follower_token).error == errors.NONE
    assert sync_result(out, follower_token).assignment == b""


def test_sync_errors(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    token, out = sync(gm, 1, "stranger", generation)
    assert sync_result(out, token).error == UNKNOWN_MEMBER_ID
    token, out = sync(gm, 1, a, generation + 5)
    assert sync_result(out, token).error == ILLEGAL_GENERATION
    for request, error in [
        (SyncGroup("g", generation, a, None, "connect", None, ()), INCONSISTENT_GROUP_PROTOCOL),
        (SyncGroup("g", generation, a, None, None, "sticky", ()), INCONSISTENT_GROUP_PROTOCOL),
        (SyncGroup("other", generation, a, None, None, None, ()), UNKNOWN_MEMBER_ID),
    ]:
        token = next(tokens)
        assert sync_result(gm.sync(1, token, request), token).error == error
    join(gm, 2, join_request(a, protocols=(("roundrobin", b"new"),)))  # new subscription: rebalance
    token, out = sync(gm, 3, b, generation)
    assert sync_result(out, token).error == REBALANCE_IN_PROGRESS


def test_heartbeat_answers_in_each_state(gm: GroupMembership) -> None:
    assert heartbeat(gm, 0, "nobody", 0) == UNKNOWN_MEMBER_ID  # unknown group
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    assert heartbeat(gm, 0, a, 0) == UNKNOWN_MEMBER_ID  # pending, not a member yet; the group is Empty
    join(gm, 0, join_request(a))
    assert heartbeat(gm, 1, a, 0) == REBALANCE_IN_PROGRESS  # PreparingRebalance
    join(gm, 2, join_request(b))
    assert state(gm) == "CompletingRebalance"
    assert heartbeat(gm, 3, a, 1) == errors.NONE
    assert heartbeat(gm, 3, a, 0) == ILLEGAL_GENERATION
    assert heartbeat(gm, 3, "stranger", 1) == UNKNOWN_MEMBER_ID
    sync(gm, 4, a, 1, ((a, b"A"), (b, b"B")))
    assert state(gm) == "Stable"
    assert heartbeat(gm, 5, b, 1) == errors.NONE


def test_session_expiry_rebalances_and_the_survivor_rejoins_into_the_next_generation(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    for now in (3_000, 6_000, 9_000):  # a keeps heartbeating, b has gone silent
        assert heartbeat(gm, now, a, generation) == errors.NONE
        assert gm.tick(now) == []
    assert gm.tick(SESSION_MS) == []
    assert state(gm) == "PreparingRebalance"
    description = gm.describe("g")
    assert description is not None and [m.member_id for m in description.members] == [a]
    assert heartbeat(gm, SESSION_MS + 1, a, generation) == REBALANCE_IN_PROGRESS
    token, out = join(gm, SESSION_MS + 2, join_request(a))
    result = join_result(out, token)
    assert result.generation_id == generation + 1 and result.leader == a
    assert [m.member_id for m in result.members] == [a]


def test_rebalance_timeout_removes_a_member_that_never_rejoins(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    c = member_id_for(gm, 100, "c")
    token_c, out = join(gm, 100, join_request(c))
    assert out == [] and state(gm) == "PreparingRebalance"
    token_a, out = join(gm, 200, join_request(a))
    assert out == []
    # b heartbeats (REBALANCE_IN_PROGRESS) but never rejoins: the rebalance ends at its deadline without it.
    for now in range(1_000, REBALANCE_MS, 5_000):
        assert heartbeat(gm, now, b, generation) == REBALANCE_IN_PROGRESS
        assert gm.tick(now) == []
    assert gm.next_deadline_ms() == 100 + REBALANCE_MS
    out = gm.tick(100 + REBALANCE_MS)
    assert join_result(out, token_a).generation_id == generation + 1
    assert [m.member_id for m in join_result(out, token_a).members] == [a, c]
    assert join_result(out, token_c).members == ()
    assert heartbeat(gm, 100 + REBALANCE_MS, b, generation) == UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_waits_and_is_extended_by_new_joins() -> None:
    gm = GroupMembership(seed=1, initial_rebalance_delay_ms=3_000)
    a = member_id_for(gm, 0, "a")
    token_a, out = join(gm, 0, join_request(a))
    assert out == [] and gm.next_deadline_ms() == 3_000
    b = member_id_for(gm, 1_000, "b")
    token_b, out = join(gm, 1_000, join_request(b))
    assert out == []  # everybody joined, but the initial delay still runs
    assert gm.tick(2_999) == []
    assert gm.tick(3_000) == []  # b arrived during the delay: wait another delay
    assert gm.next_deadline_ms() == 6_000
    out = gm.tick(6_000)
    assert join_result(out, token_a).generation_id == join_result(out, token_b).generation_id == 1
    assert len(join_result(out, token_a).members) == 2


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    gm = GroupMembership(seed=1, initial_rebalance_delay_ms=3_000)
    tokens = [join(gm, 0, join_request(member_id_for(gm, 0, "m0"), rebalance_ms=5_000))[0]]
    for now in range(1_000, 20_000, 1_000):  # a new member every second
        tokens.append(join(gm, now, join_request(member_id_for(gm, now, f"m{now}")))[0])
        out = gm.tick(now)
        if out:
            break
    # 3 s delay, then one extension of the remaining 2 s: done at 5 s.
    assert now == 5_000
    assert {c.token for c in out} == set(tokens)


def test_inconsistent_protocols_are_refused(gm: GroupMembership) -> None:
    a, b, _ = stable_group(gm)
    token, out = join(gm, 1, join_request(client="c", protocols=(("sticky", b"s"),)))
    assert join_result(out, token).error == INCONSISTENT_GROUP_PROTOCOL
    token, out = join(gm, 1, join_request(client="c", protocol_type="connect"))
    assert join_result(out, token).error == INCONSISTENT_GROUP_PROTOCOL
    token, out = join(gm, 1, join_request(client="c", group="h", protocols=()))
    assert join_result(out, token).error == INCONSISTENT_GROUP_PROTOCOL
    token, out = join(gm, 1, join_request(client="c", group="h", protocol_type=""))
    assert join_result(out, token).error == INCONSISTENT_GROUP_PROTOCOL
    assert gm.describe("h") is None  # a refused join creates no group
    # Sharing one protocol with every member is enough; the group then agrees on it.
    c = member_id_for(gm, 2, "c", protocols=(("sticky", b"s"), ("roundrobin", b"rr-c")))
    join(gm, 2, join_request(c, protocols=(("sticky", b"s"), ("roundrobin", b"rr-c"))))
    join(gm, 3, join_request(a))
    token_b, out = join(gm, 4, join_request(b))
    assert join_result(out, token_b).protocol_name == "roundrobin"


def test_protocol_with_most_votes_wins(gm: GroupMembership) -> None:
    ids = [member_id_for(gm, 0, f"m{i}") for i in range(3)]
    prefs = [(("range", b""), ("rr", b"")), (("rr", b""), ("range", b"")), (("rr", b""), ("range", b""))]
    out: list[Completion] = []
    for member_id, protocols in zip(ids, prefs, strict=True):
        token, out = join(gm, 1, join_request(member_id, protocols=protocols))
    assert join_result(out, token).protocol_name == "rr"


def test_invalid_session_timeout_and_group_id(gm: GroupMembership) -> None:
    for session_ms in (5_999, 1_800_001):
        token, out = join(gm, 0, join_request(session_ms=session_ms))
        assert join_result(out, token).error == INVALID_SESSION_TIMEOUT
    token, out = join(gm, 0, join_request(group=""))
    assert join_result(out, token).error == INVALID_GROUP_ID
    token, out = join(gm, 0, join_request("made-up"))
    assert join_result(out, token).error == UNKNOWN_MEMBER_ID
    assert gm.list_groups() == []


def test_leave_of_one_member_rebalances_the_rest(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    result, out = gm.leave(1, LeaveGroup("g", ((b, None), ("stranger", None))))
    assert result.error == errors.NONE
    assert result.members == ((b, None, errors.NONE), ("stranger", None, UNKNOWN_MEMBER_ID))
    assert out == [] and state(gm) == "PreparingRebalance"
    token, out = join(gm, 2, join_request(a))
    assert join_result(out, token).generation_id == generation + 1
    assert [m.member_id for m in join_result(out, token).members] == [a]


def test_leave_completes_a_rebalance_waiting_for_the_leaver(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    token, out = join(gm, 1, join_request(a, protocols=(("roundrobin", b"x"),)))
    assert out == []
    _, out = gm.leave(2, LeaveGroup("g", ((b, None),)))
    assert join_result(out, token).generation_id == generation + 1


def test_leave_of_the_last_member_empties_the_group(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    result, out = gm.leave(1, LeaveGroup("g", ((a, None), (b, None))))
    assert [error for _, _, error in result.members] == [errors.NONE, errors.NONE]
    assert out == []
    assert state(gm) == "Empty"
    assert gm.list_groups() == [("g", "consumer", "Empty")]
    # Kafka bumps the generation even for an empty group: an old member's commit is refused.
    assert gm.validate_commit("g", generation, a, None) == UNKNOWN_MEMBER_ID
    assert gm.validate_commit("g", -1, "", None) == errors.NONE
    assert gm.next_deadline_ms() is None


def test_leave_of_an_unknown_group_answers_each_member(gm: GroupMembership) -> None:
    result, out = gm.leave(0, LeaveGroup("nope", (("m1", None), ("", "i1"))))
    assert result.error == errors.NONE
    assert result.members == (("m1", None, UNKNOWN_MEMBER_ID), ("", "i1", UNKNOWN_MEMBER_ID))
    assert out == []


def test_remove_groups_answers_held_requests_not_coordinator(gm: GroupMembership) -> None:
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    held_join, _ = join(gm, 0, join_request(a))
    out = gm.remove_groups(["g", "never-heard-of"])
    assert join_result(out, held_join).error == NOT_COORDINATOR
    assert gm.describe("g") is None and gm.list_groups() == []
    assert gm.next_deadline_ms() is None
    # Held syncs too.
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    held_sync, out = sync(gm, 1, b, 1)
    assert out == []
    out = gm.remove_groups(["g"])
    assert sync_result(out, held_sync).error == NOT_COORDINATOR


def test_validate_commit(gm: GroupMembership) -> None:
    assert gm.validate_commit("absent", -1, "", None) == errors.NONE  # a standalone consumer
    assert gm.validate_commit("absent", -1, "m", None) == errors.NONE  # as Kafka: no generation, no check
    assert gm.validate_commit("absent", 3, "m", None) == ILLEGAL_GENERATION  # from a generation long gone
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    assert gm.validate_commit("g", 1, a, None) == REBALANCE_IN_PROGRESS  # CompletingRebalance
    sync(gm, 1, a, 1, ((a, b"A"),))
    sync(gm, 1, b, 1)
    assert gm.validate_commit("g", 1, a, None) == errors.NONE
    assert gm.validate_commit("g", 0, a, None) == ILLEGAL_GENERATION
    assert gm.validate_commit("g", 1, "stranger", None) == UNKNOWN_MEMBER_ID
    assert gm.validate_commit("g", -1, "", None) == UNKNOWN_MEMBER_ID  # the group is managed by members
    join(gm, 2, join_request(a, protocols=(("roundrobin", b""),)))
    assert state(gm) == "PreparingRebalance"
    assert gm.validate_commit("g", 1, b, None) == errors.NONE  # the current generation may still commit
    # A valid commit refreshes the session, as a heartbeat does.
    assert gm.validate_commit("g", 1, b, None, now_ms=SESSION_MS - 1) == errors.NONE
    gm.tick(SESSION_MS)
    assert heartbeat(gm, SESSION_MS, b, 1) == REBALANCE_IN_PROGRESS


def test_static_member_replacement_fences_the_old_member_id(gm: GroupMembership) -> None:
    token, out = join(gm, 0, join_request(instance="i-1", client="a"))
    first = join_result(out, token)  # static members skip MEMBER_ID_REQUIRED; alone, the rebalance ends at once
    old_id = first.member_id
    assert first.error == errors.NONE and first.generation_id == 1
    assert old_id.startswith("i-1-")  # Kafka names static members after their instance id
    sync(gm, 1, old_id, 1, ((old_id, b"A"),), instance="i-1")
    # The process restarts and joins again with the same instance id.
    token, out = join(gm, 2, join_request(instance="i-1", client="a"))
    new = join_result(out, token)
    assert new.error == errors.NONE and new.member_id != old_id and new.generation_id == 2
    assert heartbeat(gm, 3, old_id, 1, instance="i-1") == FENCED_INSTANCE_ID
    token, out = sync(gm, 3, old_id, 2, instance="i-1")
    assert sync_result(out, token).error == FENCED_INSTANCE_ID
    assert gm.validate_commit("g", 2, old_id, "i-1") == FENCED_INSTANCE_ID
    assert heartbeat(gm, 3, new.member_id, 2, instance="i-1") == errors.NONE
    # Leaving by instance id alone.
    result, _ = gm.leave(4, LeaveGroup("g", (("", "i-1"),)))
    assert result.members == (("", "i-1", errors.NONE),)
    assert state(gm) == "Empty"


def test_static_replacement_answers_the_old_members_held_join_fenced(gm: GroupMembership) -> None:
    a = member_id_for(gm, 0, "a")
    member_id_for(gm, 0, "b")  # b stays pending: the rebalance cannot end before it rejoins or expires
    join(gm, 0, join_request(a))
    held, out = join(gm, 0, join_request(instance="i-1"))
    assert out == []
    token_new, out = join(gm, 1, join_request(instance="i-1"))
    assert join_result(out, held).error == FENCED_INSTANCE_ID
    assert all(c.token != token_new for c in out)  # the new incarnation waits in the rebalance
    assert len(gm.describe("g").members) == 2  # type: ignore[union-attr]


def test_group_max_size() -> None:
    gm = GroupMembership(seed=1, initial_rebalance_delay_ms=0, group_max_size=2)
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    token, out = join(gm, 0, join_request(client="c"))
    assert join_result(out, token).error == GROUP_MAX_SIZE_REACHED  # two ids already pending
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    token, out = join(gm, 1, join_request(client="e", instance="static-e"))
    assert join_result(out, token).error == GROUP_MAX_SIZE_REACHED  # two members


def test_groups_max_evicts_an_empty_group_or_refuses() -> None:
    gm = GroupMembership(seed=1, initial_rebalance_delay_ms=0, groups_max=2)
    member_id_for(gm, 0, "x", group="g1")
    member_id_for(gm, 0, "x", group="g2")
    token, out = join(gm, 0, join_request(client="x", group="g3"))
    assert join_result(out, token).error == COORDINATOR_NOT_AVAILABLE  # both have pending members
    gm.tick(SESSION_MS)  # the pending ids expire: g1 and g2 are idle
    member_id_for(gm, SESSION_MS, "x", group="g3")
    assert [group_id for group_id, _, _ in gm.list_groups()] == ["g2", "g3"]


def test_same_seed_gives_the_same_member_ids() -> None:
    def ids(seed: int) -> list[str]:
        gm = GroupMembership(seed=seed)
        return [member_id_for(gm, 0, f"c{i}") for i in range(5)]

    assert ids(3) == ids(3)
    assert ids(3) != ids(4)
    assert len(set(ids(3))) == 5


def test_next_deadline_follows_sessions_pending_members_and_rebalances(gm: GroupMembership) -> None:
    assert gm.next_deadline_ms() is None
    a, b = member_id_for(gm, 100, "a"), member_id_for(gm, 150, "b")
    assert gm.next_deadline_ms() == 100 + SESSION_MS  # a's pending id expires first
    token_a, _ = join(gm, 200, join_request(a, rebalance_ms=5_000))
    # a waits in a join, so has no session deadline; the rebalance ends at 5_200 unless b comes back.
    assert gm.next_deadline_ms() == 5_200
    assert gm.tick(5_199) == []
    out = gm.tick(5_200)
    assert join_result(out, token_a).generation_id == 1
    # CompletingRebalance: a's session runs from its join answer, its sync is due by the rebalance timeout.
    assert gm.next_deadline_ms() == 150 + SESSION_MS  # b's pending id is still remembered
    assert gm.tick(150 + SESSION_MS) == []
    assert gm.next_deadline_ms() == 5_200 + 5_000
    sync(gm, 10_000, a, 1, ((a, b"A"),))
    assert gm.next_deadline_ms() == 10_000 + SESSION_MS
    assert heartbeat(gm, 15_000, a, 1) == errors.NONE
    assert gm.tick(10_000 + SESSION_MS) == []  # an early wake-up: the heartbeat moved the session on
    assert gm.next_deadline_ms() == 15_000 + SESSION_MS
    token, out = join(gm, 16_000, join_request(b))
    assert join_result(out, token).error == UNKNOWN_MEMBER_ID  # its pending id expired


def test_pending_member_that_never_rejoins_expires(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    c = member_id_for(gm, 0, "c")
    assert state(gm) == "Stable"  # a pending member does not start a rebalance
    heartbeat(gm, SESSION_MS - 1, a, generation)
    heartbeat(gm, SESSION_MS - 1, b, generation)
    gm.tick(SESSION_MS)
    token, out = join(gm, SESSION_MS + 1, join_request(c))
    assert join_result(out, token).error == UNKNOWN_MEMBER_ID


def test_member_that_never_syncs_is_removed_at_the_sync_deadline(gm: GroupMembership) -> None:
    a, b = member_id_for(gm, 0, "a"), member_id_for(gm, 0, "b")
    join(gm, 0, join_request(a))
    join(gm, 0, join_request(b))
    follower_sync, out = sync(gm, 1, b, 1)
    assert out == []
    for now in range(5_000, REBALANCE_MS, 5_000):  # the leader heartbeats but never syncs
        assert heartbeat(gm, now, a, 1) == errors.NONE
        assert heartbeat(gm, now, b, 1) == errors.NONE
        assert gm.tick(now) == []
    out = gm.tick(REBALANCE_MS)
    assert sync_result(out, follower_sync).error == REBALANCE_IN_PROGRESS
    assert heartbeat(gm, REBALANCE_MS, a, 1) == UNKNOWN_MEMBER_ID
    assert heartbeat(gm, REBALANCE_MS, b, 1) == REBALANCE_IN_PROGRESS


def test_a_follower_rejoining_unchanged_in_stable_is_answered_at_once(gm: GroupMembership) -> None:
    a, b, generation = stable_group(gm)
    token, out = join(gm, 1, join_request(b))
    result = join_result(out, token)
    assert result.generation_id == generation and result.leader == a and result.members == ()
    assert state(gm) == "Stable"
    token, out = join(gm, 2, join_request(a))  # the leader's join always rebalances
    assert out == [] and state(gm) == "PreparingRebalance"


def test_a_superseded_join_is_answered(gm: GroupMembership) -> None:
    a, b, _ = stable_group(gm)
    first, out = join(gm, 1, join_request(a))
    assert out == []
    second, out = join(gm, 2, join_request(a))
    assert join_result(out, first).error == REBALANCE_IN_PROGRESS
    assert all(c.token != second for c in out)


def _random_step(gm: GroupMembership, rng: random.Random, now: int, known: dict[str, list[str]],
                 generations: dict[str, int]) -> tuple[set[int], list[Completion]]:
    """One random request from a plausible client: recent member ids, mostly the current generation."""
    group_id = rng.choice(list(known))
    description = gm.describe(group_id)
    members = [m.member_id for m in description.members] if description is not None else []
    member = rng.choice(rng.choices([members, known[group_id][-3:], [""]], weights=[6, 3, 1])[0] or [""])
    generation = rng.choice([generations[group_id]] * 4 + [generations[group_id] - 1, -1])
    instance = rng.choice([None, None, None, "s1"])
    token = next(tokens)
    action = rng.choices(["join", "sync", "heartbeat", "commit", "leave", "tick", "remove"], [30, 25, 15, 5, 8, 15, 2])[0]
    if action == "join":
        protocols = rng.choice([(("range", b"r"),), (("range", b"r"), ("rr", b"x")), (("rr", b"y"),)])
        out = gm.join(now, token, join_request(member, group=group_id, protocols=protocols, instance=instance,
                                               rebalance_ms=rng.choice([6_000, 20_000])))
        for c in out:
            if isinstance(c.result, JoinResult) and c.result.member_id:
                known[group_id].append(c.result.member_id)
            if isinstance(c.result, JoinResult) and c.result.error == errors.NONE:
                generations[group_id] = c.result.generation_id
        return {token}, out
    if action == "sync":
        assignments = tuple((m, b"x") for m in known[group_id][-4:])
        request = SyncGroup(group_id, generation, member, instance, None, None, assignments)
        return {token}, gm.sync(now, token, request)
    if action == "heartbeat":
        gm.heartbeat(now, Heartbeat(group_id, generation, member, instance))
    elif action == "commit":
        gm.validate_commit(group_id, generation, member, instance, now_ms=now)
    elif action == "leave":
        return set(), gm.leave(now, LeaveGroup(group_id, ((member, instance),)))[1]
    elif action == "remove":
        return set(), gm.remove_groups([group_id])
    return set(), gm.tick(now)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_every_token_is_answered_exactly_once(seed: int) -> None:
    rng = random.Random(seed)
    gm = GroupMembership(seed=seed, initial_rebalance_delay_ms=rng.choice([0, 3_000]), group_max_size=4)
    asked: set[int] = set()
    answered: list[int] = []
    known: dict[str, list[str]] = {"g0": [], "g1": []}  # member ids handed out, per group
    generations = {"g0": 0, "g1": 0}
    now = 0
    try:
        for _ in range(600):
            now += rng.choices([0, 100, 1_000, 4_000, 12_000], [30, 30, 25, 10, 5])[0]
            deadline = gm.next_deadline_ms()
            out = gm.tick(now) if deadline is not None and deadline <= now else []  # as the driver does
            deadline = gm.next_deadline_ms()
            assert deadline is None or deadline > now, "a tick left something due"
            new_tokens, more = _random_step(gm, rng, now, known, generations)
            asked |= new_tokens
            answered += [c.token for c in out + more]
            assert len(answered) == len(set(answered)), "a token answered twice"
            assert set(answered) <= asked, "an answer for a token never asked"
            for group_id, _, group_state in gm.list_groups():
                description = gm.describe(group_id)
                assert description is not None and description.state == group_state
                if group_state == "Empty":
                    assert description.members == (), "an Empty group with members"
                if group_state in ("CompletingRebalance", "Stable"):
                    assert description.members != (), f"a {group_state} group without members"
        answered += [c.token for c in gm.remove_groups(list(known))]
        assert sorted(answered) == sorted(asked), "tokens left unanswered"
    except AssertionError:
        print(f"reproduce with seed={seed}")
        raise
