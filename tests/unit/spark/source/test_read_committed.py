"""`read_committed.committed_batches` and a read_committed decode over hand-built logs: two transactional producers
interleaved with non-transactional batches, one aborting and one committing, a producer aborting again after a
commit, a fetch that starts inside an aborted transaction; and a task whose range ends on such a gap finishes."""

from __future__ import annotations

import pyarrow as pa

from insync import errors
from insync.protocol.control_records import marker_batch
from insync.protocol.records import build_batch, iter_batches, stamp
from insync.spark.source import arrow_records
from insync.spark.source.fetch_client import FetchResult
from insync.spark.source.kafka_io import OffsetRange, RangeFetch
from insync.spark.source.read_committed import committed_batches

A, B, IDEMPOTENT = 11, 22, 33  # producer ids
T0 = 1_700_000_000_000


def data(base: int, count: int, producer: int = -1, transactional: bool = False) -> bytes:
    return build_batch([(None, b"v%d" % (base + i)) for i in range(count)], base_offset=base, base_timestamp=T0,
                       producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                       base_sequence=0 if producer >= 0 else -1, is_transactional=transactional)


def marker(base: int, producer: int, commit: bool) -> bytes:
    batch = bytearray(marker_batch(producer, 0, 0, commit, T0))
    stamp(batch, 0, base_offset=base, partition_leader_epoch=0)
    return bytes(batch)


# Offsets 0-18. A's first transaction [2, 3] [5, 6] aborts (marker 10); B's [4] [8, 9] commits (marker 11); A's
# second [12] commits (marker 14); A's third [15] and B's second [16] both abort (markers 17, 18). Batches of no
# producer and of an idempotent, non-transactional one come between.
LOG = b"".join([
    data(0, 2), data(2, 2, A, True), data(4, 1, B, True), data(5, 2, A, True), data(7, 1, IDEMPOTENT),
    data(8, 2, B, True), marker(10, A, commit=False), marker(11, B, commit=True), data(12, 1, A, True),
    data(13, 1), marker(14, A, commit=True), data(15, 1, A, True), data(16, 1, B, True),
    marker(17, A, commit=False), marker(18, B, commit=False),
])
ABORTED = [(B, 16), (A, 2), (A, 15)]  # as a Fetch response may list them: not in offset order
COMMITTED = [0, 1, 4, 7, 8, 9, 12, 13]
LOG_END = 19


def batch_bases(buf: bytes, aborted: list[tuple[int, int]]) -> list[int]:
    return [h.base_offset for _, h in committed_batches(buf, list(iter_batches(buf)), aborted)]


def test_aborted_transactions_and_control_batches_are_left_out_committed_ones_kept() -> None:
    assert batch_bases(LOG, ABORTED) == [0, 4, 7, 8, 12, 13]


def test_nothing_aborted_leaves_out_only_control_batches() -> None:
    assert batch_bases(LOG, []) == [0, 2, 4, 5, 7, 8, 12, 13, 15, 16]


def test_a_producer_is_aborted_only_from_its_transactions_first_offset_to_its_abort_marker() -> None:
    # Only A's second abort listed: its first transaction and its commit stay, from 15 on it is aborted.
    assert batch_bases(LOG, [(A, 15)]) == [0, 2, 4, 5, 7, 8, 12, 13, 16]


def test_a_fetch_from_inside_an_aborted_transaction_skips_its_rest() -> None:
    # A read_committed fetch from offset 5 lists A's transaction that began at 2, before the response's first batch.
    tail = LOG[LOG.index(data(5, 2, A, True)):]
    assert batch_bases(tail, [(A, 2), (A, 15), (B, 16)]) == [7, 8, 12, 13]


def offsets(decoded: arrow_records.Decoded) -> list[int]:
    return list(decoded.offsets.to_pylist())


def test_decode_read_committed_rows_and_position() -> None:
    committed = arrow_records.decode(LOG, 0, LOG_END, False, aborted=ABORTED)
    assert offsets(committed) == COMMITTED
    assert committed.values.to_pylist() == [b"v%d" % o for o in COMMITTED]
    assert committed.next_offset == LOG_END  # skipped batches move the position as records do
    everything = arrow_records.decode(LOG, 0, LOG_END, False)  # read_uncommitted: every data batch
    assert offsets(everything) == [o for o in range(LOG_END) if o not in (10, 11, 14, 17, 18)]


def test_decode_window_ending_in_a_gap() -> None:
    window = arrow_records.decode(LOG, 3, 11, True, aborted=ABORTED)
    assert offsets(window) == [4, 7, 8, 9]
    assert isinstance(window.headers, pa.Array) and window.next_offset == LOG_END


class _Leader:
    """A read_committed leader whose log is `LOG` (all decided: the last stable offset is the log end)."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def fetch(self, offset: int) -> FetchResult:
        self.asked.append(offset)
        start = next((pos for pos, h in iter_batches(LOG) if h.next_offset > offset), len(LOG))
        return FetchResult(errors.NONE, LOG[start:], LOG_END, 0, LOG_END, tuple(ABORTED))

    def prefetch(self, offset: int) -> None:
        """The next fetch is answered when asked; nothing to send ahead."""

    def watermarks(self) -> tuple[int, int]:
        return 0, LOG_END


def read_range(start: int, end: int) -> tuple[list[int], list[int]]:
    """The offsets a task reading [start, end) yields, and the offsets it fetched from."""
    fetch = RangeFetch(OffsetRange("t", 0, start, end), {"bootstrap.servers": "127.0.0.1:9"},
                       include_headers=False, fail_on_data_loss=True, poll_timeout_ms=1000)
    leader = _Leader()
    rows = [o for b in fetch._read(leader) for o in b.column("offset").to_pylist()]  # type: ignore[arg-type]
    return rows, leader.asked


def test_a_task_whose_range_ends_on_a_gap_finishes() -> None:
    assert read_range(8, 11) == ([8, 9], [8])  # ends on A's abort marker
    assert read_range(2, 4) == ([], [2])  # nothing but an aborted transaction
    assert read_range(14, LOG_END) == ([], [14])  # a commit marker, then aborted records and their markers
    assert read_range(0, LOG_END) == (COMMITTED, [0])
