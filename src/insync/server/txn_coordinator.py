"""The broker's transaction coordinator on the asyncio loop, around the sans-IO `TransactionCoordinatorCore`.

A transactional id's coordinator is the leader of its `__transaction_state` partition (the group hash), as in Kafka;
the first FindCoordinator for one creates the topic through the controller. A partition this broker comes to lead is
replayed before its ids are served (COORDINATOR_LOAD_IN_PROGRESS meanwhile; NOT_COORDINATOR where it does not lead),
and its transactions left in PrepareCommit/PrepareAbort by the previous coordinator are completed. After a
PrepareCommit/PrepareAbort, `_complete` sends WriteTxnMarkers to each partition's leader (over the inter-broker
listener, this broker included), retrying what failed while this broker still coordinates, then writes
CompleteCommit/CompleteAbort (again after an append that found too few replicas). The timer aborts transactions open
longer than their timeout. ListTransactions and DescribeTransactions (`kafka-transactions`) are answered from the
loaded state. The partition-leader side of WriteTxnMarkers is `write_markers`: one coordinator append (acks=all) per
marker; a committed marker on a `__consumer_offsets` partition also makes the group coordinator apply the
transaction's offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from insync import errors
from insync.broker.coordinator_partitions import coordinator_status, partition_count
from insync.broker.core import BrokerCore
from insync.broker.messages import (
    InitProducerIdRequest,
    PartitionProduceResult,
    ProduceRequest,
    ProduceResponse,
)
from insync.config import TransactionCoordinatorConfig
from insync.errors import KafkaError, KafkaException
from insync.groups.offsets import partition_for
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.control_records import marker_batch
from insync.protocol.records import InvalidRecordError, parse_header
from insync.server.client import FailoverConnection, KafkaConnection
from insync.server.group_coordinator import GroupCoordinator
from insync.storage.log_manager import LogManager
from insync.transactions import driving
from insync.transactions.coordinator import TV2, Decision, TransactionCoordinatorCore
from insync.transactions.log_records import TxnMetadata, TxnState
from insync.types import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Offset, TopicPartition
from insync.wire import groups as group_api
from insync.wire import topics
from insync.wire import transaction_views as views
from insync.wire import transactions as api
from insync.wire.internal import NewTopic

log = logging.getLogger("insync.transactions")

CREATE_TIMEOUT_S = 30.0
E = errors.BY_NAME
_BY_KAFKA_NAME = {state.kafka_name: state for state in TxnState}
# Produce v12 is the first of transactions v2, whose batches add their partition; v11 the first that knows
# TRANSACTION_ABORTABLE (Kafka's produceRequestVersionToTransactionSupportedOperation).
PRODUCE_ADDS_FROM = 12
PRODUCE_ABORTABLE_FROM = 11
TXN_OFFSET_COMMIT_ADDS_FROM = 5
TXN_OFFSET_COMMIT_ABORTABLE_FROM = 4
END_TXN_V2_FROM = 5
# A leader adding partitions retries the coordinator's CONCURRENT_TRANSACTIONS (the previous transaction still
# writing its markers) as Kafka's ReplicaManager does: every 20 ms for add.partitions.to.txn.retry.backoff.max.ms.
ADD_RETRY_BACKOFF_MS = 20
ADD_RETRIES_MAX = 100 // ADD_RETRY_BACKOFF_MS
# Coordinator trouble reads NOT_ENOUGH_REPLICAS to the producer, which retries it without a metadata refresh.
# ... and to a TxnOffsetCommit, as Kafka's AddPartitionsToTxnManager and group coordinator translate them.
_OFFSETS_ANSWERS = {"PRODUCER_FENCED": E["INVALID_PRODUCER_EPOCH"], "NETWORK_EXCEPTION": E["COORDINATOR_LOAD_IN_PROGRESS"]}
_UNVERIFIED = frozenset(("NETWORK_EXCEPTION", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                         "NOT_COORDINATOR"))


class TransactionCoordinator:
    def __init__(self, config: TransactionCoordinatorConfig, core: BrokerCore, log_manager: LogManager,
                 controller: FailoverConnection, append: Callable[[ProduceRequest], Awaitable[ProduceResponse]],
                 now: Callable[[], int], connect: Callable[[int], KafkaConnection], groups: GroupCoordinator) -> None:
        self.config, self.core, self.log_manager, self.controller = config, core, log_manager, controller
        self._append, self._now, self._connect, self.groups = append, now, connect, groups
        self.state = TransactionCoordinatorCore(config.max_timeout_ms)
        self._loaded: dict[int, int] = {}  # partition -> the leader epoch it was replayed at
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._completing: dict[str, tuple[asyncio.Task[None], int]] = {}  # id -> its task, its coordinator epoch
        self._creating: asyncio.Task[None] | None = None

    # Which ids this broker coordinates ------------------------------------------------------------------------

    def _count(self) -> int | None:
        return partition_count(self.core, TRANSACTION_STATE_TOPIC)

    def _status(self, transactional_id: str) -> tuple[KafkaError, int]:
        return coordinator_status(self.core, TRANSACTION_STATE_TOPIC, transactional_id, self._loaded, self._start_load)

    def _start_load(self, partition: int, epoch: int) -> None:
        if partition in self._loading:
            return
        self._loaded.pop(partition, None)
        self.state.unload(partition)
        task = asyncio.get_running_loop().create_task(self._load(partition, epoch))
        self._loading[partition] = task
        task.add_done_callback(lambda _: self._loading.pop(partition, None))

    async def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition to the end it had when the load began, then complete what was prepared."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        partition_log = self.log_manager.get(tp)
        if partition_log is None:
            return
        offset = partition_log.log_start_offset
        try:
            for reached, warnings in driving.replay_chunks(self.state, partition, partition_log):
                offset = reached  # where a failed read stopped, for the warning
                for warning in warnings:
                    log.warning("%s", warning)
                await asyncio.sleep(0)
        except KafkaException as exc:
            log.warning("Loading %s stopped at offset %d: %s", tp, offset, exc)
            self.state.unload(partition)
            return
        if self.core.leader_epoch(tp) != epoch:
            return
        self._loaded[partition] = epoch
        prepared = self.state.in_state(driving.PREPARED, partition)
        log.info("Loaded the transactions of %s (leader epoch %d), completing %d prepared", tp, epoch, len(prepared))
        for txn in prepared:
            self._start_completing(txn)

    def _sync_leadership(self) -> None:
        lost, to_load = driving.leadership_changes(self._loaded,
                                                   driving.led_state_partitions(self.core.leader_states(TRANSACTION_STATE_TOPIC)))
        for partition in lost:
            log.info("No longer coordinating the transactions of %s-%d", TRANSACTION_STATE_TOPIC, partition)
            del self._loaded[partition]
            self.state.unload(partition)
        for partition, epoch in to_load:
            self._start_load(partition, epoch)

    # The timer ------------------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Leadership changes, and the abort of timed-out transactions, until `stop`."""
        next_abort_ms = self._now() + self.config.abort_interval_ms
        while not stop.is_set():
            self._sync_leadership()
            now_ms = self._now()
            if now_ms >= next_abort_ms:
                next_abort_ms = now_ms + self.config.abort_interval_ms
                for txn in self.state.expired(now_ms):
                    log.info("Aborting the transaction of %s: open longer than its timeout of %d ms",
                             txn.transactional_id, txn.timeout_ms)
                    await self._apply(self.state.abort_expired(txn, now_ms))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), driving.SYNC_INTERVAL_MS / 1000)

    def close(self) -> None:
        for task in [*self._loading.values(), *(task for task, _ in self._completing.values())]:
            task.cancel()
        if self._creating is not None:
            self._creating.cancel()

    # FindCoordinator --------------------------------------------------------------------------------------------

    def find_coordinator(self, request: DecodedRequest, image: MetadataImage, keys: list[str]) -> Any:
        return group_api.encode_find_coordinator(request, [self._coordinator(k, image) for k in keys])

    def _coordinator(self, transactional_id: str, image: MetadataImage) -> group_api.CoordinatorAnswer:
        count = self._count()
        if count is None:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.get_running_loop().create_task(self._create())
            return group_api.CoordinatorAnswer(transactional_id, E["COORDINATOR_NOT_AVAILABLE"])
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        assert topic is not None
        registration = topic.partitions[partition_for(transactional_id, count)]
        broker = image.brokers.get(registration.leader)
        if registration.leader < 0 or broker is None:
            return group_api.CoordinatorAnswer(transactional_id, E["COORDINATOR_NOT_AVAILABLE"])
        return group_api.CoordinatorAnswer(transactional_id, errors.NONE, broker.broker_id, broker.host, broker.port)

    async def _create(self) -> None:
        # Kafka's TransactionLog topic configs
        configs = (("cleanup.policy", "compact"), ("compression.type", "uncompressed"),
                   ("min.insync.replicas", str(self.config.log_min_isr)),
                   ("segment.bytes", str(self.config.log_segment_bytes)),
                   ("unclean.leader.election.enable", "false"))
        body = topics.create_topics_request((NewTopic(
            TRANSACTION_STATE_TOPIC, self.config.log_num_partitions, self.config.log_replication_factor, configs),),
            int(CREATE_TIMEOUT_S * 1000))
        try:
            response = await self.controller.request(body, CREATE_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.warning("Could not create %s: %s", TRANSACTION_STATE_TOPIC, exc)
            return
        for result in response.topics:
            if int(result.error_code) not in (0, E["TOPIC_ALREADY_EXISTS"].code):
                log.warning("Could not create %s: %s %s", TRANSACTION_STATE_TOPIC,
                            errors.by_code(int(result.error_code)).name, result.error_message or "")

    # The coordinator's APIs -------------------------------------------------------------------------------------

    async def handle(self, request: DecodedRequest) -> Any:
        """InitProducerId (with a transactional id), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn."""
        asked = api.decode(request)
        error, _ = self._status(asked.transactional_id) if asked.transactional_id else (errors.INVALID_REQUEST, -1)
        if error is not errors.NONE:
            return api.encode(request, error)
        now_ms = self._now()
        key = request.api_key
        if key == api.INIT_PRODUCER_ID:
            decision = self.state.init_producer_id(asked.transactional_id, asked.timeout_ms, asked.producer_id,
                                                   asked.producer_epoch, now_ms, self._new_producer_id)
            error = await self._apply(decision)
            txn = self.state.get(asked.transactional_id)
            if error is not errors.NONE or txn is None:
                return api.encode(request, error)
            return api.encode(request, error, txn.producer_id, txn.producer_epoch)
        if key == api.ADD_PARTITIONS_TO_TXN:
            unknown = {tp: E["UNKNOWN_TOPIC_OR_PARTITION"] for tp in asked.partitions if not self._exists(tp)}
            if unknown:  # Kafka refuses the whole request, the others OPERATION_NOT_ATTEMPTED
                return api.encode(request, E["OPERATION_NOT_ATTEMPTED"], partition_errors=unknown)
            partitions = asked.partitions
        elif key == api.ADD_OFFSETS_TO_TXN:
            count = self.groups.offsets_partitions()
            if count is None:
                return api.encode(request, E["COORDINATOR_NOT_AVAILABLE"])
            partitions = (TopicPartition(OFFSETS_TOPIC, partition_for(asked.group_id, count)),)
        else:
            assert key == api.END_TXN, key
            client_version = TV2 if request.api_version >= END_TXN_V2_FROM else 0
            decision = self.state.end_txn(asked.transactional_id, asked.producer_id, asked.producer_epoch,
                                          asked.commit, now_ms, client_version, self._new_producer_id)
            error = await self._apply(decision)
            if error is not errors.NONE or client_version < TV2:
                return api.encode(request, error)
            return api.encode(request, error, *self.state.end_txn_ids(asked.transactional_id))
        decision = self.state.add_partitions(asked.transactional_id, asked.producer_id, asked.producer_epoch,
                                             partitions, now_ms)
        return api.encode(request, await self._apply(decision))

    def _exists(self, tp: TopicPartition) -> bool:
        topic = self.core.metadata.image.topic(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    def _new_producer_id(self) -> int:
        allocated = self.core.producer_ids.allocate(InitProducerIdRequest(0, 0, -1, -1), self._now())
        assert allocated.producer_id >= 0, allocated
        return allocated.producer_id

    async def _apply(self, decision: Decision) -> KafkaError:
        """Write the decision's state (acks=all) and replay it; a prepared transaction then gets its markers."""
        txn = decision.write
        if txn is None:
            return decision.error
        error = await self._write(txn)
        if error is not errors.NONE:
            self.state.abandon(txn.transactional_id)
            return error
        if txn.state in driving.PREPARED:
            self._start_completing(txn)
        return decision.error

    async def _write(self, txn: TxnMetadata) -> KafkaError:
        count = self._count()
        if count is None:
            return E["COORDINATOR_NOT_AVAILABLE"]
        partition = partition_for(txn.transactional_id, count)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        epoch = self._loaded.get(partition)
        if epoch is None or self.core.leader_epoch(tp) != epoch:
            return E["NOT_COORDINATOR"]
        batch = driving.state_record(txn, self._now())
        response = await self._append(ProduceRequest(0, -1, self.config.write_timeout_ms, ((tp, batch),)))
        (result,) = response.results
        if result.error is not errors.NONE:
            return driving.append_error(result.error)
        if self._loaded.get(partition) != epoch:
            return E["NOT_COORDINATOR"]
        self.state.replay(partition, txn, txn.transactional_id)
        return errors.NONE

    # KIP-890's verification: a partition leader asks before a transactional batch opens a transaction ----------

    async def batched(self, request: DecodedRequest) -> Any:
        """AddPartitionsToTxn v4+ from a partition leader: each transaction's partitions verified, or added (as
        transactions v2, Kafka's `transactionVersionForAddPartitionsToTxn`); one of a deleted topic refuses its
        transaction, the others OPERATION_NOT_ATTEMPTED."""
        results: list[tuple[str, dict[TopicPartition, KafkaError]]] = []
        for txn in api.decode_batched(request):
            error, _ = self._status(txn.transactional_id)
            unknown = {tp for tp in txn.partitions if not self._exists(tp)}
            if error is not errors.NONE:
                results.append((txn.transactional_id, dict.fromkeys(txn.partitions, error)))
            elif unknown:
                results.append((txn.transactional_id, {tp: E["UNKNOWN_TOPIC_OR_PARTITION"] if tp in unknown
                                                       else E["OPERATION_NOT_ATTEMPTED"] for tp in txn.partitions}))
            elif txn.verify_only:
                results.append((txn.transactional_id, self.state.verify(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.partitions)))
            else:
                decision = self.state.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                     txn.partitions, self._now(), TV2)
                results.append((txn.transactional_id, dict.fromkeys(txn.partitions, await self._apply(decision))))
        return api.encode_batched(request, results)

    async def unverified(self, transactional_id: str | None, partitions: tuple[tuple[TopicPartition, bytes], ...],
                         version: int, in_turn: Callable[[], Awaitable[None]]) -> tuple[PartitionProduceResult, ...]:
        """The partitions of a produce request of `version` to refuse, and why: a transactional batch that would
        open its producer's transaction on a partition this broker leads is first checked with the coordinator (over
        the inter-broker listener, this broker included), and refused unless the partition is in that transaction,
        so a late or stray batch cannot leave a transaction hanging; from Produce v12 (transactions v2) the
        coordinator adds the partition instead. A verification guard (`replication.verification_guards`) refuses
        the batch if the producer's transaction ended on the partition while the coordinator was asked. `in_turn`
        is awaited last: the connection's earlier produce requests have appended. The caller must append what is
        not refused without awaiting anything first."""
        adds, abortable = version >= PRODUCE_ADDS_FROM, version >= PRODUCE_ABORTABLE_FROM
        asked: dict[tuple[int, int], list[TopicPartition]] = {}
        guards: dict[TopicPartition, tuple[int, int]] = {}  # partition -> (producer id, its guard's token)
        epochs: dict[TopicPartition, int] = {}
        for tp, records in partitions:
            try:
                header = parse_header(records, 0)
            except InvalidRecordError:  # the core's validation refuses it (CORRUPT_MESSAGE), with the others
                continue
            pid, epoch = header.producer_id, header.producer_epoch
            if not header.is_transactional or pid < 0 or not transactional_id \
                    or self.core.partitions.in_transaction(tp, pid, epoch):
                continue
            token = self.core.partitions.start_verification(tp, pid, epoch, adds, header.base_sequence)
            if token is not None:
                asked.setdefault((pid, epoch), []).append(tp)
                guards[tp], epochs[tp] = (pid, token), epoch
        refused: dict[TopicPartition, PartitionProduceResult] = {}
        for (producer_id, producer_epoch), tps in asked.items():  # one producer per request, in practice
            assert transactional_id
            txn = api.TxnPartitions(transactional_id, producer_id, producer_epoch, not adds, tuple(tps))
            for tp, error in (await self.add_or_verify(txn)).items():
                if error is not errors.NONE:
                    error, message = leader_answer(error, adds, abortable)
                    refused[tp] = PartitionProduceResult(tp, error, Offset(-1), error_message=message)
        await in_turn()
        # No await from here to the append: a guard that holds now still holds when the batch is appended.
        for tp, (producer_id, token) in guards.items():
            if tp not in refused and not self.core.partitions.verification_holds(tp, producer_id, token) \
                    and not self.core.partitions.in_transaction(tp, producer_id, epochs[tp]):
                refused[tp] = PartitionProduceResult(tp, E["INVALID_TXN_STATE"], Offset(-1),
                                                     error_message="Record was not part of an ongoing transaction")
        return tuple(refused.values())

    async def add_or_verify(self, txn: api.TxnPartitions) -> dict[TopicPartition, KafkaError]:
        """Each partition's answer from the transaction's coordinator; an add is retried while the coordinator
        says CONCURRENT_TRANSACTIONS, for a bounded time."""
        answers = await self._ask_coordinator(txn)
        for _ in range(0 if txn.verify_only else ADD_RETRIES_MAX):
            if all(error.name != "CONCURRENT_TRANSACTIONS" for error in answers.values()):
                break
            await asyncio.sleep(ADD_RETRY_BACKOFF_MS / 1000)
            answers = await self._ask_coordinator(txn)
        return answers

    async def check_offsets_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      tp: TopicPartition, version: int) -> KafkaError:
        """TxnOffsetCommit's check, Kafka's CoordinatorPartitionWriter: unless the producer's transaction is open
        on the group's offsets partition already, the coordinator verifies it is in the transaction (adds it, from
        v5), asked once; a network failure reads COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
        if self.core.partitions.in_transaction(tp, producer_id, producer_epoch):
            return errors.NONE
        adds = version >= TXN_OFFSET_COMMIT_ADDS_FROM
        txn = api.TxnPartitions(transactional_id, producer_id, producer_epoch, not adds, (tp,))
        error = (await self._ask_coordinator(txn))[tp]
        if error is errors.NONE:
            return error
        if error.name == "TRANSACTION_ABORTABLE" and version < TXN_OFFSET_COMMIT_ABORTABLE_FROM:
            return E["INVALID_TXN_STATE"]
        return _OFFSETS_ANSWERS.get(error.name, error)

    async def _ask_coordinator(self, txn: api.TxnPartitions) -> dict[TopicPartition, KafkaError]:
        count = self._count()
        topic = self.core.metadata.image.topic(TRANSACTION_STATE_TOPIC)
        leader = -1 if count is None or topic is None else \
            topic.partitions[partition_for(txn.transactional_id, count)].leader
        if leader < 0:
            return dict.fromkeys(txn.partitions, E["COORDINATOR_NOT_AVAILABLE"])
        try:
            body = await self._connect(leader).request(api.verify_request(txn), self.config.write_timeout_ms / 1000)
        except (ConnectionError, OSError, TimeoutError, KafkaException) as exc:
            log.debug("Verifying %s with broker %d failed: %s", txn.transactional_id, leader, exc)
            return dict.fromkeys(txn.partitions, E["NETWORK_EXCEPTION"])
        answered = api.verify_response_errors(body)
        return {tp: answered.get(tp, E["UNKNOWN_SERVER_ERROR"]) for tp in txn.partitions}

    # kafka-transactions' questions --------------------------------------------------------------------------------

    def list_transactions(self, request: DecodedRequest) -> Any:
        """ListTransactions: the ids this broker coordinates; COORDINATOR_LOAD_IN_PROGRESS while a partition of
        them is loading, and unknown state names echoed back, as Kafka answers."""
        asked = views.decode_list(request)
        unknown = [name for name in asked.states if name not in _BY_KAFKA_NAME]
        if self._loading:
            return views.encode_list(request, E["COORDINATOR_LOAD_IN_PROGRESS"], unknown, [])
        try:
            pattern = re.compile(asked.pattern) if asked.pattern else None
        except re.error:
            return views.encode_list(request, E["INVALID_REGULAR_EXPRESSION"], unknown, [])
        states = frozenset(_BY_KAFKA_NAME[name] for name in asked.states if name in _BY_KAFKA_NAME)
        found = self.state.listing(states, asked.producer_ids, asked.duration_ms, pattern, self._now())
        return views.encode_list(request, errors.NONE, unknown, found)

    def describe_transactions(self, request: DecodedRequest) -> Any:
        """DescribeTransactions: each id's state where this broker coordinates it, else why not."""
        answers: list[tuple[str, KafkaError, TxnMetadata | None]] = []
        for transactional_id in views.decode_describe(request):
            error, _ = self._status(transactional_id)
            txn = self.state.get(transactional_id) if error is errors.NONE else None
            if error is errors.NONE and (txn is None or txn.state is TxnState.DEAD):
                error, txn = E["TRANSACTIONAL_ID_NOT_FOUND"], None
            answers.append((transactional_id, error, txn))
        return views.encode_describe(request, answers)

    # Markers ----------------------------------------------------------------------------------------------------

    def _start_completing(self, txn: TxnMetadata) -> None:
        """Complete `txn` unless a task of this coordinator epoch already does. One left from before the partition
        was lost and loaded again would give up at its next step (its epoch is gone): it is replaced, not waited for."""
        epoch = self._loaded.get(partition_for(txn.transactional_id, self._count() or 1), -1)
        running = self._completing.get(txn.transactional_id)
        if running is not None and running[1] == epoch:
            return
        if running is not None:
            running[0].cancel()
        task = asyncio.get_running_loop().create_task(self._complete(txn))
        self._completing[txn.transactional_id] = (task, epoch)

        def forget(_: asyncio.Task[None]) -> None:
            if self._completing.get(txn.transactional_id, (None, 0))[0] is task:
                del self._completing[txn.transactional_id]
        task.add_done_callback(forget)

    async def _complete(self, txn: TxnMetadata) -> None:
        """Write the markers of a prepared transaction until every partition has one, then its Complete state."""
        count = self._count()
        assert count is not None
        partition = partition_for(txn.transactional_id, count)
        coordinator_epoch = self._loaded.get(partition, -1)
        commit = txn.state is TxnState.PREPARE_COMMIT
        pending = set(txn.partitions)
        for attempt in range(driving.MARKER_ATTEMPTS_MAX):
            if self._loaded.get(partition) != coordinator_epoch or self.state.get(txn.transactional_id) != txn:
                return  # no longer this broker's to complete (its new coordinator will)
            pending -= await self._send_markers(txn, commit, coordinator_epoch, pending)
            if not pending:
                break
            await asyncio.sleep(driving.marker_retry_ms(attempt) / 1000)
        else:
            log.error("Gave up writing the markers of %s to %s", txn.transactional_id, sorted(pending))
            return
        await self._write_complete(txn, partition, coordinator_epoch)

    async def _write_complete(self, txn: TxnMetadata, partition: int, coordinator_epoch: int) -> None:
        """Write CompleteCommit/CompleteAbort, again after a failure `driving.complete_retried` names."""
        error = errors.NONE
        for attempt in range(driving.MARKER_ATTEMPTS_MAX):
            if self._loaded.get(partition) != coordinator_epoch or self.state.get(txn.transactional_id) != txn:
                return  # no longer this broker's to complete (its new coordinator will)
            error = await self._apply(self.state.complete(txn.transactional_id, self._now()))
            if not driving.complete_retried(error):
                break
            await asyncio.sleep(driving.marker_retry_ms(attempt) / 1000)
        if error is not errors.NONE:
            log.warning("Could not complete the transaction of %s: %s", txn.transactional_id, error.name)

    async def _send_markers(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int,
                            partitions: set[TopicPartition]) -> set[TopicPartition]:
        """One WriteTxnMarkers per leader, at once; returns the partitions done."""
        done, by_leader = driving.markers_by_leader(self.core.metadata.image, partitions)  # deleted: no marker
        sends = [self._send(leader, api.Marker(txn.producer_id, txn.producer_epoch, commit, coordinator_epoch,
                                               tuple(tps))) for leader, tps in by_leader.items() if leader >= 0]
        for answered in await asyncio.gather(*sends):
            done |= {tp for tp, error in answered.items() if driving.marker_done(error)}
        return done

    async def _send(self, leader: int, marker: api.Marker) -> dict[TopicPartition, KafkaError]:
        try:
            body = await self._connect(leader).request(api.markers_request(marker), driving.MARKER_TIMEOUT_MS / 1000)
        except (ConnectionError, OSError, TimeoutError, KafkaException) as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return {}
        return api.markers_response_errors(body)

    async def write_markers(self, request: DecodedRequest) -> Any:
        """WriteTxnMarkers on a partition leader: each marker appended with acks=all where this broker leads. As
        in Kafka, the markers' appends wait for their replicas together, so the answer comes within one write
        timeout however many markers the request carries; they are appended in the request's order."""
        markers = api.decode_markers(request)
        planned: list[tuple[dict[TopicPartition, KafkaError], Awaitable[ProduceResponse] | None]] = []
        for marker in markers:
            # As Kafka: a partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION, not appended. A
            # producer's marker in a negative epoch is older than any it has: INVALID_PRODUCER_EPOCH. A negative
            # id is no producer's (Kafka's hasProducerId): appended, it ends no transaction.
            hosted = tuple(tp for tp in marker.partitions if self.core.partitions.get(tp) is not None)
            refused = marker.producer_id >= 0 and marker.producer_epoch < 0
            by_partition = dict.fromkeys(marker.partitions, errors.UNKNOWN_TOPIC_OR_PARTITION)
            by_partition.update(dict.fromkeys(hosted, E["INVALID_PRODUCER_EPOCH"]) if refused else {})
            write = None
            if hosted and not refused:
                batch = marker_batch(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                     marker.commit, self._now())
                write = self._append(ProduceRequest(0, -1, self.config.write_timeout_ms,
                                                    tuple((tp, batch) for tp in hosted), from_client=False))
            planned.append((by_partition, write))
        # `call` hands each request to the core before its first await, so gather's tasks append in this order.
        answers = iter(await asyncio.gather(*(write for _, write in planned if write is not None)))
        results = []
        for marker, (by_partition, write) in zip(markers, planned, strict=True):
            if write is not None:
                by_partition.update((r.topic_partition, r.error) for r in next(answers).results)
            for tp, error in by_partition.items():
                if tp.topic == OFFSETS_TOPIC and error is errors.NONE:
                    self.groups.offsets.complete_transaction(tp.partition, marker.producer_id, marker.commit)
            results.append((marker, by_partition))
        return api.encode_markers_response(request, results)



def leader_answer(error: KafkaError, adds: bool, abortable: bool) -> tuple[KafkaError, str | None]:
    """What a partition leader answers a producer whose batch the coordinator did not verify or add, and the
    message, as Kafka's AddPartitionsToTxnManager and ReplicaManager translate the coordinator's `error` for a
    request that `adds` (transactions v2) or knows TRANSACTION_ABORTABLE (`abortable`)."""
    assert error is not errors.NONE
    if error.name == "PRODUCER_FENCED":
        return E["INVALID_PRODUCER_EPOCH"], None
    if error.name == "TRANSACTION_ABORTABLE" and not abortable:
        error = E["INVALID_TXN_STATE"]
    if error.name == "INVALID_TXN_STATE":
        return error, "Partition was not added to the transaction"
    if error.name in _UNVERIFIED or (error.name == "CONCURRENT_TRANSACTIONS" and not adds):
        return E["NOT_ENOUGH_REPLICAS"], ("Unable to verify the partition has been added to the transaction. "
                                          f"Underlying error: {error.name}")
    return error, None
