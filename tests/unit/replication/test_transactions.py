from dataclasses import replace

import pytest

from insync.errors import KafkaException
from insync.protocol.control_records import AbortedTxn, marker_batch
from insync.protocol.records import build_batch, parse_header
from insync.replication.producer_state import (
    ProducerStateTable,
    parse_snapshot,
    record_batches,
    snapshot_bytes,
)


def data(table: ProducerStateTable, pid: int, first: int, count: int = 1, seq: int = 0, epoch: int = 0) -> None:
    batch = build_batch([(b"k", b"v")] * count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    table.observe(replace(parse_header(batch), base_offset=first), batch, 0)


def marker(table: ProducerStateTable, pid: int, offset: int, commit: bool, epoch: int = 0) -> None:
    batch = marker_batch(pid, epoch, 0, commit, 1_000)
    table.observe(replace(parse_header(batch), base_offset=offset), batch, 0)


def test_the_last_stable_offset_waits_for_the_earliest_open_transaction() -> None:
    table = ProducerStateTable()
    txns = table.transactions
    assert txns.last_stable_offset(10) == 10
    data(table, 1, 3, count=2)
    data(table, 2, 5)
    data(table, 1, 6, seq=2)  # the same transaction: its first offset stays 3
    assert txns.open_transaction(1) == 3
    assert txns.last_stable_offset(8) == 3
    marker(table, 1, 7, commit=True)
    # committed, but its marker is not below the high watermark yet: still unstable
    assert txns.last_stable_offset(7) == 3
    assert txns.last_stable_offset(8) == 5  # producer 2's transaction now holds it
    marker(table, 2, 8, commit=False)
    assert txns.last_stable_offset(9) == 9
    assert txns.aborted() == [AbortedTxn(2, 5, 8)]


def test_aborted_transactions_a_read_meets() -> None:
    table = ProducerStateTable()
    for pid, first, last in ((1, 0, 4), (2, 5, 9), (3, 10, 30), (4, 12, 40)):
        data(table, pid, first)
        marker(table, pid, last, commit=False)
    aborted_in = table.transactions.aborted_in
    assert [t.producer_id for t in aborted_in(0, 3)] == [1]
    assert [t.producer_id for t in aborted_in(5, 11)] == [2, 3]  # stops at the first ending past the bound
    assert [t.producer_id for t in aborted_in(31, 50)] == [4]
    assert aborted_in(41, 60) == []


def test_truncation_reopens_a_transaction_whose_marker_it_cut() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    data(table, 2, 1)
    marker(table, 1, 2, commit=False)
    marker(table, 2, 3, commit=True)
    table.truncate_to(3)
    assert table.transactions.open_transaction(2) == 1
    assert table.transactions.aborted() == [AbortedTxn(1, 0, 2)]
    table.truncate_to(2)
    assert table.transactions.open_transaction(1) == 0 and table.transactions.aborted() == []
    table.truncate_to(1)
    assert table.transactions.ongoing() == {1: 0}


def test_the_log_start_forgets_aborted_transactions_below_it() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    marker(table, 1, 1, commit=False)
    data(table, 1, 2, seq=1)
    marker(table, 1, 3, commit=False)
    table.drop_below(2)
    assert table.transactions.aborted() == [AbortedTxn(1, 2, 3)]


def test_snapshots_carry_open_and_aborted_transactions() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    marker(table, 1, 1, commit=False)
    data(table, 2, 2)
    data(table, 3, 3)
    marker(table, 3, 4, commit=True)
    restored = parse_snapshot(snapshot_bytes(table, 5))
    assert restored.transactions.ongoing() == {2: 2}
    assert restored.transactions.aborted() == [AbortedTxn(1, 0, 1)]
    # a snapshot below the commit marker holds producer 3's transaction as open, as a truncation would leave it
    assert parse_snapshot(snapshot_bytes(table, 4)).transactions.ongoing() == {2: 2, 3: 3}


def test_a_marker_of_a_newer_epoch_fences_the_producer() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    marker(table, 1, 1, commit=False, epoch=1)
    assert table.entry(1) is not None and table.entry(1).producer_epoch == 1  # type: ignore[union-attr]


def test_replayed_batches_rebuild_the_index() -> None:
    table = ProducerStateTable()
    first = build_batch([(b"k", b"v")], base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
    abort = bytearray(marker_batch(9, 0, 0, False, 1))
    abort[0:8] = (1).to_bytes(8, "big")  # the marker at offset 1, as a follower would fetch it
    record_batches(table, first + bytes(abort))
    assert table.transactions.aborted() == [AbortedTxn(9, 0, 1)]


def test_a_producer_keeps_its_last_markers_coordinator_epoch_and_its_open_transactions_start() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    assert (table.entry(1).coordinator_epoch, table.transactions.open_transaction(1)) == (-1, 0)  # type: ignore[union-attr]
    batch = marker_batch(1, 0, 4, True, 1_000)
    table.observe(replace(parse_header(batch), base_offset=1), batch, 0)
    assert (table.entry(1).coordinator_epoch, table.transactions.open_transaction(1)) == (4, None)  # type: ignore[union-attr]
    data(table, 1, 2, seq=1)
    assert table.transactions.open_transaction(1) == 2


def test_a_marker_from_an_older_coordinator_epoch_is_a_zombie_coordinators() -> None:
    table = ProducerStateTable()
    data(table, 1, 0)
    current = marker_batch(1, 0, 4, True, 1_000)
    table.observe(replace(parse_header(current), base_offset=1), current, 0)
    table.check_marker(parse_header(current), current)  # a retry from the same coordinator epoch
    stale = marker_batch(1, 0, 3, False, 1_000)
    with pytest.raises(KafkaException) as fenced:
        table.check_marker(parse_header(stale), stale)
    assert fenced.value.error.name == "TRANSACTION_COORDINATOR_FENCED"
    data(table, 1, 2, seq=0, epoch=1)
    older = marker_batch(1, 0, 5, False, 1_000)
    with pytest.raises(KafkaException) as old_epoch:
        table.check_marker(parse_header(older), older)
    assert old_epoch.value.error.name == "INVALID_PRODUCER_EPOCH"


def test_a_marker_of_no_producer_is_checked_and_kept_without_changing_any_transaction() -> None:
    """A negative producer id is no producer's (Kafka's hasProducerId): its marker, which Kafka appends, ends no
    transaction and makes no producer entry."""
    table = ProducerStateTable()
    data(table, 1, 0)
    nobody = marker_batch(-5, 0, 0, True, 1_000)
    table.check_marker(parse_header(nobody), nobody)
    table.observe(replace(parse_header(nobody), base_offset=1), nobody, 0)
    assert table.entry(-5) is None and table.transactions.open_transaction(1) == 0
    assert table.transactions.last_stable_offset(2) == 0
