"""A simulated broker's transaction coordinator: the production `TransactionCoordinatorCore` driven by the
simulator's callbacks instead of asyncio tasks, through the same steps as `server.txn_coordinator`
(`transactions.driving`).

It lives and dies with its broker (`sim.broker_node` builds one per incarnation and routes to it the coordinator
requests and every ProduceResponse the broker receives, which only the coordinator asks for). A request is judged
by the core; a decision is appended to this broker's own `__transaction_state` partition with acks=all, as an
in-process call to its `BrokerCore`, and replayed and answered once written. A prepared transaction gets its
markers: one ProduceRequest of control batches per partition leader (what WriteTxnMarkers appends there), each
round retried after a backoff for the partitions without a final answer, then CompleteCommit/CompleteAbort is
written (again after a failed append, as Kafka retries it). Every `SYNC_INTERVAL_MS` it loads the partitions it
came to lead (replaying their log, then completing what the previous coordinator left prepared) and drops those it
lost; every abort interval it aborts the transactions open past their timeout.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from insync import errors
from insync.broker.coordinator_partitions import coordinator_status, partition_count
from insync.broker.core import BrokerCore
from insync.broker.messages import InitProducerIdRequest, ProduceRequest, ProduceResponse
from insync.config import TransactionCoordinatorConfig
from insync.errors import KafkaError, KafkaException
from insync.groups.offsets import partition_for
from insync.protocol.control_records import marker_batch
from insync.sim.network import NodeId
from insync.sim.txn_messages import (
    AddTxnPartitions,
    EndTxn,
    FindTxnCoordinator,
    InitTxnProducer,
    TxnAnswer,
    TxnCoordinatorAnswer,
    TxnRequest,
)
from insync.transactions import driving
from insync.transactions.coordinator import Decision, TransactionCoordinatorCore
from insync.transactions.log_records import TxnMetadata, TxnState
from insync.types import TRANSACTION_STATE_TOPIC, TopicPartition

E = errors.BY_NAME
Done = Callable[[KafkaError], None]


@dataclass(slots=True)
class _Write:
    txn: TxnMetadata
    partition: int
    epoch: int
    answer: KafkaError  # the decision's answer once written
    then: Done


@dataclass(slots=True)
class _Completion:
    txn: TxnMetadata
    partition: int
    coordinator_epoch: int
    pending: set[TopicPartition]
    attempt: int = 0
    outstanding: set[int] = field(default_factory=set)  # correlation ids of this round's marker requests


class SimTxnCoordinator:
    def __init__(self, broker_id: int, config: TransactionCoordinatorConfig, core: BrokerCore,
                 now: Callable[[], int], after: Callable[[int, Callable[[], None]], None],
                 send: Callable[[NodeId, object], None], local: Callable[[object], None]) -> None:
        self.broker_id = broker_id
        self.config = config
        self.core = core
        self.state = TransactionCoordinatorCore(config.max_timeout_ms)
        self._now, self._after, self._send, self._local = now, after, send, local
        self._loaded: dict[int, int] = {}  # partition -> the leader epoch it was replayed at
        self._writes: dict[int, _Write] = {}
        self._completing: dict[str, _Completion] = {}
        self._marker_requests: dict[int, tuple[str, tuple[TopicPartition, ...], int]] = {}  # with the leader
        self._correlations = itertools.count(1)
        self._next_abort_ms = now() + config.abort_interval_ms
        after(driving.SYNC_INTERVAL_MS, self._tick)

    # Which ids this broker coordinates ------------------------------------------------------------------------

    def _tick(self) -> None:
        self._sync_leadership()
        now_ms = self._now()
        if now_ms >= self._next_abort_ms:
            self._next_abort_ms = now_ms + self.config.abort_interval_ms
            for txn in self.state.expired(now_ms):
                self._apply(self.state.abort_expired(txn, now_ms), lambda _: None)
        self._after(driving.SYNC_INTERVAL_MS, self._tick)

    def _sync_leadership(self) -> None:
        lost, to_load = driving.leadership_changes(self._loaded,
                                                   driving.led_state_partitions(self.core.leader_states(TRANSACTION_STATE_TOPIC)))
        for partition in lost:
            del self._loaded[partition]
            self.state.unload(partition)
        for partition, epoch in to_load:
            self._load(partition, epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        self._loaded.pop(partition, None)
        self.state.unload(partition)
        self._after(0, lambda: self._load(partition, epoch))

    def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition to its end, then complete what was prepared (a read is instant here)."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        partition_log = self.core.log_manager.get(tp)
        if partition_log is None or self.core.leader_epoch(tp) != epoch or self._loaded.get(partition) == epoch:
            return
        self.state.unload(partition)
        try:
            for _ in driving.replay_chunks(self.state, partition, partition_log):
                pass  # unreadable records are skipped, as the server does (it logs them)
        except KafkaException:
            self.state.unload(partition)
            return
        self._loaded[partition] = epoch
        for txn in self.state.in_state(driving.PREPARED, partition):
            self._start_completing(txn)

    # Requests -------------------------------------------------------------------------------------------------

    def on_request(self, source: NodeId, request: TxnRequest) -> None:
        if isinstance(request, FindTxnCoordinator):
            self._send(source, self._find(request))
            return
        error, _ = coordinator_status(self.core, TRANSACTION_STATE_TOPIC, request.transactional_id, self._loaded,
                                      self._start_load)
        if error is not errors.NONE:
            self._send(source, TxnAnswer(request.correlation_id, error))
            return
        now_ms = self._now()
        tid = request.transactional_id
        if isinstance(request, InitTxnProducer):
            decision = self.state.init_producer_id(tid, request.timeout_ms, request.producer_id,
                                                   request.producer_epoch, now_ms, self._new_producer_id)
            self._apply(decision, lambda error: self._answer_init(source, request, error))
            return
        if isinstance(request, AddTxnPartitions):
            decision = self.state.add_partitions(tid, request.producer_id, request.producer_epoch,
                                                 request.partitions, now_ms)
        else:
            assert isinstance(request, EndTxn), request
            decision = self.state.end_txn(tid, request.producer_id, request.producer_epoch, request.commit, now_ms)
        self._apply(decision, lambda error: self._send(source, TxnAnswer(request.correlation_id, error)))

    def _find(self, request: FindTxnCoordinator) -> TxnCoordinatorAnswer:
        count = partition_count(self.core, TRANSACTION_STATE_TOPIC)
        topic = self.core.metadata.image.topic(TRANSACTION_STATE_TOPIC)
        if count is None or topic is None:
            return TxnCoordinatorAnswer(request.correlation_id, E["COORDINATOR_NOT_AVAILABLE"])
        leader = topic.partitions[partition_for(request.transactional_id, count)].leader
        if leader < 0:
            return TxnCoordinatorAnswer(request.correlation_id, E["COORDINATOR_NOT_AVAILABLE"])
        return TxnCoordinatorAnswer(request.correlation_id, errors.NONE, int(leader))

    def _answer_init(self, source: NodeId, request: InitTxnProducer, error: KafkaError) -> None:
        txn = self.state.get(request.transactional_id)
        if error is not errors.NONE or txn is None:
            self._send(source, TxnAnswer(request.correlation_id, error))
        else:
            self._send(source, TxnAnswer(request.correlation_id, error, txn.producer_id, txn.producer_epoch))

    def _new_producer_id(self) -> int:
        allocated = self.core.producer_ids.allocate(InitProducerIdRequest(0, 0, -1, -1), self._now())
        assert allocated.producer_id >= 0, allocated
        return allocated.producer_id

    # Writing decisions ----------------------------------------------------------------------------------------

    def _apply(self, decision: Decision, then: Done) -> None:
        """Write the decision's state (acks=all), replay it, then answer; a prepared transaction gets markers."""
        txn = decision.write
        if txn is None:
            then(decision.error)
            return
        count = partition_count(self.core, TRANSACTION_STATE_TOPIC)
        partition = -1 if count is None else partition_for(txn.transactional_id, count)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        epoch = self._loaded.get(partition)
        if epoch is None or self.core.leader_epoch(tp) != epoch:
            self.state.abandon(txn.transactional_id)
            then(E["NOT_COORDINATOR"] if count is not None else E["COORDINATOR_NOT_AVAILABLE"])
            return
        correlation = next(self._correlations)
        self._writes[correlation] = _Write(txn, partition, epoch, decision.error, then)
        batch = driving.state_record(txn, self._now())
        self._local(ProduceRequest(correlation, -1, self.config.write_timeout_ms, ((tp, batch),)))

    def on_produce_response(self, response: ProduceResponse) -> None:
        write = self._writes.pop(response.correlation_id, None)
        if write is not None:
            self._written(write, response)
        elif response.correlation_id in self._marker_requests:
            self._markers_answered(response.correlation_id, {r.topic_partition: r.error for r in response.results})

    def _written(self, write: _Write, response: ProduceResponse) -> None:
        (result,) = response.results
        txn = write.txn
        if result.error is not errors.NONE or self._loaded.get(write.partition) != write.epoch:
            self.state.abandon(txn.transactional_id)
            write.then(E["NOT_COORDINATOR"] if result.error is errors.NONE else driving.append_error(result.error))
            return
        self.state.replay(write.partition, txn, txn.transactional_id)
        if txn.state in driving.PREPARED:
            self._start_completing(txn)
        write.then(write.answer)

    # Markers --------------------------------------------------------------------------------------------------

    def _start_completing(self, txn: TxnMetadata) -> None:
        if self._current(txn.transactional_id) is not None:
            return
        count = partition_count(self.core, TRANSACTION_STATE_TOPIC)
        assert count is not None
        partition = partition_for(txn.transactional_id, count)
        self._completing[txn.transactional_id] = _Completion(txn, partition, self._loaded.get(partition, -1),
                                                             set(txn.partitions))
        self._send_markers(txn.transactional_id)

    def _current(self, transactional_id: str) -> _Completion | None:
        """The completion still this broker's to drive (its new coordinator completes it otherwise)."""
        completion = self._completing.get(transactional_id)
        if completion is None:
            return None
        if (self._loaded.get(completion.partition) != completion.coordinator_epoch
                or self.state.get(transactional_id) != completion.txn):
            del self._completing[transactional_id]
            return None
        return completion

    def _send_markers(self, transactional_id: str) -> None:
        completion = self._current(transactional_id)
        if completion is None:
            return
        txn = completion.txn
        deleted, by_leader = driving.markers_by_leader(self.core.metadata.image, completion.pending)
        completion.pending -= deleted
        commit = txn.state is TxnState.PREPARE_COMMIT
        batch = marker_batch(txn.producer_id, txn.producer_epoch, completion.coordinator_epoch, commit, self._now())
        for leader, tps in by_leader.items():
            if leader < 0:
                continue
            correlation = next(self._correlations)
            completion.outstanding.add(correlation)
            self._marker_requests[correlation] = (transactional_id, tuple(tps), leader)
            request = ProduceRequest(correlation, -1, self.config.write_timeout_ms, tuple((tp, batch) for tp in tps),
                                     from_client=False)
            if leader == self.broker_id:
                self._local(request)
            else:
                self._send(leader, request)
            self._after(driving.MARKER_TIMEOUT_MS, functools.partial(self._marker_timeout, correlation))
        self._round_ended(transactional_id)

    def on_disconnect(self, broker_id: int) -> None:
        """The connection to a leader closed: its markers in flight failed (the server's ConnectionError)."""
        for correlation in [c for c, (_, _, leader) in self._marker_requests.items() if leader == broker_id]:
            self._markers_answered(correlation, {})

    def _marker_timeout(self, correlation: int) -> None:
        if correlation in self._marker_requests:
            self._markers_answered(correlation, {})

    def _markers_answered(self, correlation: int, answered: dict[TopicPartition, KafkaError]) -> None:
        transactional_id, _, _ = self._marker_requests.pop(correlation)
        completion = self._completing.get(transactional_id)
        if completion is None or correlation not in completion.outstanding:
            return
        completion.outstanding.discard(correlation)
        completion.pending -= {tp for tp, error in answered.items() if driving.marker_done(error)}
        self._round_ended(transactional_id)

    def _round_ended(self, transactional_id: str) -> None:
        """When every marker request of a round is answered: retry what is left, or write the Complete state."""
        completion = self._current(transactional_id)
        if completion is None or completion.outstanding:
            return
        if completion.pending:
            completion.attempt += 1
            if completion.attempt >= driving.MARKER_ATTEMPTS_MAX:
                del self._completing[transactional_id]  # given up, as the server does; a new coordinator retries
                return
            self._after(driving.marker_retry_ms(completion.attempt - 1),
                        lambda: self._send_markers(transactional_id))
            return
        completion.attempt = 0
        self._write_complete(transactional_id)

    def _write_complete(self, transactional_id: str) -> None:
        """Write CompleteCommit/CompleteAbort, again after a failure `driving.complete_retried` names."""
        completion = self._current(transactional_id)
        if completion is None:
            return

        def written(error: KafkaError) -> None:
            completion.attempt += 1
            if driving.complete_retried(error) and completion.attempt < driving.MARKER_ATTEMPTS_MAX:
                self._after(driving.marker_retry_ms(completion.attempt - 1),
                            lambda: self._write_complete(transactional_id))
            elif self._completing.get(transactional_id) is completion:
                del self._completing[transactional_id]

        self._apply(self.state.complete(transactional_id, self._now()), written)
