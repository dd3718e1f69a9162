"""Idempotent producer state for one partition: duplicate and sequence checks, sans-IO.

Kafka's idempotent producer stamps each batch with (producer id, producer epoch, base sequence). The partition
leader keeps, per producer id, its epoch and the metadata of its last five batches (Kafka's
`ProducerStateManager`). On a produce (`check`):
- an epoch older than the known one is fenced: INVALID_PRODUCER_EPOCH;
- a batch whose sequence range equals one of the last five is a retry that already landed: `Duplicate`,
  answered with the original offsets and not appended again;
- otherwise, within the same epoch, the base sequence must follow the last one (wrapping at 2^31-1), and a
  newer epoch must start at sequence 0: else OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer id with no state whose sequence is not 0 is UNKNOWN_PRODUCER_ID (its state was lost, e.g. to
  retention), so the client resets its sequence.
After the append, `record` stores the batch with its assigned offsets. Followers call `record` for every
batch they append, and a log reopened after a crash rebuilds the table with `record` over its batch headers,
so a new leader answers retries exactly as the old one would have.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from insync import errors, limits
from insync.errors import KafkaException
from insync.protocol.records import iter_batches, parse_header
from insync.replication.log_view import LogView

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

    def check_batch(self, records: bytes) -> Duplicate | None:
        """`check` for the one batch of a produce request (its header read without decoding records)."""
        header = parse_header(records, 0)
        return self.check(header.producer_id, header.producer_epoch, header.base_sequence, header.last_offset_delta)

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
            if base_sequence != 0:
                raise KafkaException(errors.UNKNOWN_PRODUCER_ID,
                                     f"producer {producer_id} unknown, sequence {base_sequence}")
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
            entry = ProducerEntry(producer_epoch)
        self._producers[producer_id] = entry
        last_sequence = last_sequence_of(base_sequence, last_offset - first_offset)
        entry.batches.append(BatchMetadata(base_sequence, last_sequence, first_offset, last_offset))
        self._last_offset = max(self._last_offset, last_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or after `offset` (log truncation); producers left with none are dropped."""
        if offset > self._last_offset:
            return
        self._last_offset = offset - 1
        for producer_id in list(self._producers):
            entry = self._producers[producer_id]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self._producers[producer_id]
                continue
            entry.batches.clear()
            entry.batches.extend(kept)



def record_batches(table: ProducerStateTable, records: bytes | memoryview, below_offset: int | None = None) -> None:
    """Record every idempotent batch in `records` (stamped with their offsets), headers only; batches at or
    past `below_offset` (not appended) are skipped."""
    for _, header in iter_batches(records, verify_crc=False):
        if below_offset is not None and header.last_offset >= below_offset:
            break
        table.record(header.producer_id, header.producer_epoch, header.base_sequence, header.base_offset,
                     header.last_offset)


def rebuild_from_log(log: LogView, chunk_bytes: int = 8 * 1024 * 1024) -> ProducerStateTable:
    """The table of a log reopened after a restart, from its batch headers (Kafka keeps snapshots instead; this
    reads the whole log once at start-up, in bounded chunks)."""
    table = ProducerStateTable()
    offset, end = log.log_start_offset, log.log_end_offset
    for _ in range(limits.RECOVERY_BATCHES_MAX):
        if offset >= end:
            break
        result = log.read(offset, chunk_bytes)
        if not result.records:
            break
        record_batches(table, result.records)
        offset = result.next_offset
    return table
