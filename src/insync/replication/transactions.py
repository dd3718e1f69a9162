"""One partition's transactions, sans-IO: the open ones, the aborted ones, and the last stable offset.

A transactional batch opens its producer's transaction at its first offset unless one is open already; a control
batch (a COMMIT or ABORT marker, written by the coordinator through WriteTxnMarkers) closes it. The first offset
of the earliest open transaction bounds what read_committed consumers may read (Kafka's first unstable offset);
a transaction whose marker is not yet below the high watermark still bounds it, as Kafka keeps it among the
"unreplicated" ones. Each aborted transaction is kept as (producer id, first offset, last offset), sorted by the
offset of its marker, Kafka's aborted-transaction index; `aborted_in` answers a read_committed Fetch as Kafka's
`collectAbortedTransactions` does. Truncation reopens a transaction whose marker it cut; the log start moving up
forgets aborted transactions wholly below it, and the log cleaner those it left without records. The index lives in
the producer-state snapshot (`producer_state`) and is rebuilt by replaying the batches after it, so it survives
restarts without a file of its own.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from insync import limits
from insync.protocol.control_records import ABORT, AbortedTxn
from insync.protocol.records import BatchHeader


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class TransactionIndex:
    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[AbortedTxn] = []  # by last offset (markers are appended in offset order)
        # Completed transactions whose markers may still lie above the high watermark, oldest first.
        self._unreplicated: deque[CompletedTxn] = deque(maxlen=limits.UNREPLICATED_TXNS_MAX)

    def on_batch(self, header: BatchHeader, marker: int | None) -> CompletedTxn | None:
        """Track an appended batch (offsets stamped); `marker` is its type when it is a control batch."""
        if not header.is_transactional or header.producer_id < 0:
            return None
        if not header.is_control:
            self._ongoing.setdefault(header.producer_id, header.base_offset)
            return None
        if marker is None:
            return None
        first = self._ongoing.pop(header.producer_id, None)
        if first is None:
            return None  # a retried marker, or one for a transaction without data here
        done = CompletedTxn(header.producer_id, first, header.last_offset, marker == ABORT)
        self._complete(done)
        return done

    def _complete(self, done: CompletedTxn) -> None:
        assert done.last_offset >= done.first_offset >= 0, done
        if done.aborted:
            assert not self._aborted or self._aborted[-1].last_offset < done.last_offset, (self._aborted[-1], done)
            if len(self._aborted) >= limits.ABORTED_TXNS_PER_PARTITION_MAX:
                del self._aborted[0]  # the oldest: far below any consumer that is not replaying history
            self._aborted.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset))
        self._unreplicated.append(done)

    def open_transaction(self, producer_id: int) -> int | None:
        """The first offset of the producer's open transaction, or None."""
        return self._ongoing.get(producer_id)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset read_committed consumers may not pass yet, None when nothing holds them back."""
        while self._unreplicated and self._unreplicated[0].last_offset < high_watermark:
            self._unreplicated.popleft()
        firsts = [*self._ongoing.values(), *(t.first_offset for t in self._unreplicated)]
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        unstable = self.first_unstable_offset(high_watermark)
        return high_watermark if unstable is None else min(high_watermark, unstable)

    def aborted_in(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read from `fetch_offset` up to `upper_bound_offset` may meet: those ending
        at or after the fetch offset and starting before the bound, up to the first ending at or past it."""
        found: list[AbortedTxn] = []
        start = bisect.bisect_left(self._aborted, fetch_offset, key=lambda t: t.last_offset)
        for txn in self._aborted[start:]:  # bounded by ABORTED_TXNS_PER_PARTITION_MAX
            if txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_offset >= upper_bound_offset:
                break
        return found

    def truncate_to(self, offset: int) -> None:
        """Forget what lies at or after `offset`; a transaction whose marker was cut is open again."""
        for producer_id in [p for p, first in self._ongoing.items() if first >= offset]:
            del self._ongoing[producer_id]
        while self._aborted and self._aborted[-1].last_offset >= offset:
            self._aborted.pop()
        kept = [t for t in self._unreplicated if t.last_offset < offset]
        for txn in self._unreplicated:
            if txn.last_offset >= offset > txn.first_offset:
                self._ongoing[txn.producer_id] = txn.first_offset
        self._unreplicated.clear()
        self._unreplicated.extend(kept)

    def drop_below(self, log_start_offset: int) -> None:
        """Forget aborted transactions whose marker is below the log start offset (their records are gone)."""
        keep = bisect.bisect_left(self._aborted, log_start_offset, key=lambda t: t.last_offset)
        del self._aborted[:keep]

    def forget(self, emptied: Collection[AbortedTxn]) -> bool:
        """Drop aborted transactions the log cleaner left without records (Kafka's cleaned segments get a transaction
        index without them); whether any was here."""
        gone = set(emptied)
        kept = [txn for txn in self._aborted if txn not in gone]
        changed = len(kept) < len(self._aborted)
        self._aborted = kept
        return changed

    def ongoing(self) -> dict[int, int]:
        return dict(self._ongoing)

    def aborted(self) -> list[AbortedTxn]:
        return list(self._aborted)

    def restore(self, ongoing: dict[int, int], aborted: list[AbortedTxn]) -> None:
        """Load a snapshot's transactions into an empty index."""
        assert not self._ongoing and not self._aborted
        assert all(a.last_offset < b.last_offset for a, b in zip(aborted, aborted[1:], strict=False)), aborted
        self._ongoing.update(ongoing)
        self._aborted.extend(aborted)

    def below(self, offset: int) -> tuple[dict[int, int], list[AbortedTxn]]:
        """(open, aborted) as a truncation to `offset` would leave them: what a snapshot at `offset` holds."""
        ongoing = {p: first for p, first in self._ongoing.items() if first < offset}
        for txn in self._unreplicated:
            if txn.last_offset >= offset > txn.first_offset:
                ongoing[txn.producer_id] = txn.first_offset
        return ongoing, [t for t in self._aborted if t.last_offset < offset]
