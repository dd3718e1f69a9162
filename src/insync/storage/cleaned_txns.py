"""The transactions a clean walks through (Kafka's CleanedTransactionMetadata): which batches belong to aborted
transactions, and which markers may go.

The clean is given the log's aborted transactions (the partition's aborted-transaction index, from the replication
layer) and reads the batches in offset order. An aborted transaction becomes ongoing at the first batch that reaches
its first offset; from then its producer's transactional batches are aborted data, to be dropped, until its ABORT
marker. Any other transactional batch belongs to a transaction that committed (all of it lies below the last stable
offset). A marker may go once no batch of its transaction is left: an ABORT marker whose transaction showed no
batch in this clean, a COMMIT marker whose producer showed no transactional batch since its previous marker; the
filter then keeps it for `delete.retention.ms` more (its delete horizon) before dropping it. The aborted transactions
whose markers were read with batches still seen are the ones the index keeps (`retained`); the others, their
records gone, leave it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync import limits
from insync.protocol.control_records import ABORT, COMMIT, AbortedTxn, marker_type
from insync.protocol.records import BatchHeader


@dataclass(slots=True)
class _Ongoing:
    txn: AbortedTxn
    seen_batch: bool = False  # a batch of it was read in this clean (Kafka's lastObservedBatchOffset)


class CleanedTransactions:
    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        assert len(aborted) <= limits.ABORTED_TXNS_PER_PARTITION_MAX, len(aborted)
        self._pending = sorted(aborted, key=lambda txn: txn.first_offset)  # not reached yet
        self._next = 0  # the first of `_pending` not reached
        self._ongoing_aborted: dict[int, _Ongoing] = {}  # producer id -> its aborted transaction being read
        self._ongoing_committed: set[int] = set()  # producers with committed batches since their last marker
        self.retained: list[AbortedTxn] = []  # aborted transactions whose marker stays with batches of theirs

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Kafka's `onBatchRead`: whether the batch is an aborted transaction's, its records to be dropped."""
        assert not header.is_control, header
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None and header.base_offset > ongoing.txn.last_offset:
            # Past its marker's offset: a later transaction of the producer. Only a marker missing from the log
            # gets here (the index keeps no transaction whose marker is gone); a missing marker costs no records.
            del self._ongoing_aborted[header.producer_id]
            ongoing = None
        if ongoing is not None:
            ongoing.seen_batch = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, batch: bytes) -> bool:
        """Kafka's `onControlBatchRead`: whether the marker `batch` may go (once its delete horizon passed)."""
        assert header.is_control, header
        self._reach(header.last_offset)
        if header.record_count == 0:
            return True  # emptied by an earlier clean: nothing of it is left to keep
        kind = marker_type(batch)
        if kind == ABORT:
            ongoing = self._ongoing_aborted.pop(header.producer_id, None)
            if ongoing is not None and ongoing.seen_batch:
                self.retained.append(ongoing.txn)
                return False
            return True
        if kind == COMMIT:
            had_batches = header.producer_id in self._ongoing_committed
            self._ongoing_committed.discard(header.producer_id)
            return not had_batches
        return False  # a control record that is no transaction marker stays

    def _reach(self, offset: int) -> None:
        """Kafka's `consumeAbortedTxnsUpTo`: the aborted transactions starting at or before `offset` are ongoing."""
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            current = self._ongoing_aborted.get(txn.producer_id)
            if current is None or current.txn.last_offset < txn.first_offset:  # a producer's own never overlap
                self._ongoing_aborted[txn.producer_id] = _Ongoing(txn)
            self._next += 1
