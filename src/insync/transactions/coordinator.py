"""The transaction coordinator's state machine, sans-IO: Kafka's `TransactionCoordinator` rules as decisions.

Each request is judged against the transactional id's state and answered with a `Decision`: an error, or the new
state to write to `__transaction_state`. State changes only in `replay`, once the record is written (or read back);
while a write is in flight the id is pending and other requests get CONCURRENT_TRANSACTIONS. The transitions:
- InitProducerId: a new id gets a producer id and epoch 0 (Empty); a known one in Empty or Complete* gets its epoch
  bumped (a new producer id once exhausted), fencing its older producer; an open transaction is aborted first.
- AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added (its start time set on the first).
- EndTxn: Ongoing -> PrepareCommit / PrepareAbort; the driver writes the markers, then `complete` gives
  CompleteCommit / CompleteAbort. `expired`: open transactions past their timeout, aborted with a bumped epoch.
Transactions v2 (KIP-890: EndTxn v5, partitions added by leaders): EndTxn bumps the epoch in the prepared state,
so the markers fence the transaction's own late batches; a retry is told by that bump; an abort needs nothing
open; an exhausted epoch gives a new producer id at completion (`end_txn_ids`: what the client goes on with).
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
SHORT_MAX = 32767
EPOCH_MAX = SHORT_MAX - 1  # Kafka's Short.MaxValue - 1: the last epoch before a new producer id
TV2 = 2  # the transaction version whose EndTxn bumps the epoch
_PREPARE = {True: TxnState.PREPARE_COMMIT, False: TxnState.PREPARE_ABORT}
_COMPLETE = {TxnState.PREPARE_COMMIT: TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT: TxnState.COMPLETE_ABORT}
_PREPARED = frozenset(_COMPLETE)


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
                       partitions: Iterable[TopicPartition], now_ms: int, client_version: int = 0) -> Decision:
        """AddPartitionsToTxn; `client_version` 2 when a partition leader adds them for a produce (v4+), as Kafka's
        `transactionVersionForAddPartitionsToTxn` reads it."""
        current = self._txns.get(transactional_id)
        if current is not None and (current.state in _PREPARED or transactional_id in self._pending):
            # Kafka's prepared transaction is pending until it completes: even a fenced producer retries.
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, KafkaError):
            return Decision(txn)
        if txn.state not in (TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return Decision(E["INVALID_TXN_STATE"])
        added = frozenset(partitions)
        if txn.state is TxnState.ONGOING and added <= txn.partitions:
            return Decision(errors.NONE)  # nothing new: no write, as Kafka
        start_ms = txn.start_ms if txn.state is TxnState.ONGOING else now_ms
        return self._decide(dataclasses.replace(txn, state=TxnState.ONGOING, partitions=txn.partitions | added,
                                                start_ms=start_ms, last_update_ms=now_ms,
                                                client_version=client_version))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError]:
        """KIP-890's question from a partition leader, Kafka's `handleVerifyPartitionsInTransaction`: is each
        partition in this producer's open transaction? No write: a check of the current state."""
        asked = list(partitions)
        txn = self._txns.get(transactional_id)
        found: TxnMetadata | KafkaError
        if txn is None or txn.producer_id != producer_id:
            found = E["INVALID_PRODUCER_ID_MAPPING"]
        elif txn.producer_epoch != producer_epoch:
            found = E["PRODUCER_FENCED"]
        elif txn.state in _PREPARED:
            found = E["CONCURRENT_TRANSACTIONS"]
        else:
            found = txn  # a pending write is not waited for: the partition's own check at append time is final
        if isinstance(found, KafkaError):
            return dict.fromkeys(asked, found)
        ongoing = found.partitions if found.state is TxnState.ONGOING else frozenset()
        return {tp: errors.NONE if tp in ongoing else E["TRANSACTION_ABORTABLE"] for tp in asked}

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int, client_version: int = 0, new_producer_id: Callable[[], int] | None = None) -> Decision:
        """EndTxn; `client_version` 2 from EndTxn v5, which needs `new_producer_id` for an exhausted epoch."""
        if client_version >= TV2:
            assert new_producer_id is not None
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit, now_ms, new_producer_id)
        txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(txn, KafkaError):
            return Decision(txn)
        if txn.state is TxnState.ONGOING:
            return self._decide(dataclasses.replace(txn, state=_PREPARE[commit], last_update_ms=now_ms,
                                                    client_version=0))
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state is finished:
            return Decision(errors.NONE)  # a retry of the EndTxn that finished it
        if txn.state is _PREPARE[commit]:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        return Decision(E["INVALID_TXN_STATE"])

    def _end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
                    new_producer_id: Callable[[], int]) -> Decision:
        """Kafka's `endTransaction` under transactions v2: the epoch of the request is the transaction's, and one
        above it in the state marks a retry of the EndTxn that bumped it (or the first epoch of a new producer id)."""
        txn = self._txns.get(transactional_id)
        if txn is None:
            return Decision(E["INVALID_PRODUCER_ID_MAPPING"])
        if transactional_id in self._pending:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        retry_on_overflow = txn.prev_producer_id == producer_id and producer_epoch == EPOCH_MAX \
            and txn.producer_epoch == 0
        retry_on_bump = txn.producer_epoch == producer_epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            return Decision(E["INVALID_PRODUCER_ID_MAPPING"])
        if txn.state in _PREPARED:
            valid = retry_on_bump
        elif txn.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == txn.producer_epoch
        else:
            valid = producer_epoch == txn.producer_epoch
        if not valid:
            return Decision(E["PRODUCER_FENCED"])
        retry = retry_on_bump or retry_on_overflow
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state is TxnState.ONGOING:
            return self._decide(self._prepare_v2(txn, _PREPARE[commit], now_ms, new_producer_id, txn.start_ms))
        if txn.state is finished and retry:
            return Decision(errors.NONE)
        if not commit and not retry and txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                                      TxnState.COMPLETE_ABORT):
            # An abort with nothing added: markers to no partition, the epoch bumped all the same.
            return self._decide(self._prepare_v2(txn, TxnState.PREPARE_ABORT, now_ms, new_producer_id, now_ms))
        if txn.state is _PREPARE[commit]:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        return Decision(E["INVALID_TXN_STATE"])

    @staticmethod
    def _prepare_v2(txn: TxnMetadata, state: TxnState, now_ms: int, new_producer_id: Callable[[], int],
                    start_ms: int) -> TxnMetadata:
        next_producer_id = new_producer_id() if txn.producer_epoch >= EPOCH_MAX else -1
        return dataclasses.replace(txn, state=state, producer_epoch=txn.producer_epoch + 1,
                                   next_producer_id=next_producer_id, start_ms=start_ms, last_update_ms=now_ms,
                                   client_version=TV2)

    def end_txn_ids(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch an EndTxn v5 answers once its decision is written (or a retry is answered):
        those the transaction completes with, Kafka's `prepareComplete` (a new id at epoch 0 after an overflow)."""
        txn = self._txns.get(transactional_id)
        if txn is None:
            return -1, -1
        if txn.state in _PREPARED and txn.next_producer_id >= 0:
            return txn.next_producer_id, 0
        return txn.producer_id, txn.producer_epoch

    # The driver's steps ----------------------------------------------------------------------------------

    def complete(self, transactional_id: str, now_ms: int) -> Decision:
        """After every marker of a PrepareCommit/PrepareAbort is written: CompleteCommit/CompleteAbort."""
        txn = self._txns.get(transactional_id)
        if txn is None or txn.state not in _COMPLETE or transactional_id in self._pending:
            return Decision(E["CONCURRENT_TRANSACTIONS"])
        # The start time stays, as Kafka's TransactionMetadata keeps it: `kafka-transactions describe` shows it.
        completed = dataclasses.replace(txn, state=_COMPLETE[txn.state], partitions=frozenset(), last_update_ms=now_ms)
        if txn.bumps_epoch and txn.next_producer_id >= 0:  # an exhausted epoch: the new producer id from now on
            completed = dataclasses.replace(completed, producer_id=txn.next_producer_id, producer_epoch=0,
                                            next_producer_id=-1, prev_producer_id=txn.producer_id)
        return self._decide(completed)

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
