"""Group membership driven by hand for the groups unit tests: join, sync and a stable group of two."""

from __future__ import annotations

import itertools

from insync import errors
from insync.groups.membership import GroupMembership
from insync.groups.messages import Completion, JoinGroup, JoinResult, SyncGroup, SyncResult

SESSION_MS = 10_000
REBALANCE_MS = 30_000
tokens = itertools.count(1)


def join_request(
    member_id: str = "",
    *,
    group: str = "g",
    instance: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub-range"), ("roundrobin", b"sub-rr")),
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    client: str = "client",
) -> JoinGroup:
    return JoinGroup(group, member_id, instance, session_ms, rebalance_ms, protocol_type, protocols, True, client, "/127.0.0.1")


def join(gm: GroupMembership, now_ms: int, request: JoinGroup) -> tuple[int, list[Completion]]:
    token = next(tokens)
    return token, gm.join(now_ms, token, request)


def sync(
    gm: GroupMembership, now_ms: int, member_id: str, generation: int, assignments: tuple[tuple[str, bytes], ...] = (),
    instance: str | None = None,
) -> tuple[int, list[Completion]]:
    token = next(tokens)
    return token, gm.sync(now_ms, token, SyncGroup("g", generation, member_id, instance, "consumer", None, assignments))


def join_result(completions: list[Completion], token: int) -> JoinResult:
    [result] = [c.result for c in completions if c.token == token]
    assert isinstance(result, JoinResult)
    return result


def sync_result(completions: list[Completion], token: int) -> SyncResult:
    [result] = [c.result for c in completions if c.token == token]
    assert isinstance(result, SyncResult)
    return result


def member_id_for(gm: GroupMembership, now_ms: int, client: str, group: str = "g",
                  protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub-range"),)) -> str:
    """The first join of a v4+ client: answered MEMBER_ID_REQUIRED with the id to rejoin with."""
    token, out = join(gm, now_ms, join_request(client=client, group=group, protocols=protocols))
    result = join_result(out, token)
    assert result.error == errors.BY_NAME["MEMBER_ID_REQUIRED"] and result.member_id.startswith(f"{client}-")
    return result.member_id


def stable_group(gm: GroupMembership, now_ms: int = 0) -> tuple[str, str, int]:
    """Two members a (leader) and b, joined, synced and Stable: returns (a, b, generation)."""
    a, b = member_id_for(gm, now_ms, "a"), member_id_for(gm, now_ms, "b")
    token_a, out_a = join(gm, now_ms, join_request(a))
    token_b, out_b = join(gm, now_ms, join_request(b))
    assert out_a == []
    generation = join_result(out_b, token_a).generation_id
    token, out = sync(gm, now_ms, a, generation, ((a, b"A"), (b, b"B")))
    assert sync_result(out, token).assignment == b"A"
    token, out = sync(gm, now_ms, b, generation)
    assert sync_result(out, token).assignment == b"B"
    assert state(gm) == "Stable"
    return a, b, generation


def state(gm: GroupMembership) -> str:
    description = gm.describe("g")
    assert description is not None
    return description.state
