"""Idempotent producer state for one partition: duplicate and sequence checks, sans-IO.

The leader keeps, per producer id, its epoch and its last five batches (Kafka's `ProducerStateManager`). On a
produce (`check`): an older epoch is INVALID_PRODUCER_EPOCH; a sequence range equal to one of the last five is a
`Duplicate`, answered with the original offsets; otherwise the base sequence must follow the last one (wrapping
at 2^31-1), or be 0 in a newer epoch, else OUT_OF_ORDER_SEQUENCE_NUMBER; an unknown producer id (its batches
deleted by retention or DeleteRecords) is accepted at any sequence, as Kafka does since KIP-360. `observe` stores each appended batch with its offsets, and gives
transactional batches and markers to the table's `TransactionIndex`; followers observe too, so a new leader
answers retries exactly as the old one would have. Snapshots (Kafka's `<offset>.snapshot` files, big-endian with
a CRC32C) hold the table and its transactions for the batches below their offset; the log owns the files and
takes one when a segment rolls or closes, this module turns a table into bytes and back. A reopened partition (`open_table`) loads the newest snapshot at or below the
log end, drops producers below the log start and replays batch headers after it; a damaged snapshot is logged,
deleted and the next older one tried, and with none left the table is rebuilt from the whole log.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from crc32c import crc32c

from insync import errors, limits
from insync.errors import KafkaException
from insync.protocol.control_records import AbortedTxn, marker_info
from insync.protocol.records import BatchHeader, iter_batches, parse_header
from insync.replication.log_view import LogView
from insync.replication.transactions import TransactionIndex
from insync.replication.verification_guards import VerificationGuards

logger = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
SEQUENCE_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The batch is a retry of one already in the log; answer with these offsets."""

    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=limits.PRODUCER_BATCHES_REMEMBERED))
    # The coordinator epoch of the producer's last transaction marker (-1 before one): DescribeProducers reports
    # it, and a marker from an older coordinator epoch is a zombie coordinator's.
    coordinator_epoch: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def next_sequence(sequence: int) -> int:
    return 0 if sequence == SEQUENCE_MAX else sequence + 1


def last_sequence_of(base_sequence: int, last_offset_delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at 2^31-1."""
    assert base_sequence >= 0 and last_offset_delta >= 0
    return (base_sequence + last_offset_delta) % (SEQUENCE_MAX + 1)


class ProducerStateTable:
    def __init__(self) -> None:
        # Insertion order is recency order: `record` moves a producer to the end, so eviction takes the first.
        self._producers: dict[int, ProducerEntry] = {}
        self._last_offset = -1  # the highest offset recorded: truncation above it has nothing to forget
        self.transactions = TransactionIndex()
        self.verifications = VerificationGuards()

    def check_batch(self, records: bytes) -> Duplicate | None:
        """`check` for the one batch of a produce request (its header read without decoding records), and a
        transactional one's sequence against its producer's verification guard."""
        header = parse_header(records, 0)
        duplicate = self.check(header.producer_id, header.producer_epoch, header.base_sequence,
                               header.last_offset_delta)
        if duplicate is None and header.is_transactional and len(self.verifications):
            entry = self._producers.get(header.producer_id)
            refused = self.verifications.refusal(header.producer_id, header.base_sequence,
                                                 entry is not None and bool(entry.batches))
            if refused is not None:
                raise KafkaException(errors.OUT_OF_ORDER_SEQUENCE_NUMBER, refused)
        return duplicate

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int,
              last_offset_delta: int) -> Duplicate | None:
        """Validate a leader append. None: append it. Duplicate: answer with its offsets. Raises on errors."""
        if producer_id == NO_PRODUCER_ID:
            return None
        if base_sequence < 0:
            raise KafkaException(errors.INVALID_REQUEST, f"idempotent batch of producer {producer_id} has no sequence")
        entry = self._producers.get(producer_id)
        if entry is None:
            return None
        if producer_epoch < entry.producer_epoch:
            raise KafkaException(errors.INVALID_PRODUCER_EPOCH,
                                 f"producer {producer_id} epoch {producer_epoch} < {entry.producer_epoch}")
        if producer_epoch > entry.producer_epoch:
            if base_sequence != 0:
                raise KafkaException(errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"new epoch {producer_epoch} of producer {producer_id} starts at {base_sequence}")
            return None
        last_sequence = last_sequence_of(base_sequence, last_offset_delta)
        for batch in entry.batches:
            if batch.first_sequence == base_sequence and batch.last_sequence == last_sequence:
                return Duplicate(batch.first_offset, batch.last_offset)
        if base_sequence != next_sequence(entry.last_sequence):
            raise KafkaException(
                errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {base_sequence}, expected {next_sequence(entry.last_sequence)}")
        return None

    def record(self, producer_id: int, producer_epoch: int, base_sequence: int, first_offset: int,
               last_offset: int) -> None:
        """Remember an appended batch (leader after append, follower on fetch, log recovery)."""
        if producer_id == NO_PRODUCER_ID or base_sequence < 0:
            return
        assert last_offset >= first_offset >= 0
        entry = self._producers.pop(producer_id, None)
        if entry is not None and producer_epoch < entry.producer_epoch:
            self._producers[producer_id] = entry
            return  # a zombie's batch replicated before the fence: it cannot change the newer epoch's state
        if entry is None or producer_epoch > entry.producer_epoch:
            if entry is None and len(self._producers) >= limits.PRODUCERS_PER_PARTITION_MAX:
                # Kafka expires idle producers by age; the least recently written one goes first here.
                del self._producers[next(iter(self._producers))]
            entry = ProducerEntry(producer_epoch, coordinator_epoch=-1 if entry is None else entry.coordinator_epoch)
        self._producers[producer_id] = entry
        last_sequence = last_sequence_of(base_sequence, last_offset - first_offset)
        entry.batches.append(BatchMetadata(base_sequence, last_sequence, first_offset, last_offset))
        self._last_offset = max(self._last_offset, last_offset)

    def observe(self, header: BatchHeader, batch: bytes | memoryview, pos: int) -> None:
        """Record any appended batch (offsets stamped, at `pos` of `batch`): idempotent ones for duplicate
        checks, transactional ones and markers for the transaction index. A marker in a newer epoch (the
        coordinator fenced the producer) raises the producer's epoch, so its older self is refused, and forgets the
        older epoch's batches (Kafka's maybeUpdateProducerEpoch): the new epoch starts again at sequence 0, which
        must not be taken for a duplicate of an old batch."""
        self._last_offset = max(self._last_offset, header.last_offset)
        if header.is_transactional:
            self.verifications.on_batch(header.producer_id, header.producer_epoch, header.is_control)
        if not header.is_control:
            self.record(header.producer_id, header.producer_epoch, header.base_sequence, header.base_offset,
                        header.last_offset)
            self.transactions.on_batch(header, None)
            return
        marker = marker_info(batch, pos)
        self.transactions.on_batch(header, None if marker is None else marker[0])
        entry = self._producers.get(header.producer_id)
        if entry is not None and header.producer_epoch > entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        if entry is not None and marker is not None:
            entry.coordinator_epoch = marker[1]

    def check_marker(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        """Kafka's `appendEndTxnMarker` checks of a marker a coordinator writes: one in an epoch older than the
        producer's is INVALID_PRODUCER_EPOCH; one from a coordinator epoch older than the producer's last marker's
        is a zombie coordinator's, TRANSACTION_COORDINATOR_FENCED. Raises."""
        assert header.is_control, header
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.producer_epoch:
            raise KafkaException(errors.INVALID_PRODUCER_EPOCH, f"marker of producer {header.producer_id} in epoch "
                                                                f"{header.producer_epoch} < {entry.producer_epoch}")
        marker = marker_info(batch, 0)
        if marker is not None and marker[1] < entry.coordinator_epoch:
            raise KafkaException(errors.BY_NAME["TRANSACTION_COORDINATOR_FENCED"],
                                 f"Invalid coordinator epoch for {header.producer_id}: {marker[1]} (zombie), "
                                 f"{entry.coordinator_epoch} (current)")

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or after `offset` (log truncation); producers left with none are dropped."""
        if offset > self._last_offset:
            return
        self._last_offset = offset - 1
        self.transactions.truncate_to(offset)
        for producer_id in list(self._producers):
            entry = self._producers[producer_id]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[producer_id]
                continue
            entry.batches.clear()
            entry.batches.extend(kept)

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, entry) in recency order, least recently written first."""
        return list(self._producers.items())

    def drop_below(self, log_start_offset: int) -> None:
        """Forget producers whose last batch ends below the log start offset (their data is gone)."""
        self.transactions.drop_below(log_start_offset)
        for producer_id in [p for p, e in self._producers.items() if e.batches[-1].last_offset < log_start_offset]:
            del self._producers[producer_id]

    def _restore(self, producer_id: int, entry: ProducerEntry) -> None:
        assert entry.batches and producer_id not in self._producers
        self._producers[producer_id] = entry
        self._last_offset = max(self._last_offset, entry.batches[-1].last_offset)


def record_batches(table: ProducerStateTable, records: bytes | memoryview, below_offset: int | None = None) -> None:
    """Record every idempotent batch in `records` (stamped with their offsets), headers only; batches at or
    past `below_offset` (not appended) are skipped."""
    for pos, header in iter_batches(records, verify_crc=False):
        if below_offset is not None and header.last_offset >= below_offset:
            break
        table.observe(header, records, pos)


def rebuild_from_log(log: LogView, chunk_bytes: int = 8 * 1024 * 1024) -> ProducerStateTable:
    """The table of a log, from all its batch headers (read once, in bounded chunks)."""
    table = ProducerStateTable()
    _replay(table, log, log.log_start_offset, chunk_bytes)
    return table


def _replay(table: ProducerStateTable, log: LogView, offset: int, chunk_bytes: int = 8 * 1024 * 1024) -> None:
    """Record the batches from `offset` (a batch boundary) to the log end offset."""
    end = log.log_end_offset
    for _ in range(limits.RECOVERY_BATCHES_MAX):
        if offset >= end:
            break
        result = log.read(offset, chunk_bytes)
        if not result.records:
            break
        record_batches(table, result.records)
        offset = result.next_offset


# --- Snapshots ----------------------------------------------------------------------------------------------------

SNAPSHOT_VERSION = 3  # version 1 has no transactions section, versions 1 and 2 no coordinator epochs
_HEADER = struct.Struct(">hI")  # version, CRC32C of everything after the header
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhib")  # producer id, epoch, coordinator epoch of its last marker, batch count
_PRODUCER_V2 = struct.Struct(">qhb")  # versions 1 and 2: without the coordinator epoch
_BATCH = struct.Struct(">iiqq")  # first/last sequence, first/last offset
_ONGOING = struct.Struct(">qq")  # producer id, first offset of its open transaction
_ABORTED = struct.Struct(">qqq")  # producer id, first offset, last offset


class SnapshotError(ValueError):
    """A producer snapshot is truncated, garbled or of an unknown version."""


@runtime_checkable
class SnapshotLog(LogView, Protocol):
    """What a log offers for producer snapshots (storage's `Log`); the files stay storage's business."""

    @property
    def directory(self) -> str: ...

    def producer_snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files, ascending."""
        ...

    def read_producer_snapshot(self, offset: int) -> bytes: ...

    def write_producer_snapshot(self, offset: int, data: bytes) -> None: ...

    def delete_producer_snapshot(self, offset: int) -> None: ...

    def set_producer_snapshot_source(self, source: Callable[[int], bytes] | None) -> None:
        """`source(offset)` gives the snapshot bytes for the batches below `offset`, when the log takes one."""
        ...

    def set_log_start_listener(self, listener: Callable[[int], None] | None) -> None:
        """`listener(log_start_offset)` after the log start moved up."""
        ...


def snapshot_bytes(table: ProducerStateTable, below_offset: int) -> bytes:
    """The snapshot at `below_offset`: the table restricted to batches ending below it (as after `truncate_to`,
    so a table that already holds batches past a truncation point still writes an exact snapshot)."""
    body = bytearray(_COUNT.size)
    count = 0
    for producer_id, entry in table.entries():
        batches = [b for b in entry.batches if b.last_offset < below_offset]
        if not batches:
            continue
        count += 1
        body += _PRODUCER.pack(producer_id, entry.producer_epoch, entry.coordinator_epoch, len(batches))
        for b in batches:
            body += _BATCH.pack(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
    _COUNT.pack_into(body, 0, count)
    ongoing, aborted = table.transactions.below(below_offset)
    body += _COUNT.pack(len(ongoing))
    for producer_id, first_offset in ongoing.items():
        body += _ONGOING.pack(producer_id, first_offset)
    body += _COUNT.pack(len(aborted))
    for txn in aborted:
        body += _ABORTED.pack(txn.producer_id, txn.first_offset, txn.last_offset)
    return _HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def parse_snapshot(data: bytes) -> ProducerStateTable:
    """The table a snapshot holds. Raises SnapshotError when it is damaged."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise SnapshotError(f"{len(data)} bytes, too short for a snapshot header")
    version, crc = _HEADER.unpack_from(data, 0)
    if version not in (1, 2, SNAPSHOT_VERSION):
        raise SnapshotError(f"unsupported version {version}, expected {SNAPSHOT_VERSION}")
    body = memoryview(data)[_HEADER.size:]
    if crc32c(body) != crc:
        raise SnapshotError(f"CRC mismatch: stored {crc:#010x}, computed {crc32c(body):#010x}")
    (count,) = _COUNT.unpack_from(body, 0)
    if not 0 <= count <= limits.PRODUCERS_PER_PARTITION_MAX:
        raise SnapshotError(f"producer count {count} out of range")
    table, position = ProducerStateTable(), _COUNT.size
    try:
        for _ in range(count):
            if version >= 3:
                producer_id, epoch, coordinator_epoch, batch_count = _PRODUCER.unpack_from(body, position)
            else:
                (producer_id, epoch, batch_count), coordinator_epoch = _PRODUCER_V2.unpack_from(body, position), -1
            position += _PRODUCER.size if version >= 3 else _PRODUCER_V2.size
            if not 0 < batch_count <= limits.PRODUCER_BATCHES_REMEMBERED or table.entry(producer_id) is not None:
                raise SnapshotError(f"producer {producer_id}: bad entry ({batch_count} batches)")
            entry = ProducerEntry(epoch, coordinator_epoch=coordinator_epoch)
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
                position += _BATCH.size
            table._restore(producer_id, entry)
        if version >= 2:
            position = _parse_transactions(table, body, position)
    except struct.error as exc:
        raise SnapshotError(f"truncated at byte {_HEADER.size + position}: {exc}") from None
    if position != len(body):
        raise SnapshotError(f"{len(body) - position} bytes after the last producer")
    return table


def _parse_transactions(table: ProducerStateTable, body: memoryview, position: int) -> int:
    """The open and aborted transactions of a version 2 snapshot; returns the position after them."""
    ongoing: dict[int, int] = {}
    (count,) = _COUNT.unpack_from(body, position)
    if not 0 <= count <= limits.PRODUCERS_PER_PARTITION_MAX:
        raise SnapshotError(f"open transaction count {count} out of range")
    position += _COUNT.size
    for _ in range(count):
        producer_id, first_offset = _ONGOING.unpack_from(body, position)
        ongoing[producer_id] = first_offset
        position += _ONGOING.size
    (count,) = _COUNT.unpack_from(body, position)
    if not 0 <= count <= limits.ABORTED_TXNS_PER_PARTITION_MAX:
        raise SnapshotError(f"aborted transaction count {count} out of range")
    position += _COUNT.size
    aborted = []
    for _ in range(count):
        aborted.append(AbortedTxn(*_ABORTED.unpack_from(body, position)))
        position += _ABORTED.size
    if any(a.last_offset >= b.last_offset for a, b in zip(aborted, aborted[1:], strict=False)):
        raise SnapshotError("aborted transactions out of order")
    table.transactions.restore(ongoing, aborted)
    return position


def forget_aborted(table: ProducerStateTable, log: LogView, emptied: Sequence[AbortedTxn]) -> None:
    """Drop aborted transactions the log cleaner left without records from the index and from every snapshot that
    holds them, before the clean is swapped in: their markers may go in a later clean, and an index entry that
    outlived its marker (a snapshot read after a restart) would make consumers skip the producer's later records.
    Raises on an I/O error."""
    table.transactions.forget(emptied)
    if not isinstance(log, SnapshotLog):
        return
    for offset in log.producer_snapshot_offsets():
        try:
            snapshot = parse_snapshot(log.read_producer_snapshot(offset))
        except SnapshotError:
            continue  # never loaded: opening the log deletes it
        if snapshot.transactions.forget(emptied):
            log.write_producer_snapshot(offset, snapshot_bytes(snapshot, offset))


def open_table(log: LogView) -> ProducerStateTable:
    """The table of a partition being opened. On a log that keeps snapshots: from the newest usable one plus
    the batches after it, and the log will snapshot this table from now on; otherwise from the whole log."""
    if not isinstance(log, SnapshotLog):
        return rebuild_from_log(log)
    table = _load_snapshot(log)
    log.set_producer_snapshot_source(functools.partial(snapshot_bytes, table))
    log.set_log_start_listener(table.drop_below)  # as a reload would: producers wholly below the start go
    return table


def _load_snapshot(log: SnapshotLog) -> ProducerStateTable:
    start, end = log.log_start_offset, log.log_end_offset
    for offset in reversed(log.producer_snapshot_offsets()):
        if not start <= offset <= end:
            continue  # storage deletes these when it opens or moves its bounds; never trust one
        try:
            table = parse_snapshot(log.read_producer_snapshot(offset))
        except SnapshotError as exc:
            logger.warning("Deleting unusable producer snapshot %s/%020d.snapshot: %s", log.directory, offset, exc)
            log.delete_producer_snapshot(offset)
            continue
        table.drop_below(start)
        _replay(table, log, offset)
        return table
    return rebuild_from_log(log)
