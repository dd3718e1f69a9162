"""What the log cleaner keeps of one batch (Kafka's `MemoryRecords.filterTo` with the cleaner's `RecordFilter`).

A record is kept when it lies past the offset map (not deduplicated this round), or when it is the last record of
its key; a tombstone (a null value) is kept like a value until its batch's delete horizon has passed. The first
clean that keeps a tombstone sets the horizon, `now + delete.retention.ms`, into the batch (its base timestamp,
flagged in the attributes), so a tombstone outlives that clean by `delete.retention.ms`. A record without a key
cannot be deduplicated and goes. An aborted transaction's batch loses all its records; a transaction marker is kept
whole until `cleaned_txns` finds no batch of its transaction left, then gets a delete horizon the same way and goes
after it. A batch keeps its base and last offsets, producer fields and leader epoch: it is written as it was when
nothing of it goes, rebuilt with what is kept otherwise, and kept as an empty header when nothing is kept but it
holds a producer's last sequence or ends the cleaning round (so the log end and the producer's sequence survive).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from insync.protocol.records import BatchHeader, Record, decode_records, empty_batch, rebuild_batch
from insync.storage.cleaned_txns import CleanedTransactions
from insync.storage.offset_map import OffsetMap


@dataclass(frozen=True, slots=True)
class FilterContext:
    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    round_end_offset: int  # the first uncleanable offset of this clean: the batch ending there is kept
    last_offsets_of_producers: Mapping[int, int]  # producer id -> last offset of its last data batch
    transactions: CleanedTransactions  # carried from batch to batch across the clean's segment groups


@dataclass(slots=True)
class FilterStats:
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    invalid_messages: int = 0  # records without a key


def filter_batch(data: bytes, header: BatchHeader, context: FilterContext, stats: FilterStats) -> bytes | None:
    """The bytes to write for the batch `data` (whose header is `header`), or None when it goes whole."""
    assert len(data) == header.size, (len(data), header.size)
    stats.bytes_read += header.size
    if header.is_control:
        removable = context.transactions.on_control_batch(header, data)
        horizon = header.delete_horizon_ms
        drop_records = removable and horizon is not None and horizon <= context.now_ms
    else:
        removable = drop_records = context.transactions.on_data_batch(header)
    retain_empty = _retain_empty(header, context)
    if drop_records and not retain_empty:
        return None
    records = decode_records(data)
    if drop_records:
        kept = []
    elif header.is_control:
        kept = records
    else:
        kept = [record for record in records if _retain(record.offset, record.key, record.value, header, context,
                                                         stats)]
    stats.messages_read += len(records)
    stats.messages_retained += len(kept)
    if kept:
        out = _rewritten(data, header, records, kept, removable and header.is_control, context)
    elif retain_empty:
        out = empty_batch(header)
    else:
        return None
    stats.bytes_retained += len(out)
    return out


def _rewritten(data: bytes, header: BatchHeader, records: Sequence[Record], kept: Sequence[Record],
               removable_marker: bool, context: FilterContext) -> bytes:
    """The batch with `kept` of its `records`: as it was when all stay and no delete horizon is to be set. The first
    clean that keeps a tombstone or a removable marker sets the horizon; later ones keep it."""
    horizon = header.delete_horizon_ms
    needs_horizon = horizon is None and (removable_marker or any(record.value is None for record in kept))
    if len(kept) == len(records) and not needs_horizon:
        return data
    if needs_horizon:
        horizon = context.now_ms + context.delete_retention_ms
    return rebuild_batch(header, kept, horizon)


def _retain(offset: int, key: bytes | None, value: bytes | None, header: BatchHeader, context: FilterContext,
            stats: FilterStats) -> bool:
    """Kafka's `Cleaner.shouldRetainRecord`."""
    if offset > context.offset_map.latest_offset:
        return True
    if key is None:
        stats.invalid_messages += 1
        return False
    if offset < context.offset_map.get(key):
        return False
    horizon = header.delete_horizon_ms
    return value is not None or horizon is None or context.now_ms < horizon


def _retain_empty(header: BatchHeader, context: FilterContext) -> bool:
    """Kafka's RETAIN_EMPTY: the batch holding an active producer's last sequence, or the one ending the round."""
    if header.producer_id >= 0 and context.last_offsets_of_producers.get(header.producer_id) == header.last_offset:
        return True
    return header.next_offset == context.round_end_offset
