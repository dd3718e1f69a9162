"""The checks Kafka makes of a group request before the group itself, in its order: a SyncGroup v5+ without its
protocol type or name is INCONSISTENT_GROUP_PROTOCOL (KafkaApis), then JoinGroup, SyncGroup, Heartbeat and
LeaveGroup without a group id INVALID_GROUP_ID (GroupCoordinatorService), before any coordinator lookup."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from coordinator_harness import Appends, coordinator

from insync import errors
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import build_defaults, request_class
from insync.wire.versions import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP

E = errors.BY_NAME


def request(api_key: int, version: int, **values: Any) -> DecodedRequest:
    return DecodedRequest(api_key, version, 1, "test", build_defaults(request_class(api_key, version), **values))


async def answer(asked: DecodedRequest) -> int:
    groups = coordinator(Appends())
    handler = {JOIN_GROUP: lambda r: groups.join(r, "h"), SYNC_GROUP: groups.sync, HEARTBEAT: groups.heartbeat,
               LEAVE_GROUP: groups.leave}[asked.api_key]
    result = handler(asked)
    return int((await result if asyncio.iscoroutine(result) else result).error_code)


@pytest.mark.parametrize(("api_key", "versions"), [(HEARTBEAT, range(5)), (LEAVE_GROUP, range(6)),
                                                   (SYNC_GROUP, range(6)), (JOIN_GROUP, (0, 5, 9))])
def test_an_empty_group_id_is_invalid_before_anything_else(api_key: int, versions: range) -> None:
    for version in versions:
        named = {"protocol_type": "consumer", "protocol_name": "range"}  # SyncGroup v5+ must name them
        assert asyncio.run(answer(request(api_key, version, **named))) == E["INVALID_GROUP_ID"].code, version
        # a named group goes on to the coordinator (its partition is being loaded here)
        loading = asyncio.run(answer(request(api_key, version, group_id="g", **named)))
        assert loading == E["COORDINATOR_LOAD_IN_PROGRESS"].code, version


def test_a_sync_v5_without_its_protocol_is_inconsistent_first() -> None:
    for missing in ({"protocol_type": "consumer"}, {"protocol_name": "range"}, {}):
        assert asyncio.run(answer(request(SYNC_GROUP, 5, **missing))) == E["INCONSISTENT_GROUP_PROTOCOL"].code
    assert asyncio.run(answer(request(SYNC_GROUP, 4))) == E["INVALID_GROUP_ID"].code  # v4 has no such fields
