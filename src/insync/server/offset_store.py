"""The committed offsets of the groups this broker coordinates, kept in the `__consumer_offsets` partitions it leads.

A partition is replayed into the `OffsetCache` (a chunk per loop turn) when this broker starts leading it, and is
usable once `loaded` holds the leader epoch it was replayed at. A commit is appended like an acks=all Produce and
enters the cache once acknowledged; a tombstone deletes an offset so. A TxnOffsetCommit (KIP-447) is appended in
the producer's transaction and held until its marker: applied on COMMIT, dropped on ABORT, whether the marker is
written (`complete_transaction`) or replayed. Expiry writes tombstones for the offsets past
offsets.retention.minutes of groups without members. Which groups exist and who is in them is the coordinator's;
it writes a group's membership here (`write_group`) and gets the replayed records back (`on_groups`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import ProduceRequest, ProduceResponse
from insync.config import GroupCoordinatorConfig
from insync.errors import KafkaError, KafkaException
from insync.groups.group_records import (
    GroupRecord,
    decode_group_value,
    encode_group_key,
    encode_group_value,
    group_of_key,
)
from insync.groups.offsets import (
    CommittedOffset,
    OffsetCache,
    OffsetKey,
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from insync.protocol.control_records import COMMIT, marker_type
from insync.protocol.records import Record, RecordSpec, build_batch, iter_batches, iter_records
from insync.storage.log_manager import LogManager
from insync.types import OFFSETS_TOPIC, TopicPartition

log = logging.getLogger("insync.groups")

LOAD_CHUNK_BYTES = 1024 * 1024
TOMBSTONES_PER_BATCH = 500  # expired offsets written a batch at a time, well within max.message.bytes
# Kafka's GroupMetadataManager: how an append error reads to a client committing offsets.
_COMMIT_ERRORS = {
    **dict.fromkeys(("UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                     "REQUEST_TIMED_OUT"), errors.BY_NAME["COORDINATOR_NOT_AVAILABLE"]),
    **dict.fromkeys(("NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR", "FENCED_LEADER_EPOCH"),
                    errors.BY_NAME["NOT_COORDINATOR"]),
    **dict.fromkeys(("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE"),
                    errors.BY_NAME["INVALID_COMMIT_OFFSET_SIZE"]),
}


class OffsetStore:
    def __init__(self, config: GroupCoordinatorConfig, core: BrokerCore, log_manager: LogManager,
                 append: Callable[[ProduceRequest], Awaitable[ProduceResponse]]) -> None:
        self.config, self.core, self.log_manager = config, core, log_manager
        self._append = append
        self.cache = OffsetCache()
        self.loaded: dict[int, int] = {}  # offsets partition -> the leader epoch it was replayed at
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._expiring: asyncio.Task[None] | None = None
        # (offsets partition, producer id) -> the commits of its open transaction, with their log offsets
        self._txn_commits: dict[tuple[int, int], list[tuple[int, OffsetKey, CommittedOffset]]] = {}
        # The groups' membership records a load replayed (None: deleted), handed to `on_groups` when it is done.
        self._replayed_groups: dict[int, dict[str, GroupRecord | None]] = {}
        self.on_groups: Callable[[int, dict[str, GroupRecord]], None] = lambda partition, groups: None

    # Loading and unloading partitions -----------------------------------------------------------------------

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def start_load(self, partition: int, epoch: int) -> None:
        """Replay `partition` in a task; the caller has unloaded what it held."""
        assert partition not in self._loading and partition not in self.loaded, partition
        task = asyncio.get_running_loop().create_task(self._load(partition, epoch))
        self._loading[partition] = task
        task.add_done_callback(lambda _: self._loading.pop(partition, None))

    async def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition from its log start to the end it had when the load began, a chunk per loop turn."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        partition_log = self.log_manager.get(tp)
        if partition_log is None:
            return
        offset, end, applied = partition_log.log_start_offset, partition_log.log_end_offset, 0
        try:
            while offset < end:  # bounded: each read advances past at least one batch
                result = partition_log.read(offset, LOAD_CHUNK_BYTES, max_offset=end)
                if not result.records or result.next_offset <= offset:
                    break
                applied += self._load_batches(partition, result.records)
                offset = result.next_offset
                await asyncio.sleep(0)
        except KafkaException as exc:  # retention or truncation moved the log under the replay: try again later
            log.warning("Loading %s stopped at offset %d: %s", tp, offset, exc)
            self.cache.unload(partition)
            self._replayed_groups.pop(partition, None)
            return
        groups = self._replayed_groups.pop(partition, {})
        if self.core.leader_epoch(tp) == epoch:
            self.on_groups(partition, {group_id: record for group_id, record in groups.items() if record is not None})
            self.loaded[partition] = epoch
            log.info("Loaded %d offset commits of %s (leader epoch %d)", applied, tp, epoch)

    def _load_batches(self, partition: int, records: bytes) -> int:
        """Replay a chunk: plain commits into the cache, transactional ones held until their marker."""
        applied = 0
        for pos, header in iter_batches(records, verify_crc=False):
            batch = records[pos:pos + header.size]
            if header.is_control:
                self.complete_transaction(partition, header.producer_id, marker_type(batch) == COMMIT)
            elif header.is_transactional:
                for record in iter_records(batch):
                    self._hold_txn_commit(partition, header.producer_id, record.offset, record.key, record.value)
            else:
                replayed = list(iter_records(batch))
                applied += self.cache.load(partition, replayed)
                self._replay_groups(partition, replayed)
        return applied

    def _replay_groups(self, partition: int, records: Sequence[Record]) -> None:
        """Keep the last membership record of each group (Kafka's loader skips what it cannot read; so here)."""
        for record in records:
            try:
                group_id = None if record.key is None else group_of_key(record.key)
                if group_id is not None:
                    value = None if record.value is None else decode_group_value(record.value)
                    self._replayed_groups.setdefault(partition, {})[group_id] = value
            except OffsetRecordError as exc:
                log.warning("Skipping a group record at offset %d of %s-%d: %s", record.offset, OFFSETS_TOPIC,
                            partition, exc)

    def _hold_txn_commit(self, partition: int, producer_id: int, log_offset: int, key: bytes | None,
                         value: bytes | None) -> None:
        try:
            offset_key = None if key is None else decode_key(key)
            committed = None if value is None else decode_value(value)
        except OffsetRecordError:
            return
        if offset_key is not None and committed is not None:
            self._txn_commits.setdefault((partition, producer_id), []).append((log_offset, offset_key, committed))

    def unload(self, partition: int) -> list[str]:
        """Forget `partition`: its loaded epoch, its held transactional commits and its cached offsets. Returns
        the groups whose offsets it held."""
        self.loaded.pop(partition, None)
        for key in [k for k in self._txn_commits if k[0] == partition]:
            del self._txn_commits[key]
        return self.cache.unload(partition)

    # Commits --------------------------------------------------------------------------------------------------

    async def write(self, partition: int, commits: Sequence[tuple[OffsetKey, CommittedOffset | None]], now_ms: int
                    ) -> KafkaError:
        """Append the commits (None: a tombstone, which deletes the offset) as one batch with acks=all; into the
        cache once acknowledged."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = build_batch([RecordSpec(key=encode_key(k), value=None if v is None else encode_value(v))
                             for k, v in commits], base_timestamp=now_ms)
        response = await self._append(ProduceRequest(0, -1, self.config.offsets_commit_timeout_ms,
                                                     ((tp, batch),)))
        (result,) = response.results
        if result.error is not errors.NONE:
            return _COMMIT_ERRORS.get(result.error.name, result.error)
        if self.loaded.get(partition) == self.core.leader_epoch(tp):
            for i, (key, value) in enumerate(commits):
                self.cache.commit(partition, result.base_offset + i, key, value)
        return errors.NONE

    async def write_group(self, partition: int, group_id: str, record: GroupRecord | None, now_ms: int
                          ) -> KafkaError:
        """Append a group's membership record (None: its tombstone) with acks=all, as Kafka's storeGroup does."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        value = None if record is None else encode_group_value(record)
        batch = build_batch([RecordSpec(key=encode_group_key(group_id), value=value)], base_timestamp=now_ms)
        response = await self._append(ProduceRequest(0, -1, self.config.offsets_commit_timeout_ms,
                                                     ((tp, batch),)))
        (result,) = response.results
        error = _COMMIT_ERRORS.get(result.error.name, result.error)
        return errors.UNKNOWN_SERVER_ERROR if error.name == "INVALID_COMMIT_OFFSET_SIZE" else error

    async def write_in_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                                   held: Sequence[tuple[OffsetKey, CommittedOffset]], now_ms: int) -> KafkaError:
        """Append the commits in the producer's transaction; once acknowledged they wait for its marker."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = build_batch([RecordSpec(key=encode_key(k), value=encode_value(v)) for k, v in held],
                            base_timestamp=now_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                            is_transactional=True)
        response = await self._append(ProduceRequest(0, -1, self.config.offsets_commit_timeout_ms, ((tp, batch),),
                                                     from_client=False))
        (result,) = response.results
        error = _COMMIT_ERRORS.get(result.error.name, result.error)
        if error is errors.NONE:
            self._txn_commits.setdefault((partition, producer_id), []).extend(
                (result.base_offset + i, key, value) for i, (key, value) in enumerate(held))
        return error

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker was written to (or replayed from) `partition`: the producer's held commits apply or go (an
        abort drops them, so OffsetFetch no longer answers UNSTABLE_OFFSET_COMMIT for them)."""
        held = self._txn_commits.pop((partition, producer_id), [])
        for log_offset, key, value in held if commit else ():
            self.cache.commit(partition, log_offset, key, value)

    def unstable(self, group_id: str) -> frozenset[TopicPartition]:
        """The partitions of `group_id` with a transactional commit awaiting its marker."""
        return frozenset(key.topic_partition for held in self._txn_commits.values() for _, key, _ in held
                         if key.group_id == group_id)

    # Expiry ---------------------------------------------------------------------------------------------------

    def maybe_expire(self, now_ms: int, has_members: Callable[[str], bool]) -> None:
        """Start an expiry pass unless one is still writing."""
        if self._expiring is None or self._expiring.done():
            self._expiring = asyncio.get_running_loop().create_task(self._expire(now_ms, has_members))

    async def _expire(self, now_ms: int, has_members: Callable[[str], bool]) -> None:
        """Tombstones for the commits past offsets.retention.minutes of groups without members, in the partitions
        this broker has loaded."""
        expired = self.cache.expired(now_ms, self.config.offsets_retention_ms, has_members)
        for partition, keys in expired.items():
            for start in range(0, len(keys), TOMBSTONES_PER_BATCH) if partition in self.loaded else ():
                chunk = keys[start:start + TOMBSTONES_PER_BATCH]
                error = await self.write(partition, [(key, None) for key in chunk], now_ms)
                log.info("Expired %d offsets of %s-%d: %s", len(chunk), OFFSETS_TOPIC, partition, error.name)

    def close(self) -> None:
        for task in [*self._loading.values(), self._expiring]:
            if task is not None:
                task.cancel()
