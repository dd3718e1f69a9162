"""DeleteGroups and OffsetDelete through the coordinator, on a fake broker core: a tombstone write the partition
refuses is answered as Kafka maps append errors (the offsets stay), one it takes empties the cache, and a group
whose partition is not replayed yet is answered COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

import asyncio

from coordinator_harness import Appends, coordinator

from insync import errors
from insync.groups.offsets import CommittedOffset, OffsetKey, decode_key
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import build, nested, request_class
from insync.protocol.records import iter_records
from insync.server.group_coordinator import GroupCoordinator
from insync.types import OFFSETS_TOPIC, TopicPartition

E = errors.BY_NAME
OFFSETS = TopicPartition(OFFSETS_TOPIC, 0)
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def delete_groups(*group_ids: str) -> DecodedRequest:
    return DecodedRequest(42, 2, 1, "test", build(request_class(42, 2), groups_names=group_ids))


def offset_delete(group_id: str, *partitions: int) -> DecodedRequest:
    cls = request_class(47, 0)
    topic = build(nested(cls, "OffsetDeleteRequestTopic"), name="t", partitions=tuple(
        build(nested(cls, "OffsetDeleteRequestPartition"), partition_index=p) for p in partitions))
    return DecodedRequest(47, 0, 1, "test", build(cls, group_id=group_id, topics=(topic,)))


def seeded(groups: GroupCoordinator, group_id: str, *tps: TopicPartition) -> None:
    for i, tp in enumerate(tps):
        groups.offsets.cache.commit(0, i, OffsetKey(group_id, tp), CommittedOffset(7, -1, "", 0))


def test_delete_groups_waits_for_the_replay_and_keeps_offsets_the_partition_refused() -> None:
    async def scenario() -> None:
        appends = Appends("NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "NONE")
        groups = coordinator(appends)
        answer = await groups.delete_groups(delete_groups("g"))
        assert [int(r.error_code) for r in answer.results] == [E["COORDINATOR_LOAD_IN_PROGRESS"].code]
        await asyncio.sleep(0)  # the replay of an empty partition finishes on the next loop turn
        seeded(groups, "g", T0, T1)
        answer = await groups.delete_groups(delete_groups("g"))
        assert [int(r.error_code) for r in answer.results] == [E["COORDINATOR_NOT_AVAILABLE"].code]
        answer = await groups.delete_groups(delete_groups("g"))
        assert [int(r.error_code) for r in answer.results] == [E["NOT_COORDINATOR"].code]
        assert groups.offsets.cache.offsets("g").keys() == {T0, T1}, "nothing acknowledged: the offsets stay"
        answer = await groups.delete_groups(delete_groups("g", "g"))
        assert [int(r.error_code) for r in answer.results] == [0, E["GROUP_ID_NOT_FOUND"].code]
        assert groups.offsets.cache.offsets("g") == {} and groups.offsets.cache.group_ids() == []
        assert len(appends.requests) == 3

    asyncio.run(scenario())


def test_offset_delete_tombstones_only_committed_partitions_and_reports_a_refused_write() -> None:
    async def scenario() -> None:
        appends = Appends("NOT_ENOUGH_REPLICAS", "NONE")
        groups = coordinator(appends)
        await groups.offset_delete(offset_delete("g", 0))
        await asyncio.sleep(0)
        seeded(groups, "g", T0)
        answer = await groups.offset_delete(offset_delete("g", 0, 1))
        assert (int(answer.error_code), answer.topics) == (E["COORDINATOR_NOT_AVAILABLE"].code, ())
        answer = await groups.offset_delete(offset_delete("g", 0, 1))
        assert int(answer.error_code) == 0
        assert [(p.partition_index, int(p.error_code)) for p in answer.topics[0].partitions] == [(0, 0), (1, 0)]
        assert groups.offsets.cache.offsets("g") == {}
        ((_, batch),) = appends.requests[1].partitions
        assert [(decode_key(r.key), r.value) for r in iter_records(batch) if r.key is not None] == [
            (OffsetKey("g", T0), None)], "a tombstone for the committed partition alone"
        answer = await groups.offset_delete(offset_delete("", 0))
        assert int(answer.error_code) == E["INVALID_GROUP_ID"].code

    asyncio.run(scenario())


def test_the_expiry_pass_removes_an_empty_group_without_offsets_and_writes_its_tombstone() -> None:
    """Kafka's cleanupGroupMetadata: a restored Empty group with no offsets left goes; one with offsets stays."""
    from insync.groups.group_records import GroupRecord, group_of_key

    async def scenario() -> tuple[list[str], list[tuple[str | None, bytes | None]]]:
        appends = Appends("NONE")
        c = coordinator(appends)
        c.offsets.loaded.update({0: 5, 1: 5})
        empty = GroupRecord("consumer", 4, None, None, 0, ())
        assert c.membership.restore(1_000, "gone", empty) and c.membership.restore(1_000, "kept", empty)
        c.offsets.cache.commit(0, 7, OffsetKey("kept", T0), CommittedOffset(3, -1, "", 1_000))
        c._forget_empty_groups()
        assert c._forgetting is not None
        await c._forgetting
        records = [(group_of_key(r.key) if r.key else None, r.value) for request in appends.requests
                   for _, batch in request.partitions for r in iter_records(batch)]
        return [g for g, _, _ in c.membership.list_groups()], records

    groups, written = asyncio.run(scenario())
    assert groups == ["kept"] and written == [("gone", None)]
