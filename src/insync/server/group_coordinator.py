"""The broker's group coordinator: consumer groups on the asyncio loop, around the sans-IO `GroupMembership`.

A group's coordinator is the leader of its `__consumer_offsets` partition (`groups.offsets.partition_for`), as
in Kafka. This module keeps that true as leadership moves:
- FindCoordinator names that leader; the first creates `__consumer_offsets` through the controller and answers
  COORDINATOR_NOT_AVAILABLE until it has leaders.
- A group whose partition this broker leads but has not replayed at the current epoch starts the replay and is
  answered COORDINATOR_LOAD_IN_PROGRESS; one whose partition it does not lead gets NOT_COORDINATOR.
- Every SYNC_INTERVAL_MS partitions no longer led at their loaded epoch are dropped (held requests: NOT_COORDINATOR).
Held joins and syncs are futures keyed by a token, answered through `GroupMembership`'s `Completion`s. A
rebalance's end is written (`groups.group_records`) and its syncs answered once acknowledged, as Kafka's
storeGroup; the next coordinator restores the group from it. Offsets, their replay, appends and expiry are the
`OffsetStore`'s; this module checks a commit against the group's generation and answers the offset APIs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from insync import errors
from insync.broker.coordinator_partitions import coordinator_status, partition_count
from insync.broker.core import BrokerCore
from insync.broker.messages import ProduceRequest, ProduceResponse
from insync.config import GroupCoordinatorConfig
from insync.errors import KafkaError
from insync.groups import deletion
from insync.groups.group_records import GroupRecord
from insync.groups.membership import GroupMembership
from insync.groups.messages import Completion, GroupDescription, JoinResult, LeaveResult, SyncResult
from insync.groups.offsets import CommittedOffset, OffsetKey, partition_for
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.server.client import FailoverConnection
from insync.server.offset_store import OffsetStore
from insync.storage.log_manager import LogManager
from insync.types import OFFSETS_TOPIC, TopicPartition
from insync.wire import groups as api
from insync.wire import topics
from insync.wire import transactions as txn_api
from insync.wire.internal import NewTopic

# TxnOffsetCommit's KIP-890 check of the offsets partition: (transactional id, producer id, epoch, the partition,
# the request's version) -> the error to answer, NONE when the partition is in the transaction.
OffsetsPartitionCheck = Callable[[str, int, int, TopicPartition, int], Awaitable[KafkaError]]

log = logging.getLogger("insync.groups")

SYNC_INTERVAL_MS = 500
HELD_MAX = 10_000  # joins and syncs waiting at once; groups with a rebalance's write kept
JOIN_WAIT_MARGIN_S = 5.0  # a held join is answered by the rebalance timeout; this bounds the wait past it
CREATE_TIMEOUT_S = 30.0
E = errors.BY_NAME


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig, core: BrokerCore, log_manager: LogManager, controller: FailoverConnection,
                 append: Callable[[ProduceRequest], Awaitable[ProduceResponse]], now: Callable[[], int]) -> None:
        self.config, self.core, self.controller, self._now = config, core, controller, now
        self.membership = GroupMembership(
            seed=random.getrandbits(62), min_session_timeout_ms=config.min_session_timeout_ms,
            max_session_timeout_ms=config.max_session_timeout_ms,
            initial_rebalance_delay_ms=config.initial_rebalance_delay_ms, group_max_size=config.max_size)
        self.offsets = OffsetStore(config, core, log_manager, append)
        self.offsets.on_groups = self._restore_groups
        self._held: dict[int, asyncio.Future[JoinResult | SyncResult]] = {}
        # group -> (generation, the write of that rebalance's end): its syncs are answered once it is done
        self._stores: dict[str, tuple[int, asyncio.Task[KafkaError]]] = {}
        self._forgetting: asyncio.Task[None] | None = None
        self._tokens = itertools.count(1)
        self._wake = asyncio.Event()
        self._creating: asyncio.Task[None] | None = None

    # Which groups this broker coordinates --------------------------------------------------------------------

    def offsets_partitions(self) -> int | None:
        return partition_count(self.core, OFFSETS_TOPIC)

    def _status(self, group_id: str) -> tuple[KafkaError, int]:
        """(NONE, partition) when this broker coordinates `group_id` with its offsets loaded; else the error."""
        return coordinator_status(self.core, OFFSETS_TOPIC, group_id, self.offsets.loaded, self._start_load)

    def _member_status(self, group_id: str) -> KafkaError:
        """JoinGroup, SyncGroup, Heartbeat and LeaveGroup in Kafka's GroupCoordinatorService order: a group must
        be named (INVALID_GROUP_ID) before its coordinator is looked for."""
        return E["INVALID_GROUP_ID"] if not group_id else self._status(group_id)[0]

    def _start_load(self, partition: int, epoch: int) -> None:
        if self.offsets.is_loading(partition):
            return
        self._unload(partition)
        self.offsets.start_load(partition, epoch)

    def _unload(self, partition: int) -> None:
        """Stop coordinating the groups of `partition`: its offsets and its groups' members go."""
        count = self.offsets_partitions()
        gone = set(self.offsets.unload(partition))
        if count is not None:
            gone.update(g for g, _, _ in self.membership.list_groups() if partition_for(g, count) == partition)
        self._deliver(self.membership.remove_groups(sorted(gone)))

    def _sync_leadership(self) -> None:
        """Drop what this broker no longer leads, and replay what it newly leads before anyone asks (as Kafka's
        coordinator loads a partition on its election), so requests rarely meet COORDINATOR_LOAD_IN_PROGRESS."""
        for partition, epoch in list(self.offsets.loaded.items()):
            if self.core.leader_epoch(TopicPartition(OFFSETS_TOPIC, partition)) != epoch:
                log.info("No longer coordinating the groups of %s-%d", OFFSETS_TOPIC, partition)
                self._unload(partition)
        for tp, epoch, _ in self.core.leader_states(OFFSETS_TOPIC):
            if self.offsets.loaded.get(tp.partition) != epoch:
                self._start_load(tp.partition, epoch)

    # Held requests and the timer ----------------------------------------------------------------------------

    def _deliver(self, completions: Iterable[Completion]) -> None:
        for completion in completions:
            future = self._held.get(completion.token)
            if future is not None and not future.done():
                future.set_result(completion.result)
        self._store_records()
        self._wake.set()

    def _store_records(self) -> None:
        """Write the end of each rebalance the last membership call finished (Kafka's storeGroup)."""
        now_ms = self._now()
        records, count = self.membership.take_records(now_ms), self.offsets_partitions()
        if count is None:
            return
        for group_id, generation_id, record in records:
            if group_id not in self._stores and len(self._stores) >= HELD_MAX:
                # Groups evicted or gone leave their last write here: drop the finished ones (rare, bounded).
                self._stores = {g: s for g, s in self._stores.items() if not s[1].done()}
                if len(self._stores) >= HELD_MAX:
                    continue  # its syncs are answered without waiting for the write
            self._stores[group_id] = (generation_id, asyncio.get_running_loop().create_task(
                self._write_group(partition_for(group_id, count), group_id, record, now_ms)))

    async def _write_group(self, partition: int, group_id: str, record: GroupRecord | None, now_ms: int
                           ) -> KafkaError:
        try:
            return await self.offsets.write_group(partition, group_id, record, now_ms)
        except TimeoutError:  # the node's guard on the core's answer
            return E["COORDINATOR_NOT_AVAILABLE"]

    async def _stored(self, group_id: str, generation_id: int) -> KafkaError:
        """The outcome of writing the group's rebalance end of `generation_id`, once it is known (NONE if none)."""
        generation, store = self._stores.get(group_id, (None, None))
        return errors.NONE if store is None or generation != generation_id else await asyncio.shield(store)

    def _restore_groups(self, partition: int, groups: dict[str, GroupRecord]) -> None:
        """A newly led partition's groups, from their last records: their members carry on (Kafka's loadGroup)."""
        now_ms = self._now()
        restored = sum(self.membership.restore(now_ms, group_id, record) for group_id, record in groups.items())
        if groups:
            log.info("Loaded %d groups of %s-%d", restored, OFFSETS_TOPIC, partition)
        self._wake.set()

    async def _hold(self, start: Callable[[int], list[Completion]], wait_s: float,
                    timed_out: JoinResult | SyncResult) -> JoinResult | SyncResult:
        if len(self._held) >= HELD_MAX:
            return dataclasses.replace(timed_out, error=E["COORDINATOR_NOT_AVAILABLE"])
        token = next(self._tokens)
        future: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._held[token] = future
        try:
            self._deliver(start(token))
            return await asyncio.wait_for(future, wait_s)
        except TimeoutError:
            return timed_out
        finally:
            self._held.pop(token, None)

    async def run(self, stop: asyncio.Event) -> None:
        """Session and rebalance deadlines, leadership changes and offset expiry, until `stop`."""
        next_expiry_ms = self._now() + self.config.offsets_retention_check_interval_ms
        while not stop.is_set():
            now_ms = self._now()
            if now_ms >= next_expiry_ms:
                next_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
                self.offsets.maybe_expire(now_ms, self._has_members)
                self._forget_empty_groups()
            self._sync_leadership()
            self._deliver(self.membership.tick(now_ms))
            deadline = self.membership.next_deadline_ms()
            delay_ms = SYNC_INTERVAL_MS if deadline is None else max(0, min(SYNC_INTERVAL_MS, deadline - now_ms))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)

    def _forget_empty_groups(self) -> None:
        """Kafka's cleanupGroupMetadata: an Empty group left with no offsets goes, and its record's tombstone is
        written (one pass at a time)."""
        count = self.offsets_partitions()
        if count is None or (self._forgetting is not None and not self._forgetting.done()):
            return
        empty = [group_id for group_id, _, state in self.membership.list_groups()
                 if state == "Empty" and partition_for(group_id, count) in self.offsets.loaded
                 and not self.offsets.cache.offsets(group_id) and not self.offsets.unstable(group_id)]
        if empty:
            self._deliver(self.membership.remove_groups(empty))
            self._forgetting = asyncio.get_running_loop().create_task(self._write_tombstones(empty, count))

    async def _write_tombstones(self, group_ids: list[str], count: int) -> None:
        for group_id in group_ids:  # bounded by the groups this broker coordinates
            error = await self._write_group(partition_for(group_id, count), group_id, None, self._now())
            log.info("Removed the empty group %s: %s", group_id, error.name)

    def _has_members(self, group_id: str) -> bool:
        described = self.membership.describe(group_id)
        return described is not None and bool(described.members)

    def close(self) -> None:
        self.offsets.close()
        for task in (self._creating, self._forgetting):
            if task is not None:
                task.cancel()

    # The APIs -------------------------------------------------------------------------------------------------

    def find_coordinator(self, request: DecodedRequest, image: MetadataImage) -> Any:
        """FindCoordinator, with the coordinators' addresses from `image` (the client's listener's)."""
        key_type, keys = api.find_coordinator_keys(request)
        if key_type != api.GROUP_KEY_TYPE:
            message = f"key type {key_type} is not served: insync has group and transaction coordinators only"
            return api.encode_find_coordinator(request, [api.CoordinatorAnswer(k, E["INVALID_REQUEST"], message=message)
                                                         for k in keys])
        return api.encode_find_coordinator(request, [self._coordinator(k, image) for k in keys])

    def _coordinator(self, group_id: str, image: MetadataImage) -> api.CoordinatorAnswer:
        count = self.offsets_partitions()
        if count is None:
            self.create_offsets_topic()
            return api.CoordinatorAnswer(group_id, E["COORDINATOR_NOT_AVAILABLE"])
        topic = image.topic(OFFSETS_TOPIC)
        assert topic is not None
        registration = topic.partitions[partition_for(group_id, count)]
        broker = image.brokers.get(registration.leader)
        if registration.leader < 0 or broker is None:
            return api.CoordinatorAnswer(group_id, E["COORDINATOR_NOT_AVAILABLE"])
        return api.CoordinatorAnswer(group_id, errors.NONE, broker.broker_id, broker.host, broker.port)

    def create_offsets_topic(self) -> None:
        """Have the controller create `__consumer_offsets` (once at a time; FindCoordinator, auto-creation)."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())

    async def _create(self) -> None:
        # Kafka's GroupMetadataManager.offsetsTopicConfigs
        configs = (("cleanup.policy", "compact"), ("compression.type", "producer"),
                   ("segment.bytes", str(self.config.offsets_topic_segment_bytes)))
        body = topics.create_topics_request((NewTopic(
            OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, self.config.offsets_topic_replication_factor,
            configs),), int(CREATE_TIMEOUT_S * 1000))
        try:
            response = await self.controller.request(body, CREATE_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.warning("Could not create %s: %s", OFFSETS_TOPIC, exc)
            return
        for result in response.topics:
            if int(result.error_code) not in (0, E["TOPIC_ALREADY_EXISTS"].code):
                log.warning("Could not create %s: %s %s (consumer groups wait for it; with fewer brokers than "
                            "offsets.topic.replication.factor=%d, lower that setting)", OFFSETS_TOPIC,
                            errors.by_code(int(result.error_code)).name, result.error_message or "",
                            self.config.offsets_topic_replication_factor)

    async def join(self, request: DecodedRequest, client_host: str) -> Any:
        join = api.decode_join(request, client_host)
        failed = JoinResult(errors.NONE, -1, None, None, "", join.member_id, ())
        error = self._member_status(join.group_id)
        if error is not errors.NONE:
            return api.encode_join(request, dataclasses.replace(failed, error=error))
        wait_s = join.rebalance_timeout_ms / 1000 + self.config.initial_rebalance_delay_ms / 1000
        result = await self._hold(lambda token: self.membership.join(self._now(), token, join),
                                  wait_s + JOIN_WAIT_MARGIN_S, dataclasses.replace(failed, error=E["REBALANCE_IN_PROGRESS"]))
        assert isinstance(result, JoinResult)
        return api.encode_join(request, result)

    async def sync(self, request: DecodedRequest) -> Any:
        sync = api.decode_sync(request)
        failed = SyncResult(errors.NONE, None, None, b"")
        # Kafka's KafkaApis checks a v5+ request names its protocol before the coordinator sees it.
        error = E["INCONSISTENT_GROUP_PROTOCOL"] if api.sync_lacks_protocol(request) else \
            self._member_status(sync.group_id)
        if error is not errors.NONE:
            return api.encode_sync(request, dataclasses.replace(failed, error=error))
        wait_s = self.config.max_session_timeout_ms / 1000
        result = await self._hold(lambda token: self.membership.sync(self._now(), token, sync), wait_s,
                                  dataclasses.replace(failed, error=E["REBALANCE_IN_PROGRESS"]))
        assert isinstance(result, SyncResult)
        if result.error is errors.NONE:
            stored = await self._stored(sync.group_id, sync.generation_id)
            if stored is not errors.NONE:  # Kafka answers every member the write's error; they rejoin
                result = dataclasses.replace(failed, error=stored)
        return api.encode_sync(request, result)

    def heartbeat(self, request: DecodedRequest) -> Any:
        heartbeat = api.decode_heartbeat(request)
        error = self._member_status(heartbeat.group_id)
        if error is errors.NONE:
            error = self.membership.heartbeat(self._now(), heartbeat)
            self._wake.set()
        return api.encode_heartbeat(request, error)

    def leave(self, request: DecodedRequest) -> Any:
        leave = api.decode_leave(request)
        error = self._member_status(leave.group_id)
        if error is not errors.NONE:
            return api.encode_leave(request, LeaveResult(error, ()))
        result, completions = self.membership.leave(self._now(), leave)
        self._deliver(completions)
        return api.encode_leave(request, result)

    async def offset_commit(self, request: DecodedRequest) -> Any:
        commit = api.decode_offset_commit(request)
        error, partition = self._status(commit.group_id)
        if error is errors.NONE:
            error = self.membership.validate_commit(commit.group_id, commit.generation_id, commit.member_id,
                                                    commit.group_instance_id, now_ms=self._now())
        if error is not errors.NONE:
            return api.encode_offset_commit(request, [(tp, error) for tp, _ in commit.offsets])
        results: dict[TopicPartition, KafkaError] = {}
        now_ms = self._now()
        valid: list[tuple[OffsetKey, CommittedOffset]] = []
        metadata_max = self.config.offset_metadata_max_bytes
        for tp, offset in commit.offsets:
            if len(offset.metadata.encode()) > metadata_max:
                results[tp] = E["OFFSET_METADATA_TOO_LARGE"]
            elif not self._partition_exists(tp):
                results[tp] = E["UNKNOWN_TOPIC_OR_PARTITION"]
            else:
                valid.append((OffsetKey(commit.group_id, tp),
                              dataclasses.replace(offset, commit_timestamp_ms=now_ms)))
        if valid:
            outcome = await self.offsets.write(partition, valid, now_ms)
            results.update((key.topic_partition, outcome) for key, _ in valid)
        return api.encode_offset_commit(request, [(tp, results[tp]) for tp, _ in commit.offsets])

    async def txn_offset_commit(self, request: DecodedRequest, check: OffsetsPartitionCheck) -> Any:
        """TxnOffsetCommit: the group's offsets partition checked to be in the producer's transaction (added to it
        from v5, transactions v2) by `check`, validated against the group's generation when the producer names one
        (KIP-447), appended in the producer's transaction, applied when its COMMIT marker is written."""
        commit = txn_api.decode_txn_offset_commit(request)
        error, partition = self._status(commit.group_id)
        if error is errors.NONE:
            error = await check(commit.transactional_id, commit.producer_id, commit.producer_epoch,
                                TopicPartition(OFFSETS_TOPIC, partition), request.api_version)
        if error is errors.NONE and (commit.generation_id >= 0 or commit.member_id):
            error = self.membership.validate_commit(commit.group_id, commit.generation_id, commit.member_id,
                                                    commit.group_instance_id, now_ms=self._now())
        if error is errors.NONE and not all(self._partition_exists(tp) for tp, *_ in commit.offsets):
            error = E["UNKNOWN_TOPIC_OR_PARTITION"]
        if error is not errors.NONE or not commit.offsets:
            return txn_api.encode_txn_offset_commit(request, [(tp, error) for tp, *_ in commit.offsets])
        now_ms = self._now()
        held = [(OffsetKey(commit.group_id, tp), CommittedOffset(offset, epoch, metadata, now_ms))
                for tp, offset, epoch, metadata in commit.offsets]
        error = await self.offsets.write_in_transaction(partition, commit.producer_id, commit.producer_epoch, held,
                                                        now_ms)
        return txn_api.encode_txn_offset_commit(request, [(tp, error) for tp, *_ in commit.offsets])

    def _partition_exists(self, tp: TopicPartition) -> bool:
        topic = self.core.metadata.image.topic(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    def offset_fetch(self, request: DecodedRequest) -> Any:
        answers = []
        for asked in api.decode_offset_fetch(request):
            error, _ = self._status(asked.group_id)
            if error is not errors.NONE:
                answers.append(api.FetchedOffsets(asked.group_id, error, self._asked(asked, {})))
                continue
            unstable = self.offsets.unstable(asked.group_id) if asked.require_stable else frozenset()
            answers.append(api.FetchedOffsets(asked.group_id, errors.NONE,
                                              self._asked(asked, self.offsets.cache.offsets(asked.group_id)), unstable))
        return api.encode_offset_fetch(request, answers)

    @staticmethod
    def _asked(asked: api.OffsetFetchGroup, known: dict[TopicPartition, CommittedOffset]
               ) -> tuple[tuple[TopicPartition, CommittedOffset | None], ...]:
        if asked.topics is None:
            return tuple(sorted(known.items()))
        return tuple((tp, known.get(tp)) for tp in (TopicPartition(t, p) for t, ps in asked.topics for p in ps))

    def list_groups(self, request: DecodedRequest) -> Any:
        states, types = api.list_groups_filter(request)
        listed = {g: (g, t, s) for g, t, s in self.membership.list_groups()}
        for group_id in self.offsets.cache.group_ids():  # groups with offsets and no members: Empty, as Kafka lists them
            listed.setdefault(group_id, (group_id, "consumer", "Empty"))
        chosen = [row for row in listed.values()
                  if (not states or row[2].lower() in states) and (not types or "classic" in types)]
        return api.encode_list_groups(request, errors.NONE, sorted(chosen))

    def describe_groups(self, request: DecodedRequest) -> Any:
        described: list[tuple[str, KafkaError, GroupDescription | None]] = []
        for group_id in api.describe_groups_ids(request):
            error, _ = self._status(group_id)
            description = self.membership.describe(group_id) if error is errors.NONE else None
            if description is None and error is errors.NONE and self.offsets.cache.offsets(group_id):
                # Offsets and no members: Empty, as Kafka describes it.
                described.append((group_id, error, GroupDescription(group_id, "Empty", "consumer", "", ())))
                continue
            described.append((group_id, error, description))
        return api.encode_describe_groups(request, described)

    async def delete_groups(self, request: DecodedRequest) -> Any:
        """DeleteGroups: each Empty group goes with its offsets (tombstones); see `groups.deletion`."""
        results = [(group_id, await self._delete_group(group_id)) for group_id in api.decode_delete_groups(request)]
        return api.encode_delete_groups(request, results)

    def _deletion_status(self, group_id: str) -> tuple[KafkaError, int]:
        """`_status`, after Kafka's check that the group id is not empty."""
        error = deletion.group_id_error(group_id)
        return (error, -1) if error is not errors.NONE else self._status(group_id)

    async def _delete_group(self, group_id: str) -> KafkaError:
        error, partition = self._deletion_status(group_id)
        offsets = self.offsets.cache.offsets(group_id)
        if error is errors.NONE:
            error = deletion.delete_group_error(self.membership.view(group_id), bool(offsets))
        if error is not errors.NONE:
            return error
        # Forgotten before the tombstones are written, as Kafka marks the group Dead first: a member joining
        # meanwhile starts a new group.
        had_record = self.membership.view(group_id) is not None
        self._deliver(self.membership.remove_groups([group_id]))
        if offsets:
            error = await self.offsets.write(partition, [(OffsetKey(group_id, tp), None) for tp in sorted(offsets)],
                                             self._now())
        if error is errors.NONE and had_record:
            error = await self._write_group(partition, group_id, None, self._now())
        return error

    async def offset_delete(self, request: DecodedRequest) -> Any:
        group_id, asked = api.decode_offset_delete(request)
        error, partition = self._deletion_status(group_id)
        if error is not errors.NONE:
            return api.encode_offset_delete(request, deletion.OffsetDeletion(error, (), ()))
        plan = deletion.plan_offset_delete(self.membership.view(group_id), frozenset(self.offsets.cache.offsets(group_id)),
                                           asked, self._partition_exists)
        if plan.tombstones:
            written = await self.offsets.write(partition, [(OffsetKey(group_id, tp), None) for tp in plan.tombstones],
                                        self._now())
            if written is not errors.NONE:
                plan = deletion.OffsetDeletion(written, (), ())
        return api.encode_offset_delete(request, plan)
