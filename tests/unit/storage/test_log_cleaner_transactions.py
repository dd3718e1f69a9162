"""The log cleaner on a log with transactions, end to end on a memory disk: three producers commit and abort
transactions interleaved with each other and with records outside transactions. Cleans remove the aborted records,
compact the committed ones by key, keep each marker while its transaction has records and for
`delete.retention.ms` after, and leave an aborted-transaction index (in memory and in the snapshots) with which a
read_committed consumer, skipping as Kafka's consumer does, reads the same at every step."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from cleaner_helpers import (
    DIR,
    TP,
    Producers,
    batches,
    cleaner_of,
    compacted_log,
    consumed,
    last_values,
)

from insync.clock import ManualClock
from insync.protocol.control_records import ABORT, AbortedTxn, marker_batch, marker_type
from insync.protocol.records import RecordSpec, build_batch, decode_records
from insync.replication.producer_state import open_table, parse_snapshot, rebuild_from_log
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.storage.log_cleaner import LogCleaner
from insync.types import TopicPartition

Read = list[tuple[int, bytes | None, bytes | None]]
ABORTED_VALUES = {b"p2-a", b"p2-d", b"p3-b"}


class Writer:
    """Three producers' transactions and plain records into one log, each batch observed by its table."""

    def __init__(self, producers: Producers, clock: ManualClock) -> None:
        self.producers, self.clock = producers, clock
        self.sequences: dict[int, int] = {}

    def plain(self, *pairs: tuple[bytes, bytes]) -> None:
        for key, value in pairs:
            self.producers.append(build_batch([RecordSpec(key, value, timestamp=self.clock.now_ms())]))

    def txn(self, pid: int, *pairs: tuple[bytes, bytes]) -> None:
        sequence = self.sequences.get(pid, 0)
        self.sequences[pid] = sequence + len(pairs)
        self.producers.append(build_batch([RecordSpec(k, v, timestamp=self.clock.now_ms()) for k, v in pairs],
                                          producer_id=pid, producer_epoch=0, base_sequence=sequence,
                                          is_transactional=True))

    def end(self, pid: int, commit: bool) -> int:
        """The marker's offset."""
        offset = self.producers.table.transactions.open_transaction(pid)
        assert offset is not None
        self.producers.append(marker_batch(pid, 0, 0, commit, self.clock.now_ms()))
        return self.producers.log.log_end_offset - 1  # type: ignore[union-attr]

    def filler(self, rounds: int) -> None:
        """Records of keys of their own, enough to roll the segments before them out of the active one."""
        self.plain(*[(b"x%d" % (i % 4), b"x-%d" % i) for i in range(rounds)])


def read_committed(log: Log, producers: Producers) -> Read:
    """What a read_committed consumer reads from the log start up to the last stable offset: Kafka's consumer
    skipping each producer's transactional batches from the first offset of an aborted transaction the index
    lists until that producer's ABORT marker."""
    index = producers.table.transactions
    end = index.last_stable_offset(log.log_end_offset)
    pending = deque(sorted(index.aborted_in(log.log_start_offset, end), key=lambda t: t.first_offset))
    skipping: set[int] = set()
    found: Read = []
    for data, header in batches(log):
        if header.base_offset >= end:
            break
        while pending and pending[0].first_offset <= header.last_offset:
            skipping.add(pending.popleft().producer_id)
        if header.is_control:
            if header.record_count and marker_type(data) == ABORT:
                skipping.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in skipping):
            found.extend((r.offset, r.key, r.value) for r in decode_records(data))
    return found


def last_committed(log: Log, producers: Producers) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Each key's last value and its offset as a read_committed consumer ends with, the filler's keys aside."""
    return {k: v for k, v in last_values(read_committed(log, producers)).items() if not (k or b"").startswith(b"x")}


def markers(log: Log) -> dict[int, int | None]:
    """Each marker still holding its record: offset -> its delete horizon."""
    return {h.base_offset: h.delete_horizon_ms for _, h in batches(log) if h.is_control and h.record_count}


def clean(cleaner: LogCleaner, log: Log, producers: Producers, clock: ManualClock) -> bool:
    stable = producers.table.transactions.last_stable_offset(log.log_end_offset)
    return cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: stable}, producers) == 1


def test_aborted_records_go_committed_ones_compact_and_markers_outlive_their_records() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock, delete_retention_ms=1000)
    producers = Producers(log)
    write = Writer(producers, clock)
    write.plain((b"a", b"plain-a"), (b"b", b"plain-b"))
    write.txn(1, (b"a", b"p1-a"), (b"c", b"p1-c"))
    write.txn(2, (b"a", b"p2-a"), (b"d", b"p2-d"))
    write.plain((b"e", b"plain-e"))
    p1_commit, p2_abort = write.end(1, commit=True), write.end(2, commit=False)
    write.txn(2, (b"b", b"p2-b"), (b"f", b"p2-f"))
    write.txn(3, (b"b", b"p3-b"))
    p2_commit, p3_abort = write.end(2, commit=True), write.end(3, commit=False)
    write.plain((b"a", b"plain-a2"), (b"c", b"plain-c"))  # nothing of producer 1's transaction is the last of its key
    for pid in (1, 2, 3):  # each producer's last batch lies past the others, kept by every clean
        write.txn(pid, (b"z%d" % pid, b"last"))
        write.end(pid, commit=True)
    write.filler(12)
    committed = read_committed(log, producers)
    assert not ABORTED_VALUES & {value for _, _, value in committed}
    assert {value for _, _, value in consumed(log)} >= ABORTED_VALUES
    expected = last_committed(log, producers)
    assert expected[b"a"][1] == b"plain-a2" and expected[b"b"][1] == b"p2-b" and b"d" not in expected
    index_before = producers.table.transactions.aborted()
    assert [t.producer_id for t in index_before] == [2, 3]
    cleaner = cleaner_of(disk)

    # The first clean: aborted records gone, every marker kept (their transactions' batches were there), and so
    # the index.
    assert clean(cleaner, log, producers, clock)
    assert not ABORTED_VALUES & {value for _, _, value in consumed(log)}
    assert last_committed(log, producers) == expected
    assert {p1_commit, p2_abort, p2_commit, p3_abort} <= set(markers(log))
    assert all(markers(log)[m] is None for m in (p1_commit, p2_abort, p2_commit, p3_abort))
    assert producers.table.transactions.aborted() == index_before
    assert any(parse_snapshot(log.read_producer_snapshot(o)).transactions.aborted() == index_before
               for o in log.producer_snapshot_offsets())

    # The second: no batch of producer 1's transaction nor of the aborted ones is left; their markers get a delete
    # horizon, and the aborted transactions leave the index and the snapshots. Producer 2's commit still has records.
    write.filler(12)
    clock.advance(500)
    assert clean(cleaner, log, producers, clock)
    horizon = clock.now_ms() + 1000
    assert {m: markers(log)[m] for m in (p1_commit, p2_abort, p2_commit, p3_abort)} == {
        p1_commit: horizon, p2_abort: horizon, p2_commit: None, p3_abort: horizon}
    assert producers.table.transactions.aborted() == []
    assert all(parse_snapshot(log.read_producer_snapshot(o)).transactions.aborted() == []
               for o in log.producer_snapshot_offsets())
    assert rebuild_from_log(log).transactions.aborted() == []
    assert last_committed(log, producers) == expected

    # Before the horizon nothing more goes; after it, the three markers do. Offsets stay.
    write.filler(12)
    clock.advance(999)
    assert clean(cleaner, log, producers, clock)
    assert {p1_commit, p2_abort, p3_abort} <= set(markers(log))
    write.filler(12)
    clock.advance(1)
    assert clean(cleaner, log, producers, clock)
    assert not {p1_commit, p2_abort, p3_abort} & set(markers(log)) and p2_commit in markers(log)
    assert last_committed(log, producers) == expected
    assert not ABORTED_VALUES & {value for _, _, value in consumed(log)}
    reopened = Log.open(DIR, log.config, disk, clock=clock)
    assert open_table(reopened).transactions.aborted() == []
    assert consumed(reopened) == consumed(log)


def test_the_clean_stops_at_an_open_transaction() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    producers = Producers(log)
    write = Writer(producers, clock)
    write.txn(1, (b"a", b"aborted"))
    write.end(1, commit=False)
    write.plain((b"b", b"1"), (b"b", b"2"))
    open_from = log.log_end_offset
    write.txn(2, (b"b", b"open"))  # never ended: the last stable offset stays here
    write.filler(16)
    before = consumed(log)
    assert producers.table.transactions.last_stable_offset(log.log_end_offset) == open_from
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, producers, clock)
    assert cleaner.checkpoints[TP] <= open_from
    after = consumed(log)
    assert [r for r in after if r[0] >= open_from] == [r for r in before if r[0] >= open_from]
    assert [value for _, _, value in after if value in (b"aborted", b"1", b"2")] == [b"2"]
    assert producers.table.transactions.aborted() == [AbortedTxn(1, 0, 1)]  # its batch was there: kept


class Unreachable(Producers):
    """A partition whose producer state went while its clean ran."""

    def forget_aborted_transactions(self, tp: TopicPartition, emptied: Sequence[AbortedTxn]) -> bool:
        return False


def test_a_clean_whose_emptied_transactions_the_index_cannot_forget_is_dropped() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    producers = Unreachable(log)
    write = Writer(producers, clock)
    write.txn(1, (b"a", b"aborted"))
    write.end(1, commit=False)
    write.txn(1, (b"b", b"later"))  # the producer's last batch, kept by every clean, is this one's
    write.end(1, commit=True)
    write.filler(16)
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, producers, clock)  # the first clean drops the records; the transaction stays
    write.filler(16)
    before = batches(log)
    assert not clean(cleaner, log, producers, clock)  # the second empties it: the index must forget it first
    assert batches(log) == before and cleaner.metrics.aborted == 1
    assert not [name for name in disk.listdir(DIR) if name.endswith(".cleaned")]
