"""Shared builders for the log cleaner's tests: a compacted log on a memory disk, and what a consumer reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from insync.clock import ManualClock
from insync.config import CleanerConfig, LogConfig
from insync.protocol.control_records import AbortedTxn
from insync.protocol.records import (
    BatchHeader,
    RecordSpec,
    build_batch,
    iter_batches,
    iter_records,
    parse_header,
)
from insync.replication import producer_state
from insync.replication.producer_state import ProducerStateTable
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.storage.log_cleaner import InlineExecutor, LogCleaner
from insync.storage.offset_map import OffsetMap
from insync.types import TopicPartition

TP = TopicPartition("t", 0)
CONFIG = CleanerConfig(enable=True, threads=1, dedupe_buffer_bytes=1 << 20, dedupe_buffer_load_factor=0.9,
                       io_buffer_bytes=1 << 19, io_max_bytes_per_second=1e300, backoff_ms=0)


class Producers:
    """The cleaner's `ProducerStates` of one log, as a broker's partitions answer it: the replication layer's
    producer-state table of the log (`append` keeps it), or fixed last offsets."""

    def __init__(self, log: Log | None = None, last_offsets: Mapping[int, int] | None = None) -> None:
        self.log = log
        self.table = ProducerStateTable() if log is None else producer_state.open_table(log)
        self.last_offsets = last_offsets

    def append(self, batch: bytes) -> None:
        """Append as the leader, and observe the batch as a partition does."""
        assert self.log is not None
        header = parse_header(batch)
        info = self.log.append_as_leader(batch, leader_epoch=0, from_client=not header.is_control)
        self.table.observe(replace(header, base_offset=info.first_offset), batch, 0)

    def producer_last_offsets(self, tp: TopicPartition) -> Mapping[int, int]:
        if self.last_offsets is not None:
            return self.last_offsets
        return {pid: entry.batches[-1].last_offset for pid, entry in self.table.entries()}

    def aborted_transactions(self, tp: TopicPartition, below_offset: int) -> list[AbortedTxn]:
        return [txn for txn in self.table.transactions.aborted() if txn.first_offset < below_offset]

    def forget_aborted_transactions(self, tp: TopicPartition, emptied: Sequence[AbortedTxn]) -> bool:
        assert self.log is not None
        producer_state.forget_aborted(self.table, self.log, emptied)
        return True


NO_PRODUCERS = Producers()


def cleaner_of(disk: MemoryDisk) -> LogCleaner:
    """A log cleaner of /logs cleaning on the caller's thread."""
    return LogCleaner(("/logs",), disk, CONFIG, InlineExecutor(disk, OffsetMap(1 << 20, 0.9)), lambda _tp: "/logs")
DIR = "/logs/t-0"


def compacted_log(disk: MemoryDisk, clock: ManualClock, **config: object) -> Log:
    settings: dict[str, object] = {"cleanup_policy": ("compact",), "segment_bytes": 300,
                                   "min_cleanable_dirty_ratio": 0.01}
    settings.update(config)
    return Log.open(DIR, LogConfig(**settings), disk, clock=clock)  # type: ignore[arg-type]


def produce(log: Log, clock: ManualClock, pairs: Sequence[tuple[bytes, bytes | None]], **batch: int) -> None:
    """One batch per record, each stamped with the clock's time."""
    for key, value in pairs:
        log.append_as_leader(build_batch([RecordSpec(key, value, timestamp=clock.now_ms())], **batch),
                             leader_epoch=0)


def consumed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer reads from the log start."""
    found = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        result = log.read(offset, 1 << 20)
        found.extend((r.offset, r.key, r.value) for r in iter_records(result.records))
        offset = result.next_offset
    return found


def batches(log: Log) -> list[tuple[bytes, BatchHeader]]:
    """Every batch in the log's segments, with its header."""
    found = []
    for segment in log.segments:
        data = log.disk.pread(segment.log_path, 0, segment.size)
        found.extend((data[pos : pos + h.size], h) for pos, h in iter_batches(data))
    return found


def batch_offsets(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch in the log's segments."""
    return [(h.base_offset, h.last_offset, h.record_count) for _, h in batches(log)]


def last_values(records: Sequence[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int,
                                                                                                        bytes | None]]:
    latest: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest
