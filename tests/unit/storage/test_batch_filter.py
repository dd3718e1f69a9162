"""One batch through the cleaner's filter: kept whole, rebuilt with what is kept, a delete horizon set once, an
empty header kept where Kafka keeps one; an aborted transaction's records dropped, a marker kept while its
transaction has batches, then until its delete horizon."""

from __future__ import annotations

from insync.protocol.control_records import ABORT, AbortedTxn, marker_type
from insync.protocol.records import RecordSpec, build_batch, decode_records, parse_header
from insync.storage.batch_filter import FilterContext, FilterStats, filter_batch
from insync.storage.cleaned_txns import CleanedTransactions
from insync.storage.offset_map import OffsetMap


def _context(latest: dict[bytes, int], now_ms: int = 1000, round_end: int = 100,
             producers: dict[int, int] | None = None, aborted: tuple[AbortedTxn, ...] = ()) -> FilterContext:
    offset_map = OffsetMap(1 << 20, 0.9)
    for key, offset in sorted(latest.items(), key=lambda item: item[1]):
        offset_map.put(key, offset)
    offset_map.update_latest_offset(50)
    return FilterContext(offset_map, now_ms, 500, round_end, producers or {}, CleanedTransactions(aborted))


def _batch(pairs: list[tuple[bytes | None, bytes | None]], base_offset: int = 10, **fields: int) -> bytes:
    return build_batch([RecordSpec(k, v, timestamp=7) for k, v in pairs], base_offset=base_offset, **fields)


def test_a_batch_with_every_record_kept_is_written_as_it_was() -> None:
    data = _batch([(b"a", b"1"), (b"b", b"2")])
    assert filter_batch(data, parse_header(data), _context({b"a": 10, b"b": 11}), FilterStats()) == data


def test_a_rebuilt_batch_keeps_its_offsets_and_the_last_record_of_each_key() -> None:
    data = _batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], producer_id=4, producer_epoch=1, base_sequence=9)
    stats = FilterStats()
    out = filter_batch(data, parse_header(data), _context({b"a": 12, b"b": 11}), stats)
    assert out is not None
    header, original = parse_header(out), parse_header(data)
    assert (header.base_offset, header.last_offset, header.base_sequence, header.producer_id) == (
        original.base_offset, original.last_offset, 9, 4)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(out)] == [
        (11, b"b", b"2", 7), (12, b"a", b"3", 7)]
    assert (stats.messages_read, stats.messages_retained) == (3, 2)


def test_a_tombstone_gets_a_delete_horizon_once_and_goes_after_it() -> None:
    data = _batch([(b"a", None)])
    first = filter_batch(data, parse_header(data), _context({b"a": 10}, now_ms=1000), FilterStats())
    assert first is not None and parse_header(first).delete_horizon_ms == 1500
    assert decode_records(first)[0].timestamp == 7  # the record's own time survives the new base timestamp
    again = filter_batch(first, parse_header(first), _context({b"a": 10}, now_ms=1499), FilterStats())
    assert again == first
    assert filter_batch(first, parse_header(first), _context({b"a": 10}, now_ms=1500), FilterStats()) is None


def test_an_emptied_batch_stays_as_a_header_for_its_producer_or_the_rounds_end() -> None:
    data = _batch([(b"a", b"1")], producer_id=4, producer_epoch=1, base_sequence=0)
    superseded = {b"a": 40}
    assert filter_batch(data, parse_header(data), _context(superseded), FilterStats()) is None
    kept = filter_batch(data, parse_header(data), _context(superseded, producers={4: 10}), FilterStats())
    assert kept is not None and parse_header(kept).record_count == 0 and parse_header(kept).last_offset == 10
    ending = filter_batch(data, parse_header(data), _context(superseded, round_end=11), FilterStats())
    assert ending is not None and parse_header(ending).record_count == 0


def test_records_without_a_key_go_and_are_counted() -> None:
    data = _batch([(None, b"x"), (b"a", b"1")])
    stats = FilterStats()
    out = filter_batch(data, parse_header(data), _context({b"a": 11}), stats)
    assert out is not None and [r.key for r in decode_records(out)] == [b"a"] and stats.invalid_messages == 1


def test_an_aborted_transactions_records_go_unless_the_batch_holds_its_producers_last_sequence() -> None:
    data = _batch([(b"a", b"1"), (b"b", b"2")], producer_id=4, producer_epoch=0, base_sequence=0,
                  is_transactional=True)
    aborted = (AbortedTxn(4, 10, 20),)
    assert filter_batch(data, parse_header(data), _context({b"a": 10, b"b": 11}, aborted=aborted),
                        FilterStats()) is None
    kept = filter_batch(data, parse_header(data), _context({}, producers={4: 11}, aborted=aborted), FilterStats())
    assert kept is not None and parse_header(kept).record_count == 0 and parse_header(kept).last_offset == 11


def test_a_marker_whose_transaction_is_gone_gets_a_delete_horizon_then_goes() -> None:
    marker = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=30, producer_id=4,
                         producer_epoch=0, is_transactional=True, is_control=True)  # an ABORT marker
    header = parse_header(marker)
    assert marker_type(marker) == ABORT
    aborted = (AbortedTxn(4, 10, 30),)
    # Its records were here: the marker stays as it was.
    context = _context({}, aborted=aborted)
    context.transactions.on_data_batch(parse_header(_batch([(b"a", b"1")], producer_id=4, producer_epoch=0,
                                                           base_sequence=0, is_transactional=True)))
    assert filter_batch(marker, header, context, FilterStats()) == marker
    # None of them left: kept with a horizon, then dropped once it passed.
    first = filter_batch(marker, header, _context({}, now_ms=1000, aborted=aborted), FilterStats())
    assert first is not None and parse_header(first).delete_horizon_ms == 1500
    assert decode_records(first) == decode_records(marker)
    assert filter_batch(first, parse_header(first), _context({}, now_ms=1499, aborted=aborted),
                        FilterStats()) == first
    assert filter_batch(first, parse_header(first), _context({}, now_ms=1500, aborted=aborted),
                        FilterStats()) is None
