"""The transactions a clean walks through: which batches are aborted data, which markers may go, and which aborted
transactions the index keeps."""

from __future__ import annotations

from dataclasses import replace

from insync.protocol.control_records import AbortedTxn, marker_batch
from insync.protocol.records import BatchHeader, build_batch, empty_batch, parse_header
from insync.storage.cleaned_txns import CleanedTransactions


def data(pid: int, offset: int, transactional: bool = True) -> BatchHeader:
    batch = build_batch([(b"k", b"v")], base_offset=offset, producer_id=pid, producer_epoch=0, base_sequence=0,
                        is_transactional=transactional)
    return parse_header(batch)


def marker(pid: int, offset: int, commit: bool) -> tuple[BatchHeader, bytes]:
    batch = marker_batch(pid, 0, 0, commit, 1_000)
    return replace(parse_header(batch), base_offset=offset), batch


def test_an_aborted_transactions_batches_are_dropped_and_its_marker_kept_while_they_were_there() -> None:
    # producer 1 aborts [0, 3] while producer 2 commits [1, 4], interleaved; producer 3 writes outside transactions
    txns = CleanedTransactions([AbortedTxn(1, 0, 3)])
    assert txns.on_data_batch(data(1, 0))
    assert not txns.on_data_batch(data(2, 1))
    assert not txns.on_data_batch(data(3, 2, transactional=False))
    assert not txns.on_control_batch(*marker(1, 3, commit=False))  # its batches were here: it stays
    assert not txns.on_control_batch(*marker(2, 4, commit=True))
    assert not txns.on_data_batch(data(1, 5))  # producer 1's next transaction is not the aborted one
    assert txns.retained == [AbortedTxn(1, 0, 3)]


def test_markers_whose_batches_are_gone_may_go() -> None:
    txns = CleanedTransactions([AbortedTxn(1, 0, 3)])
    assert txns.on_control_batch(*marker(1, 3, commit=False))
    assert txns.on_control_batch(*marker(2, 4, commit=True))
    assert txns.retained == []


def test_a_commit_marker_stays_while_a_batch_of_its_producer_came_since_the_last_one() -> None:
    txns = CleanedTransactions([])
    assert not txns.on_data_batch(data(2, 10))
    assert not txns.on_control_batch(*marker(2, 11, commit=True))
    assert txns.on_control_batch(*marker(2, 12, commit=True))  # a retried marker: nothing since the first


def test_an_emptied_marker_may_go_and_an_unknown_control_record_stays() -> None:
    header, batch = marker(1, 3, commit=False)
    emptied = empty_batch(header)
    assert CleanedTransactions([AbortedTxn(1, 0, 3)]).on_control_batch(parse_header(emptied), emptied)
    other = build_batch([(b"\x00\x00\x00\x05", b"")], base_offset=4, producer_id=1, producer_epoch=0,
                        is_control=True)
    assert not CleanedTransactions([]).on_control_batch(parse_header(other), other)


def test_a_transaction_whose_marker_is_missing_ends_at_its_marker_offset() -> None:
    # The index never keeps such a transaction; if it did, the producer's later transactions keep their records.
    txns = CleanedTransactions([AbortedTxn(1, 0, 3), AbortedTxn(1, 8, 9)])
    assert txns.on_data_batch(data(1, 0))
    assert not txns.on_data_batch(data(1, 5))
    assert txns.on_data_batch(data(1, 8))
    assert not txns.on_control_batch(*marker(1, 9, commit=False))
    assert txns.retained == [AbortedTxn(1, 8, 9)]
