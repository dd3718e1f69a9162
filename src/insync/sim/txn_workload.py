"""Simulated transactional producers, as Kafka's producer runs a transaction, and the history they leave.

A `SimTxnProducer` finds its coordinator, gets a producer id and epoch (InitProducerId), then runs one
transaction after another until stopped: it adds a random set of partitions (AddPartitionsToTxn), writes one
transactional batch to each partition's leader (idempotent: a retry resends the same bytes and sequence), and
once every batch is acknowledged ends the transaction with a commit, or an abort with `abort_probability`. As a
real client: a lost or refused answer from the coordinator (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a
timeout) makes it find the coordinator again and retry; COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS
are retried after a backoff; a batch that cannot be written is an abortable error (the transaction is aborted);
after an abort it bumps its epoch (KIP-360); a fenced producer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) starts
again as a new instance of the same transactional id, whose InitProducerId fences and aborts what was open.
Every transaction is recorded with its batches and what the producer knows of its outcome, for `txn_checker`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from insync import errors
from insync.broker.messages import (
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from insync.errors import KafkaError
from insync.sim.batches import make_batch
from insync.sim.network import Disconnected, Network, NodeId
from insync.sim.scheduler import Scheduler, Timer
from insync.sim.txn_messages import (
    AddTxnPartitions,
    EndTxn,
    FindTxnCoordinator,
    InitTxnProducer,
    TxnAnswer,
    TxnCoordinatorAnswer,
    TxnRequest,
)
from insync.types import NO_LEADER, BrokerId, TopicPartition

E = errors.BY_NAME
_Request = TxnRequest | ProduceRequest | MetadataRequest | ConsumerFetchRequest
_ANSWERS = (TxnAnswer, TxnCoordinatorAnswer, ProduceResponse, MetadataResponse, ConsumerFetchResponse)
# Makes the batch a transaction writes to a partition from its first sequence: the bytes and their record count.
BuildBatch = Callable[[TopicPartition, int], tuple[bytes, int]]
STEP_ATTEMPTS_MAX = 10_000  # tries of one step before the producer gives up for good
PRODUCE_ATTEMPTS_MAX = 200  # tries of one batch (metadata refreshes included) before the transaction is aborted
TXNS_REMEMBERED_MAX = 1_000_000
_FIND_AGAIN = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "NETWORK_EXCEPTION", "REQUEST_TIMED_OUT"})
_RETRY = frozenset({"COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"})
_FENCED = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_PRODUCER_ID_MAPPING",
                     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})


@dataclass(frozen=True, slots=True)
class TxnSpec:
    producers: int = 2
    partitions_per_txn_max: int = 3
    abort_probability: float = 0.3
    records_per_batch: int = 3
    value_bytes: int = 16
    timeout_ms: int = 10_000  # transaction.timeout.ms
    request_timeout_ms: int = 5_000
    retry_backoff_ms: int = 100
    gap_ms: int = 20  # between one transaction's end and the next one's start

    def __post_init__(self) -> None:
        assert self.producers >= 1 and self.partitions_per_txn_max >= 1 and self.records_per_batch >= 1, self
        assert 0.0 <= self.abort_probability <= 1.0 and self.timeout_ms > 0 and self.request_timeout_ms > 0, self


@dataclass(slots=True)
class TxnAttempt:
    """One transaction as its producer ran it: its batches' base sequences by partition, and its outcome as far
    as the producer knows: committed or aborted when EndTxn said so; abandoned when fenced or stopped first."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    batches: dict[TopicPartition, int] = field(default_factory=dict)
    commit_requested: bool = False
    outcome: str = "open"  # open | committed | aborted | abandoned

    def must_be(self) -> str | None:
        """The outcome the history settles ("committed" or "aborted"), None when either is possible."""
        if self.outcome in ("committed", "aborted"):
            return self.outcome
        return None if self.commit_requested else "aborted"  # only an EndTxn(commit) can commit it


@dataclass(slots=True)
class TxnHistory:
    attempts: list[TxnAttempt] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def begin(self, attempt: TxnAttempt) -> None:
        assert len(self.attempts) < TXNS_REMEMBERED_MAX, "too many transactions for one simulation"
        self.attempts.append(attempt)


class SimTxnProducer:
    """One transactional producer client node; see the module docstring."""

    def __init__(self, name: str, topic: str, partitions: int, spec: TxnSpec, bootstrap: list[BrokerId],
                 scheduler: Scheduler, network: Network, history: TxnHistory, transactional_id: str = "") -> None:
        assert bootstrap and partitions >= 1
        self.name, self.transactional_id, self.spec = name, transactional_id or f"txn-{name}", spec
        self._topic = topic
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._bootstrap, self._scheduler, self._network, self._history = bootstrap, scheduler, network, history
        self._coordinator: BrokerId | None = None
        self._producer_id, self._producer_epoch = -1, -1
        self._sequences: dict[TopicPartition, int] = {}
        self._leaders: dict[TopicPartition, BrokerId] = {}
        self._waiting: dict[int, tuple[Callable[[object | None], None], Timer, NodeId]] = {}
        self._correlation = 0
        self._attempt: TxnAttempt | None = None
        self._unacked: dict[TopicPartition, tuple[bytes, int]] = {}  # batch, tries
        self._tries = 0
        self._stopped = False
        self.committed = self.aborted = 0
        network.register(name, self._on_message, hears_disconnects=True)
        scheduler.after(0, self._init)

    def stop(self) -> None:
        """Begin no more transactions; the open one is still ended."""
        self._stopped = True

    # Requests and answers -------------------------------------------------------------------------------------

    def _request(self, destination: NodeId, message: _Request, on_answer: Callable[[object | None], None]) -> None:
        """Send; `on_answer` gets the answer, or None after the request timeout or a closed connection."""
        correlation = message.correlation_id
        timer = self._scheduler.after(self.spec.request_timeout_ms, lambda: self._answered(correlation, None))
        self._waiting[correlation] = (on_answer, timer, destination)
        self._network.send(self.name, destination, message)

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def _answered(self, correlation: int, answer: object | None) -> None:
        entry = self._waiting.pop(correlation, None)
        if entry is not None:
            entry[1].cancel()
            entry[0](answer)

    def _on_message(self, src: NodeId, message: object) -> None:
        if isinstance(message, Disconnected):
            for correlation in [c for c, (_, _, dst) in self._waiting.items() if dst == message.node]:
                self._answered(correlation, None)
        elif isinstance(message, _ANSWERS):
            self._answered(message.correlation_id, message)

    def _later(self, action: Callable[[], None]) -> None:
        self._scheduler.after(self.spec.retry_backoff_ms, action)

    # The coordinator ------------------------------------------------------------------------------------------

    def _to_coordinator(self, make: Callable[[int], _Request], on_ok: Callable[[TxnAnswer], None]) -> None:
        """Send a coordinator request (found first when unknown), retrying as a client does; `on_ok` gets its
        answer without error."""
        self._tries += 1
        if self._tries > STEP_ATTEMPTS_MAX:
            self._history.errors["GAVE_UP"] += 1
            return
        if self._coordinator is None:
            self._find(lambda: self._to_coordinator(make, on_ok))
            return

        def answer(reply: object | None) -> None:
            error = reply.error if isinstance(reply, TxnAnswer) else E["REQUEST_TIMED_OUT"]
            if isinstance(reply, TxnAnswer) and error is errors.NONE:
                self._tries = 0
                on_ok(reply)
                return
            self._history.errors[error.name] += 1
            if error.name in _FIND_AGAIN:
                self._coordinator = None
                self._later(lambda: self._to_coordinator(make, on_ok))
            elif error.name in _RETRY:
                self._later(lambda: self._to_coordinator(make, on_ok))
            else:
                self._fenced()

        self._request(self._coordinator, make(self._next_correlation()), answer)

    def _find(self, then: Callable[[], None]) -> None:
        broker = self._bootstrap[self._scheduler.rng.randrange(len(self._bootstrap))]

        def answer(reply: object | None) -> None:
            if isinstance(reply, TxnCoordinatorAnswer) and reply.error is errors.NONE:
                self._coordinator = BrokerId(reply.broker_id)
            self._later(then) if self._coordinator is None else then()

        self._request(broker, FindTxnCoordinator(self._next_correlation(), self.transactional_id), answer)

    def _fenced(self) -> None:
        """A fatal error: this instance is done; a new one of the same transactional id starts."""
        self._abandon()
        self._later(self._init)

    def _abandon(self) -> None:
        """Give up the open transaction and the producer id with it."""
        if self._attempt is not None:
            self._attempt.outcome = "abandoned"
            self._attempt = None
        self._unacked.clear()
        self._producer_id, self._producer_epoch = -1, -1

    def _init(self) -> None:
        tid, timeout_ms, pid, epoch = self.transactional_id, self.spec.timeout_ms, self._producer_id, self._producer_epoch
        self._to_coordinator(lambda c: InitTxnProducer(c, tid, timeout_ms, pid, epoch), self._initialised)

    def _initialised(self, answer: TxnAnswer) -> None:
        assert answer.producer_id >= 0 and answer.producer_epoch >= 0, answer
        self._producer_id, self._producer_epoch = answer.producer_id, answer.producer_epoch
        self._sequences.clear()
        self._started()

    def _started(self) -> None:
        """What a new producer id or epoch starts with: here the first transaction."""
        self._begin()

    # One transaction ------------------------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._stopped:
            return
        rng = self._scheduler.rng
        count = rng.randint(1, min(self.spec.partitions_per_txn_max, len(self._tps)))
        spec, now = self.spec, self._scheduler.now_ms
        pid, epoch = self._producer_id, self._producer_epoch
        self._transact(tuple(sorted(rng.sample(self._tps, count))), lambda _, sequence: (
            make_batch(pid, sequence, spec.records_per_batch, spec.value_bytes, now, epoch, transactional=True),
            spec.records_per_batch))

    def _transact(self, partitions: tuple[TopicPartition, ...], build: BuildBatch) -> None:
        """Run one transaction writing a batch of `build` to each of `partitions`."""
        assert self._attempt is None and partitions, partitions
        attempt = TxnAttempt(self.transactional_id, self._producer_id, self._producer_epoch)
        self._attempt = attempt
        self._history.begin(attempt)
        tid, pid, epoch = self.transactional_id, self._producer_id, self._producer_epoch
        self._to_coordinator(lambda c: AddTxnPartitions(c, tid, pid, epoch, partitions),
                             lambda _: self._produce_all(attempt, partitions, build))

    def _produce_all(self, attempt: TxnAttempt, partitions: tuple[TopicPartition, ...], build: BuildBatch) -> None:
        if attempt is not self._attempt:
            return
        for tp in partitions:
            sequence = self._sequences.get(tp, 0)
            data, count = build(tp, sequence)
            self._sequences[tp] = sequence + count
            attempt.batches[tp] = sequence
            self._unacked[tp] = (data, 0)
            self._send_batch(attempt, tp)

    def _send_batch(self, attempt: TxnAttempt, tp: TopicPartition) -> None:
        if attempt is not self._attempt or tp not in self._unacked:
            return
        data, tries = self._unacked[tp]
        self._unacked[tp] = (data, tries + 1)
        leader = self._leaders.get(tp, NO_LEADER)
        if leader == NO_LEADER and tries < PRODUCE_ATTEMPTS_MAX:
            self._refresh_metadata(lambda: self._send_batch(attempt, tp))
            return
        if leader == NO_LEADER:  # an abortable error: the transaction cannot commit
            self._unacked.clear()
            self._end(attempt, commit=False)
            return
        request = ProduceRequest(self._next_correlation(), -1, self.spec.request_timeout_ms, ((tp, data),))
        self._request(leader, request, lambda reply: self._batch_answered(attempt, tp, reply))

    def _batch_answered(self, attempt: TxnAttempt, tp: TopicPartition, reply: object | None) -> None:
        if attempt is not self._attempt or tp not in self._unacked:
            return
        error: KafkaError = E["REQUEST_TIMED_OUT"]
        if isinstance(reply, ProduceResponse):
            error = reply.results[0].error
        if error is errors.NONE:
            del self._unacked[tp]
            if not self._unacked:
                self._end(attempt, self._scheduler.rng.random() >= self.spec.abort_probability)
            return
        self._history.errors[error.name] += 1
        if error.name in _FENCED:
            self._unacked.clear()
            self._fenced()
        elif error.retriable and self._unacked[tp][1] < PRODUCE_ATTEMPTS_MAX:
            self._leaders.pop(tp, None)
            self._later(lambda: self._send_batch(attempt, tp))
        else:  # an abortable error: the transaction cannot commit
            self._unacked.clear()
            self._end(attempt, commit=False)

    def _end(self, attempt: TxnAttempt, commit: bool) -> None:
        attempt.commit_requested |= commit
        tid, pid, epoch = self.transactional_id, self._producer_id, self._producer_epoch
        self._to_coordinator(lambda c: EndTxn(c, tid, pid, epoch, commit), lambda _: self._ended(attempt, commit))

    def _ended(self, attempt: TxnAttempt, commit: bool) -> None:
        if attempt is not self._attempt:
            return
        self._attempt = None
        attempt.outcome = "committed" if commit else "aborted"
        if commit:
            self.committed += 1
            self._scheduler.after(self.spec.gap_ms, self._begin)
        else:
            self.aborted += 1
            self._scheduler.after(self.spec.gap_ms, self._init)  # KIP-360: a bumped epoch, fresh sequences

    # Metadata -------------------------------------------------------------------------------------------------

    def _refresh_metadata(self, then: Callable[[], None]) -> None:
        broker = self._bootstrap[self._scheduler.rng.randrange(len(self._bootstrap))]

        def answer(reply: object | None) -> None:
            if isinstance(reply, MetadataResponse):
                for meta in reply.partitions:
                    if meta.leader != NO_LEADER:
                        self._leaders[meta.topic_partition] = meta.leader
            self._later(then)

        self._request(broker, MetadataRequest(self._next_correlation(), (self._topic,)), answer)
