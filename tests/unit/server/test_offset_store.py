"""The offset store on a fake broker core: commits enter the cache once the partition acknowledged them, an
append error reads as Kafka maps it, transactional commits wait for their marker (OffsetFetch's unstable
partitions meanwhile), and a replay of the partition's log applies plain commits and completed transactions."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from coordinator_harness import Appends

from insync import errors
from insync.config import BrokerConfig
from insync.groups.offsets import CommittedOffset, OffsetKey, encode_key, encode_value
from insync.protocol.control_records import marker_batch
from insync.protocol.records import RecordSpec, build_batch
from insync.server.offset_store import OffsetStore
from insync.types import TopicPartition

E = errors.BY_NAME
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
OFFSET = CommittedOffset(7, -1, "", 1_000)


def store(appends: Appends, records: bytes = b"") -> OffsetStore:
    log = SimpleNamespace(log_start_offset=0, log_end_offset=1 if records else 0,
                          read=lambda offset, max_bytes, max_offset: SimpleNamespace(records=records, next_offset=1))
    core: Any = SimpleNamespace(leader_epoch=lambda tp: 5)
    log_manager: Any = SimpleNamespace(get=lambda tp: log)
    return OffsetStore(BrokerConfig({}).groups, core, log_manager, appends)


async def loaded(offsets: OffsetStore) -> None:
    offsets.start_load(0, 5)
    for _ in range(3):  # the replay of a one-chunk log finishes within a few loop turns
        await asyncio.sleep(0)
    assert offsets.loaded == {0: 5} and not offsets.is_loading(0)


def test_a_commit_enters_the_cache_once_acknowledged_and_an_append_error_reads_as_kafka_maps_it() -> None:
    async def scenario() -> None:
        offsets = store(Appends("NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "NONE"))
        await loaded(offsets)
        key = OffsetKey("g", T0)
        assert await offsets.write(0, [(key, OFFSET)], 1_000) is E["COORDINATOR_NOT_AVAILABLE"]
        assert await offsets.write(0, [(key, OFFSET)], 1_000) is E["NOT_COORDINATOR"]
        assert offsets.cache.offsets("g") == {}
        assert await offsets.write(0, [(key, OFFSET)], 1_000) is errors.NONE
        assert offsets.cache.offsets("g") == {T0: OFFSET}

    asyncio.run(scenario())


def test_transactional_commits_wait_for_their_marker() -> None:
    async def scenario() -> None:
        offsets = store(Appends("NONE", "NONE"))
        await loaded(offsets)
        assert await offsets.write_in_transaction(0, 9, 0, [(OffsetKey("g", T0), OFFSET)], 1_000) is errors.NONE
        assert await offsets.write_in_transaction(0, 10, 0, [(OffsetKey("g", T1), OFFSET)], 1_000) is errors.NONE
        assert offsets.cache.offsets("g") == {} and offsets.unstable("g") == {T0, T1}
        offsets.complete_transaction(0, 9, commit=True)
        offsets.complete_transaction(0, 10, commit=False)
        assert offsets.cache.offsets("g") == {T0: OFFSET} and offsets.unstable("g") == frozenset()

    asyncio.run(scenario())


def test_a_replay_applies_plain_commits_and_committed_transactions_and_unload_forgets_them() -> None:
    plain = build_batch([RecordSpec(key=encode_key(OffsetKey("g", T0)), value=encode_value(OFFSET))])
    held = build_batch([RecordSpec(key=encode_key(OffsetKey("g", T1)), value=encode_value(OFFSET))],
                       base_offset=1, producer_id=9, producer_epoch=0, is_transactional=True)
    marker = marker_batch(9, 0, 0, True, 1_000)

    async def scenario() -> None:
        offsets = store(Appends(), plain + held + marker)
        await loaded(offsets)
        assert offsets.cache.offsets("g") == {T0: OFFSET, T1: OFFSET}
        assert offsets.unload(0) == ["g"]
        assert offsets.loaded == {} and offsets.cache.offsets("g") == {}

    asyncio.run(scenario())
