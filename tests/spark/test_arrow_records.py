"""`arrow_records.decode` against the reference decoder `protocol.records.iter_records`, and its corrupt input.

The property test builds random fetch buffers (every codec, both timestamp types, control batches, an optional
partial last batch) and checks that the Arrow columns of a random offset window hold exactly what the reference
decoder yields in that window, and where the next fetch starts. The specific tests damage one batch at a time
and check the error names the batch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from insync import errors
from insync.protocol.compression import Compression, InvalidRecordError, compress
from insync.protocol.records import (
    BATCH_HEADER_SIZE,
    RecordSpec,
    build_batch,
    iter_records,
    scan_valid_prefix,
)
from insync.spark.source.arrow_records import HEADER_TYPE, Decoded, decode, scan

BASE_TIMESTAMP = 1_700_000_000_000
CRC_POS, ATTRIBUTES_POS, MAGIC_POS = 17, 21, 16

payloads = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))), max_size=3)
record_specs = st.builds(
    RecordSpec, key=payloads, value=payloads, headers=header_lists.map(tuple),
    timestamp=st.one_of(st.none(), st.integers(BASE_TIMESTAMP - 10**6, BASE_TIMESTAMP + 10**6)))


@dataclass(frozen=True, slots=True)
class BatchPlan:
    records: list[RecordSpec]
    compression: Compression
    timestamp_type: int
    gap: int  # offsets skipped before this batch, as compaction leaves them


batch_plans = st.builds(
    BatchPlan, records=st.lists(record_specs, min_size=1, max_size=20), compression=st.sampled_from(Compression),
    timestamp_type=st.sampled_from([0, 1]), gap=st.integers(0, 3))


@st.composite
def fetch_buffers(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """(a fetch response's records, its first offset, its last offset + 1): data and control batches, maybe the
    last one cut short."""
    base = draw(st.integers(0, 1000))
    offset = base
    buf = bytearray()
    for _ in range(draw(st.integers(0, 5))):
        plan = draw(batch_plans)
        offset += plan.gap
        if draw(st.integers(0, 4)) == 0:  # a control batch (a transaction marker) between data batches
            marker = RecordSpec(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00", timestamp=None)
            buf += build_batch([marker], base_offset=offset, base_timestamp=BASE_TIMESTAMP, is_control=True,
                               is_transactional=True, producer_id=7, producer_epoch=0)
            offset += 1
        buf += build_batch(plan.records, base_offset=offset, compression=plan.compression,
                           base_timestamp=BASE_TIMESTAMP, timestamp_type=plan.timestamp_type)
        offset += len(plan.records)
    if draw(st.booleans()):  # a last batch cut at a random byte by the response's size limit
        plan = draw(batch_plans)
        partial = build_batch(plan.records, base_offset=offset + plan.gap, compression=plan.compression,
                              base_timestamp=BASE_TIMESTAMP)
        buf += partial[:draw(st.integers(0, len(partial) - 1))]
        offset += plan.gap + len(plan.records)
    return bytes(buf), base, offset


def as_rows(decoded: Decoded) -> list[tuple[object, ...]]:
    headers = decoded.headers.to_pylist() if decoded.headers is not None else [None] * decoded.rows
    return list(zip(decoded.offsets.to_pylist(), decoded.timestamps_ms.to_pylist(), decoded.keys.to_pylist(),
                    decoded.values.to_pylist(), headers, strict=True))


def check_types(decoded: Decoded, include_headers: bool) -> None:
    assert decoded.keys.type == pa.binary() and decoded.values.type == pa.binary()
    assert decoded.offsets.type == pa.int64() and decoded.timestamps_ms.type == pa.int64()
    assert decoded.timestamp_types.type == pa.int32()
    assert len(decoded.keys) == len(decoded.values) == len(decoded.timestamps_ms) == len(decoded.timestamp_types)
    for column in (decoded.keys, decoded.values, decoded.offsets, decoded.timestamps_ms, decoded.timestamp_types):
        column.validate(full=True)
    if include_headers:
        assert decoded.headers is not None and decoded.headers.type == pa.list_(HEADER_TYPE)
        assert len(decoded.headers) == decoded.rows
        decoded.headers.validate(full=True)
    else:
        assert decoded.headers is None


def reference_next_offset(buf: bytes, first: int) -> int:
    """Past the last complete batch (control ones too); `first` if none."""
    _, batches = scan_valid_prefix(buf)
    return max([first] + [header.next_offset for _, header in batches])


def timestamp_type_by_offset(buf: bytes) -> dict[int, int]:
    return {header.base_offset + delta: header.timestamp_type for _, header in scan_valid_prefix(buf)[1]
            for delta in range(header.last_offset_delta + 1)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetched=fetch_buffers(), data=st.data(), include_headers=st.booleans())
def test_decode_matches_reference(fetched: tuple[bytes, int, int], data: st.DataObject,
                                  include_headers: bool) -> None:
    buf, base, last = fetched
    bounds = st.integers(max(0, base - 3), last + 3)
    first, end = sorted(data.draw(st.tuples(bounds, bounds), label="window"))
    decoded = decode(buf, first, end, include_headers)
    check_types(decoded, include_headers)
    expected = []
    for record in iter_records(buf):
        if first <= record.offset < end:
            headers = [{"key": k, "value": v} for k, v in record.headers] or None
            expected.append((record.offset, record.timestamp, record.key, record.value,
                             headers if include_headers else None))
    assert as_rows(decoded) == expected
    stamp_types = timestamp_type_by_offset(buf)
    assert decoded.timestamp_types.to_pylist() == [stamp_types[row[0]] for row in expected]
    assert decoded.next_offset == reference_next_offset(buf, first)


@pytest.mark.parametrize("codec", list(Compression))
def test_timestamp_types_per_batch(codec: Compression) -> None:
    create = build_batch([RecordSpec(b"a", b"1", timestamp=BASE_TIMESTAMP + 5),
                          RecordSpec(b"b", b"2", timestamp=BASE_TIMESTAMP + 9)],
                         base_offset=10, compression=codec, base_timestamp=BASE_TIMESTAMP)
    log_append = build_batch([RecordSpec(b"c", b"3", timestamp=BASE_TIMESTAMP + 1)], base_offset=12,
                             compression=codec, base_timestamp=BASE_TIMESTAMP, timestamp_type=1)
    decoded = decode(create + log_append, 10, 100, include_headers=False)
    assert decoded.offsets.to_pylist() == [10, 11, 12]
    assert decoded.timestamps_ms.to_pylist() == [BASE_TIMESTAMP + 5, BASE_TIMESTAMP + 9, BASE_TIMESTAMP + 1]
    assert decoded.timestamp_types.to_pylist() == [0, 0, 1]
    assert decoded.next_offset == 13


def test_headers_null_when_absent_and_values_may_be_null() -> None:
    batch = build_batch([RecordSpec(b"k", b"v"), RecordSpec(None, None, headers=(("é", None), ("", b"")))],
                        base_offset=0, base_timestamp=BASE_TIMESTAMP)
    decoded = decode(batch, 0, 2, include_headers=True)
    assert decoded.headers is not None
    assert decoded.headers.to_pylist() == [None, [{"key": "é", "value": None}, {"key": "", "value": b""}]]
    assert decoded.keys.to_pylist() == [b"k", None] and decoded.values.to_pylist() == [b"v", None]


# --- Edge buffers and windows -------------------------------------------------------------------------------


def three_batches() -> bytes:
    return b"".join(build_batch([RecordSpec(b"k%d" % i, b"v%d" % i) for i in range(3)], base_offset=base,
                                base_timestamp=BASE_TIMESTAMP) for base in (100, 103, 106))


def test_empty_buffer() -> None:
    decoded = decode(b"", 42, 50, include_headers=True)
    assert decoded.rows == 0 and decoded.next_offset == 42
    check_types(decoded, include_headers=True)


@pytest.mark.parametrize("cut", [1, 11, 12, 60, 61, 70])
def test_only_a_partial_batch(cut: int) -> None:
    batch = build_batch([RecordSpec(b"k", b"v" * 30)], base_offset=5, base_timestamp=BASE_TIMESTAMP)
    assert cut < len(batch)
    decoded = decode(batch[:cut], 5, 10, include_headers=True)
    assert decoded.rows == 0 and decoded.next_offset == 5


def test_window_before_the_records() -> None:
    decoded = decode(three_batches(), 0, 100, include_headers=False)
    assert decoded.rows == 0 and decoded.next_offset == 109


def test_window_after_the_records() -> None:
    decoded = decode(three_batches(), 200, 300, include_headers=True)
    assert decoded.rows == 0 and decoded.next_offset == 200  # nothing here moves a reader at 200 backwards


def test_window_inside_one_batch_and_empty_window() -> None:
    buf = three_batches()
    assert decode(buf, 104, 105, include_headers=False).offsets.to_pylist() == [104]
    assert decode(buf, 104, 104, include_headers=False).rows == 0


def test_control_batch_only_moves_the_position() -> None:
    marker = build_batch([RecordSpec(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=9,
                         base_timestamp=BASE_TIMESTAMP, is_control=True, is_transactional=True, producer_id=1)
    decoded = decode(marker, 9, 20, include_headers=True)
    assert decoded.rows == 0 and decoded.next_offset == 10


# --- Corrupt input --------------------------------------------------------------------------------------------


def reseal(batch: bytearray) -> bytes:
    """The batch with its CRC recomputed, so only the damage inside it is wrong."""
    struct.pack_into(">I", batch, CRC_POS, crc32c(bytes(batch[ATTRIBUTES_POS:])))
    return bytes(batch)


def assert_corrupt(buf: bytes, *words: str) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        decode(buf, 0, 10**6, include_headers=True)
    assert caught.value.error is errors.CORRUPT_MESSAGE
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def good_then(damaged: bytes) -> bytes:
    """A sound batch at offset 0, then the damaged one at offset 3000 (so the message must name the right one)."""
    return build_batch([RecordSpec(b"ok", b"ok")], base_offset=0, base_timestamp=BASE_TIMESTAMP) + damaged


def a_batch(compression: Compression = Compression.NONE) -> bytearray:
    return bytearray(build_batch([RecordSpec(b"key", b"value", headers=(("h", b"x"),)), RecordSpec(b"k2", b"v2")],
                                 base_offset=3000, base_timestamp=BASE_TIMESTAMP, compression=compression))


def test_crc_mismatch() -> None:
    batch = a_batch()
    batch[-1] ^= 0xFF
    assert_corrupt(good_then(bytes(batch)), "CRC", "3000")


def test_check_crcs_false_skips_only_the_crc() -> None:
    """Kafka's consumer option `check.crcs=false`: a batch whose bytes no longer match its CRC is read as it is;
    damage to its structure is still refused."""
    batch = bytearray(build_batch([RecordSpec(b"k", b"value")], base_offset=7, base_timestamp=BASE_TIMESTAMP))
    at = bytes(batch).index(b"value")
    batch[at:at + 5] = b"VALUE"  # the CRC is left as it was
    with pytest.raises(InvalidRecordError, match="CRC"):
        scan(bytes(batch), 7)
    unchecked = scan(bytes(batch), 7, check_crcs=False)
    decoded = decode(bytes(batch), 7, 8, include_headers=False, scanned=unchecked)
    assert decoded.values.to_pylist() == [b"VALUE"] and decoded.next_offset == 8
    batch[MAGIC_POS] = 1
    with pytest.raises(InvalidRecordError, match="message format v1"):
        scan(bytes(batch), 7, check_crcs=False)


def test_bad_magic() -> None:
    batch = a_batch()
    batch[MAGIC_POS] = 1  # the pre-0.11 message format, which an old log may still hold
    assert_corrupt(good_then(bytes(batch)), "offset 3000", "message format v1", "v2 record batches only")


def test_record_length_overruns_its_batch() -> None:
    batch = a_batch()
    first_record = BATCH_HEADER_SIZE
    assert batch[first_record] < 0x80  # a one-byte varint: the record's length
    batch[first_record] = 0x7E  # zigzag 63: far more than the batch holds
    assert_corrupt(good_then(reseal(batch)), "3000", "past the end of its batch")


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_record_length_short_of_its_fields(codec: Compression) -> None:
    plain = a_batch()
    body = bytearray(plain[BATCH_HEADER_SIZE:])
    body[0] -= 2  # zigzag: one byte fewer than its fields take
    rebuilt = bytearray(plain[:BATCH_HEADER_SIZE]) + compress(codec, bytes(body))
    struct.pack_into(">i", rebuilt, 8, len(rebuilt) - 12)
    struct.pack_into(">h", rebuilt, ATTRIBUTES_POS, codec)
    assert_corrupt(good_then(reseal(rebuilt)), "3000")


def test_non_utf8_header_key() -> None:
    batch = a_batch()
    at = bytes(batch).index(b"\x02h\x02x")  # header key "h" (length 1, zigzag 2), value "x"
    batch[at + 1] = 0xFF
    assert_corrupt(good_then(reseal(batch)), "UTF-8")


def test_null_header_key() -> None:
    batch = a_batch()
    at = bytes(batch).index(b"\x02h\x02x")
    batch[at:at + 4] = b"\x01\x04hx"  # a null key (-1), then a 2-byte value: the record keeps its length
    assert_corrupt(good_then(reseal(batch)), "3000", "null key")


def test_negative_header_count() -> None:
    batch = a_batch()
    at = bytes(batch).index(b"\x02\x02h\x02x")  # header count 1 (zigzag 2), then the header
    batch[at] = 0x03  # -2
    assert_corrupt(good_then(reseal(batch)), "3000", "header count")


def test_garbage_compressed_body() -> None:
    batch = a_batch(Compression.GZIP)
    batch[BATCH_HEADER_SIZE + 12:] = b"\xAB" * (len(batch) - BATCH_HEADER_SIZE - 12)
    assert_corrupt(reseal(batch))
