"""Which record batches of a read_committed Fetch response a consumer returns records from, as Kafka's consumer
decides it (its CompletedFetch; librdkafka's msgset reader does the same).

A read_committed Fetch stops at the last stable offset and lists the aborted transactions that overlap it:
(producer id, first offset) each. Walking the batches in offset order, every aborted transaction whose first
offset is at or before a batch's last offset marks its producer aborted; a transactional batch of an aborted
producer is skipped; that producer's ABORT marker (a control batch) ends it. Control batches are never records.
The decision is per batch, never per record, since a transaction's records fill whole batches; the offsets of
skipped batches still count as read (the next fetch starts past them), so an aborted range is a gap, as a
compacted one is. Without aborted transactions nothing but control batches is dropped, and `arrow_records`
already drops those, so it calls `committed_batches` only when the list is not empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from insync.protocol.control_records import ABORT, marker_type
from insync.protocol.records import BatchHeader

AbortedTransaction = tuple[int, int]  # (producer id, first offset), as a Fetch response lists it


def committed_batches(buf: bytes | memoryview, batches: Sequence[tuple[int, BatchHeader]],
                      aborted: Sequence[AbortedTransaction]) -> list[tuple[int, BatchHeader]]:
    """The data batches of `batches` ((position in `buf`, header) in offset order, as `arrow_records.scan` finds
    them) whose records a read_committed consumer returns, given the response's aborted transactions."""
    pending = sorted(aborted, key=lambda txn: txn[1])  # Kafka's consumer keeps them by first offset
    assert all(pid >= 0 for pid, _ in pending), pending
    next_pending = 0
    aborted_producers: set[int] = set()
    kept: list[tuple[int, BatchHeader]] = []
    for pos, h in batches:  # bounded by the batches of one response
        if h.producer_id >= 0:
            while next_pending < len(pending) and pending[next_pending][1] <= h.last_offset:
                aborted_producers.add(pending[next_pending][0])
                next_pending += 1
            if h.is_control:
                if marker_type(buf, pos) == ABORT:
                    aborted_producers.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborted_producers:
                continue
        if not h.is_control:
            kept.append((pos, h))
    assert len(kept) <= len(batches), (len(kept), len(batches))
    return kept
