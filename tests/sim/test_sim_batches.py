from __future__ import annotations

from insync.protocol.records import RecordSpec, build_batch, decode_records, validate_batches
from insync.sim.batches import batch_ids, make_batch


def test_fast_batches_are_byte_identical_to_build_batch() -> None:
    for count, value_bytes in ((1, 0), (3, 16), (100, 100), (300, 1000)):
        fast = make_batch(1001, 4242, count, value_bytes, 1_700_000_000_123)
        pad = b"." * max(0, value_bytes - 16)
        specs = [RecordSpec(key=b"p1001-s%d" % (4242 + i), value=b"v1001-%d" % (4242 + i) + pad)
                 for i in range(count)]
        reference = build_batch(specs, base_timestamp=1_700_000_000_123, producer_id=1001, producer_epoch=0,
                                base_sequence=4242)
        assert fast == reference
        [header] = validate_batches(fast, max_message_bytes=10_000_000)
        assert header.record_count == count


def test_records_are_unique_and_batches_are_found_by_identity() -> None:
    first = make_batch(7, 0, 5, 16, 0)
    second = make_batch(7, 5, 5, 16, 0)
    keys = [r.key for r in decode_records(first) + decode_records(second)]
    assert len(set(keys)) == 10
    assert [ident for _, _, ident in batch_ids(first + second)] == [(7, 0), (7, 5)]
