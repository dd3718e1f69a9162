"""The transaction coordinator's state machine, sans-IO: Kafka's `TransactionCoordinator` rules as decisions.

Each request is judged against the transactional id's current state and answered with a `Decision`: an error, or
the new state to write to `__transaction_state`. State changes only in `replay`, once the record is written (or
read back when a partition is loaded), as Kafka's controller managers work; while a write is in flight the id is
pending and other requests get CONCURRENT_TRANSACTIONS. The transitions, Kafka's:
- InitProducerId: a new id gets a producer id and epoch 0 (Empty); a known one in Empty or Complete* gets its
  epoch bumped (a new producer id when the epoch is exhausted), fencing its older producer; one with an open
  transaction has it aborted with a bumped epoch first (the client retries on CONCURRENT_TRANSACTIONS).
- AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added (its start time set on the first).
- EndTxn: Ongoing -> PrepareCommit / PrepareAbort; the driver then writes the markers to every partition and
  asks `complete`, which gives CompleteCommit / CompleteAbort. Retries of a finished EndTxn succeed.
- `expired`: open transactions past their timeout, which the driver aborts with a bumped epoch (`abort_expired`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.transactions.log_records import TxnMetadata, TxnState
from insync.types import TopicPartition

E = errors.BY_NAME
EPOCH_MAX = 32767 - 1  # Kafka's Short.MaxValue - 1: the last epoch before a new producer id
_PREPARE = {True: TxnState.PREPARE_COMMIT, False: TxnState.PREPARE_ABORT}
_COMPLETE = {TxnState.PREPARE_COMMIT: TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT: TxnState.COMPLETE_ABORT}


@dataclass(frozen=True, slots=True)
class Decision:
    """`write`: the state to write; once written, the request is answered `error` (NONE, or the
    CONCURRENT_TRANSACTIONS of an InitProducerId that aborts an open transaction first)."""

    error: KafkaError
    write: TxnMetadata | None = None


class TransactionCoordinatorCore:
    def __init__(self, max_timeout_ms: int) -> None:
        assert max_timeout_ms > 0
        self.max_timeout_ms = max_timeout_ms
        self._txns: dict[str, TxnMetadata] = {}
        self._partition_of: dict[str, int] = {}  # transactional id -> its __transaction_state partition
        self._pending: set[str] = set()

    # State ---------------------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def replay(self, partition: int, txn: TxnMetadata | None, transactional_id: str) -> None:
        """A record of `partition` written or read back (None: a tombstone)."""
        self._pending.discard(transactional_id)
        if txn is None:
            self._txns.pop(transactional_id, None)
            self._partition_of.pop(transactional_id, None)
            return
        assert txn.transactional_id == transactional_id and txn.producer_epoch >= 0, txn
        self._txns[transactional_id] = txn
        self._partition_of[transactional_id] = partition

    def abandon(self, transactional_id: str) -> None:
        """The write of a decision failed: the state stays what it was."""
        self._pending.discard(transactional_id)

    def unload(self, partition: int) -> list[str]:
        gone = [t for t, p in self._partition_of.items() if p == partition]
        for transactional_id in gone:
            del self._partition_of[transactional_id]
            self._txns.pop(transactional_id, None)
            self._pending.discard(transactional_id)
        return gone

    def in_state(self, states: Iterable[TxnState], partition: int | None = None) -> list[TxnMetadata]:
        wanted = frozenset(states)
        return [t for t in self._txns.values() if t.state in wanted
                and (partition is None or self._partition_of.get(t.transactional_id) == partition)]

    def listing(self, states: frozenset[TxnState], producer_ids: frozenset[int], duration_ms: int,
                pattern: re.Pattern[str] | None, now_ms: int) -> list[TxnMetadata]:
        """Kafka's `listTransactionStates` filters, each applied only when given (an empty set, a negative
        duration, no pattern): never Dead; of these producers; in these states; running longer than
        `duration_ms`; with an id `pattern` matches whole."""
        assert now_ms >= 0, now_ms
        return sorted((t for t in self._txns.values() if t.state is not TxnState.DEAD
                       and (not producer_ids or t.producer_id in producer_ids)
                       and (not states or t.state in states)
                       and (duration_ms < 0 or now_ms - t.start_ms > duration_ms)
                       and (pattern is None or pattern.fullmatch(t.transactional_id) is not None)),
                      key=lambda t: t.transactional_id)

    def _decide(self, txn: TxnMetadata) -> Decision:
        self._pending.add(txn.transactional_id)
        return Decision(errors.NONE, txn)

    # Requests --------------------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         now_ms: int, new_producer_id: Callable[[], int]) -> Decision:
        if not transactional_id:
            return Decision(errors.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return Decision(E["INVALID_TRANSACTION_TIMEOUT"])
        txn = self._txns.get(transactional_id)
        if txn is None:
            return self._decide(TxnMetadata(transactional_id, new_producer_id(), 0, timeout_ms, TxnState.EMPTY,
                                            last_update_ms=now_ms))
        if transactional_id in self._pending or txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
            return Decision(E["PRODUCER_FENCED"])  # KIP-360: only the current producer may bump its own epoch
        if txn.state is TxnState.ONGOING:
            # The open transaction is aborted first, fencing its producer; the client retries.
            aborting = self._decide(self._prepare_abort_fenced(txn, now_ms))
            return dataclasses.replace(aborting, error=E["CONCURRENT_TRANSACTIONS"])
        if txn.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        if txn.producer_epoch >= EPOCH_MAX:
            bumped = dataclasses.replace(txn, producer_id=new_producer_id(), producer_epoch=0)
        else:
            bumped = dataclasses.replace(txn, producer_epoch=txn.producer_epoch + 1)
        return self._decide(dataclasses.replace(bumped, timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                                partitions=frozenset(), start_ms=-1, last_update_ms=now_ms))

    def _prepare_abort_fenced(self, txn: TxnMetadata, now_ms: int) -> TxnMetadata:
        epoch = min(txn.producer_epoch + 1, EPOCH_MAX)
        return dataclasses.replace(txn, producer_epoch=epoch, state=TxnState.PREPARE_ABORT, last_update_ms=now_ms)

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> TxnMetadata | KafkaError:
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return E["INVALID_PRODUCER_ID_MAPPING"]
        if txn.producer_epoch != producer_epoch:
            return E["PRODUCER_FENCED"]
        if transactional_id in self._pending:
            return E["CONCURRENT_TRANSACTIONS"]
        return txn

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int) -> Decision:
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, KafkaError):
            return Decision(txn)
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        if txn.state not in (TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return Decision(E["INVALID_TXN_STATE"])
        added = frozenset(partitions)
        if txn.state is TxnState.ONGOING and added <= txn.partitions:
            return Decision(errors.NONE)  # nothing new: no write, as Kafka
        start_ms = txn.start_ms if txn.state is TxnState.ONGOING else now_ms
        return self._decide(dataclasses.replace(txn, state=TxnState.ONGOING, partitions=txn.partitions | added,
                                                start_ms=start_ms, last_update_ms=now_ms))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError]:
        """KIP-890's question from a partition leader, Kafka's `handleVerifyPartitionsInTransaction`: is each
        partition in this producer's open transaction? No write: a check of the current state."""
        asked = list(partitions)
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if not isinstance(txn, KafkaError) and txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            txn = E["CONCURRENT_TRANSACTIONS"]
        if isinstance(txn, KafkaError):
            return dict.fromkeys(asked, txn)
        ongoing = txn.partitions if txn.state is TxnState.ONGOING else frozenset()
        return {tp: errors.NONE if tp in ongoing else E["INVALID_TXN_STATE"] for tp in asked}

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int) -> Decision:
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, KafkaError):
            return Decision(txn)
        if txn.state is TxnState.ONGOING:
            return self._decide(dataclasses.replace(txn, state=_PREPARE[commit], last_update_ms=now_ms))
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state is finished:
            return Decision(errors.NONE)  # a retry of the EndTxn that finished it
        if txn.state is _PREPARE[commit]:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        return Decision(E["INVALID_TXN_STATE"])

    # The driver's steps ----------------------------------------------------------------------------------

    def complete(self, transactional_id: str, now_ms: int) -> Decision:
        """After every marker of a PrepareCommit/PrepareAbort is written: CompleteCommit/CompleteAbort."""
        txn = self._txns.get(transactional_id)
        if txn is None or txn.state not in _COMPLETE or transactional_id in self._pending:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        # The start time stays, as Kafka's TransactionMetadata keeps it: `kafka-transactions describe` shows it.
        return self._decide(dataclasses.replace(txn, state=_COMPLETE[txn.state], partitions=frozenset(),
                                                last_update_ms=now_ms))

    def expired(self, now_ms: int) -> list[TxnMetadata]:
        """Open transactions past their transaction.timeout.ms, not being changed."""
        return [t for t in self._txns.values() if t.state is TxnState.ONGOING and t.start_ms >= 0
                and t.start_ms + t.timeout_ms <= now_ms and t.transactional_id not in self._pending]

    def abort_expired(self, txn: TxnMetadata, now_ms: int) -> Decision:
        """Kafka's timeout abort: PrepareAbort with the epoch bumped, so the producer is fenced."""
        current = self._txns.get(txn.transactional_id)
        if current != txn or txn.transactional_id in self._pending:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        return self._decide(self._prepare_abort_fenced(txn, now_ms))
