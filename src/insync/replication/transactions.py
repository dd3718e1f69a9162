"""One partition's transactions, sans-IO: the open ones, the aborted ones, and the last stable offset.

A transactional batch opens its producer's transaction at its first offset unless one is open already; a control
batch (a COMMIT or ABORT marker, written by the coordinator through WriteTxnMarkers) closes it. The first offset
of the earliest open transaction bounds what read_committed consumers may read (Kafka's first unstable offset);
a transaction whose marker is not yet below the high watermark still bounds it, as Kafka keeps it among the
"unreplicated" ones. Each aborted transaction is kept as (producer id, first offset, last offset), sorted by the
offset of its marker, Kafka's aborted-transaction index; `aborted_in` answers a read_committed Fetch as Kafka's
`collectAbortedTransactions` does. Truncation reopens a transaction whose marker it cut; the log start moving up
forgets aborted transactions wholly below it. The index lives in the producer-state snapshot (`producer_state`)
and is rebuilt by replaying the batches after it, so it survives restarts without a file of its own.
"""

from __future__ import annotations

import bisect
import struct
from collections import deque
from dataclasses import dataclass

from insync import limits
from insync.protocol.records import BatchHeader, RecordSpec, build_batch, decode_records

ABORT, COMMIT = 0, 1  # Kafka's ControlRecordType for transaction markers
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of its ABORT marker


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


def marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                 timestamp_ms: int) -> bytes:
    """The control batch a partition leader appends for WriteTxnMarkers (Kafka's EndTransactionMarker)."""
    assert producer_id >= 0 and producer_epoch >= 0, (producer_id, producer_epoch)
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch([RecordSpec(key=key, value=value)], base_timestamp=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, is_transactional=True, is_control=True)


def marker_type(batch: bytes | memoryview, pos: int = 0) -> int | None:
    """COMMIT or ABORT for a control batch at `pos` holding a transaction marker, None for another control
    record (Kafka's leader-change records)."""
    marker = marker_info(batch, pos)
    return None if marker is None else marker[0]


def marker_info(batch: bytes | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(COMMIT or ABORT, coordinator epoch) of a control batch at `pos` holding a transaction marker, None for
    another control record; the epoch is -1 in a marker whose value is too short to hold one."""
    records = decode_records(batch, pos)
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    _, kind = _CONTROL_KEY.unpack_from(records[0].key, 0)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value
    epoch = _MARKER_VALUE.unpack_from(value, 0)[1] if value is not None and len(value) >= _MARKER_VALUE.size else -1
    return int(kind), int(epoch)


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
