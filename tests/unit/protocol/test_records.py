"""RecordBatch v2: header view, CRC, stamping, validation codes, recovery scan, builder/decoder round trips."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
from collections.abc import Callable, Iterator

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, RecordHeader
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from insync import errors
from insync.protocol import compression as codecs
from insync.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    InvalidRecordError,
    Record,
    RecordSpec,
    build_batch,
    crc_is_valid,
    decode_records,
    iter_batches,
    iter_records,
    parse_header,
    scan_valid_prefix,
    stamp,
    validate_batches,
)

INVALID_RECORD = errors.BY_NAME["INVALID_RECORD"]
SPECS = [
    RecordSpec(b"key-0", b"value-0", (("trace", b"abc"), ("empty", None)), 1_700_000_000_000),
    RecordSpec(None, b"value-1" * 300, (), 1_700_000_000_005),
    RecordSpec(b"key-2", None, (("h\u00e9", b""),), 1_699_999_999_990),
]


def recompute_crc(batch: bytearray, pos: int = 0) -> None:
    """Make a hand-edited batch CRC-valid again, to test checks that lie behind the CRC."""
    size = struct.unpack_from(">i", batch, pos + 8)[0] + LOG_OVERHEAD
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + size])))


def expected_records(
    specs: list[RecordSpec], *, base_offset: int = 0, default_timestamp: int = -1
) -> list[Record]:
    return [
        Record(
            base_offset + i,
            default_timestamp if s.timestamp is None else s.timestamp,
            s.key,
            s.value,
            s.headers,
        )
        for i, s in enumerate(specs)
    ]


def error_of(call: Callable[..., object], *args: object, **kwargs: object) -> errors.KafkaError:
    """The Kafka error `call` raises (draining it first if it is a generator)."""
    with pytest.raises(InvalidRecordError) as info:
        result = call(*args, **kwargs)
        if isinstance(result, Iterator):
            list(result)
    return info.value.error


# --- Round trips and header fields ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec: Compression) -> None:
    batch = build_batch(SPECS, base_offset=100, partition_leader_epoch=7, compression=codec)
    header = parse_header(batch)
    assert header.compression is codec
    assert header.size == len(batch)
    assert crc_is_valid(batch, 0, header)
    decoded = decode_records(batch)
    assert decoded == expected_records(SPECS, base_offset=100)


def test_header_fields_match_what_was_built() -> None:
    batch = build_batch(
        SPECS,
        base_offset=41,
        partition_leader_epoch=3,
        compression=Compression.ZSTD,
        producer_id=9000,
        producer_epoch=2,
        base_sequence=17,
        is_transactional=True,
    )
    header = parse_header(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.magic) == (41, 3, 2)
    assert header.batch_length == len(batch) - LOG_OVERHEAD
    assert (header.record_count, header.last_offset_delta) == (3, 2)
    assert (header.last_offset, header.next_offset) == (43, 44)
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_005
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9000, 2, 17)
    assert header.last_sequence == 19
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == 0
    assert header.attributes == 0x10 | Compression.ZSTD


def test_last_sequence_wraps_like_kafka() -> None:
    batch = build_batch([(None, b"a")] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert parse_header(batch).last_sequence == 0  # 2**31-2, 2**31-1, then 0
    assert parse_header(build_batch([(None, b"a")] * 3)).last_sequence == -1


def test_builder_defaults_without_clock() -> None:
    header = parse_header(build_batch([(b"k", b"v")]))
    assert (header.base_timestamp, header.max_timestamp) == (-1, -1)
    assert [r.timestamp for r in decode_records(build_batch([(b"k", b"v")] * 2, base_timestamp=5))] == [5, 5]


def test_log_append_time_records_take_max_timestamp() -> None:
    batch = build_batch(SPECS, timestamp_type=1)
    assert parse_header(batch).timestamp_type == 1
    assert {r.timestamp for r in decode_records(batch)} == {1_700_000_000_005}


def test_accepts_bytes_bytearray_and_memoryview() -> None:
    batch = build_batch(SPECS, compression=Compression.LZ4)
    for buf in (batch, bytearray(batch), memoryview(batch), memoryview(bytearray(batch))):
        assert [h for _, h in iter_batches(buf)] == [parse_header(batch)]
        assert decode_records(buf) == decode_records(batch)
        assert validate_batches(buf, max_message_bytes=1 << 20) == [parse_header(batch)]


def test_iter_batches_reports_positions() -> None:
    first = build_batch(SPECS[:1], base_offset=0)
    second = build_batch(SPECS, base_offset=1, compression=Compression.GZIP)
    assert [(pos, h.base_offset) for pos, h in iter_batches(first + second)] == [(0, 0), (len(first), 1)]


# --- Independent implementations and the byte layout -------------------------------------------------------


def test_known_byte_layout_from_the_kafka_spec() -> None:
    # One record, key null, value b"hi", no headers, at base offset 5, epoch 1, timestamp 1000.
    record_body = (
        bytes([0, 0, 0, 1]) + b"\x04hi" + b"\x00"
    )  # attrs, ts delta 0, offset delta 0, key -1, value
    record = bytes([len(record_body) * 2]) + record_body  # zigzag length
    crc_range = struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + record
    expected = struct.pack(">qiibI", 5, 9 + len(crc_range), 1, 2, crc32c(crc_range)) + crc_range
    built = build_batch([RecordSpec(None, b"hi", (), 1000)], base_offset=5, partition_leader_epoch=1)
    assert built == expected
    assert len(built) == BATCH_HEADER_SIZE + len(record)


def test_kio_reads_what_we_build() -> None:
    specs = [
        RecordSpec(b"k", b"v", (("h", b"x"),), 1_700_000_000_000),
        RecordSpec(None, b"z", (), 1_700_000_001_000),
    ]
    batch = build_batch(specs, base_offset=7, partition_leader_epoch=4)
    theirs, size = read_batch(batch, 0)
    assert size == len(batch)
    assert (theirs.base_offset, theirs.partition_leader_epoch, theirs.crc) == (7, 4, parse_header(batch).crc)
    assert [(r.offset, r.key, r.value) for r in theirs.records] == [(7, b"k", b"v"), (8, None, b"z")]
    assert [int(r.timestamp.timestamp() * 1000) for r in theirs.records] == [
        1_700_000_000_000,
        1_700_000_001_000,
    ]
    assert theirs.records[0].headers[0].key == b"h" and theirs.records[0].headers[0].value == b"x"


def test_we_read_what_kio_builds() -> None:
    when = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    kio_records = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(when + datetime.timedelta(seconds=i)),
            offset=i64(i),
            key=None if i == 1 else b"k%d" % i,
            value=b"v%d" % i,
            headers=(RecordHeader(key=b"h", value=b"%d" % i),),
        )
        for i in range(3)
    )
    out = io.BytesIO()
    new_batch = NewRecordBatch(
        producer_id=i64(5),
        producer_epoch=i16(1),
        base_sequence=i32(0),
        records=kio_records,
        attributes=i16(0),
    )
    write_batch(out, new_batch)
    batch = out.getvalue()
    assert validate_batches(batch, max_message_bytes=1 << 20)[0].producer_id == 5
    base_ms = int(when.timestamp() * 1000)
    assert decode_records(batch) == [
        Record(i, base_ms + 1000 * i, None if i == 1 else b"k%d" % i, b"v%d" % i, (("h", b"%d" % i),))
        for i in range(3)
    ]


# --- Compression formats -----------------------------------------------------------------------------------


def test_snappy_reads_xerial_multi_block_and_raw_blocks() -> None:
    big = [RecordSpec(b"k", bytes(range(256)) * 400, (), 1)]  # ~100 KiB: several 32 KiB xerial blocks
    batch = build_batch(big, compression=Compression.SNAPPY)
    assert batch[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    assert decode_records(batch)[0].value == big[0].value
    # librdkafka writes a raw snappy block: rewrite the payload that way and decode again.
    plain = build_batch(big)
    raw = bytes(cramjam.snappy.compress_raw(plain[BATCH_HEADER_SIZE:]))
    rewritten = bytearray(plain[:BATCH_HEADER_SIZE] + raw)
    struct.pack_into(">i", rewritten, 8, len(rewritten) - LOG_OVERHEAD)
    struct.pack_into(">h", rewritten, 21, Compression.SNAPPY)
    recompute_crc(rewritten)
    assert decode_records(rewritten)[0].value == big[0].value


def test_lz4_frames_have_independent_blocks_for_kafka() -> None:
    batch = build_batch(SPECS, compression=Compression.LZ4)
    frame = batch[BATCH_HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    assert frame[4] & 0x20  # FLG block-independence bit: Kafka decodes each block on its own


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompress_rejects_garbage_and_bombs(codec: Compression) -> None:
    assert error_of(codecs.decompress, codec, b"\x00garbage" * 8, 1 << 20) == errors.CORRUPT_MESSAGE
    bomb = codecs.compress(codec, bytes(300_000))
    assert codecs.decompress(codec, bomb, 300_000) == bytes(300_000)
    assert error_of(codecs.decompress, codec, bomb, 299_999) == errors.CORRUPT_MESSAGE


# --- Stamping ----------------------------------------------------------------------------------------------


def test_stamp_sets_offset_and_epoch_and_keeps_crc_valid() -> None:
    buf = bytearray(build_batch(SPECS[:1]) + build_batch(SPECS, compression=Compression.GZIP))
    positions = [pos for pos, _ in iter_batches(buf)]
    stamp(buf, positions[1], base_offset=1_000_000, partition_leader_epoch=12)
    stamp(memoryview(buf), positions[0], base_offset=999_999, partition_leader_epoch=12)
    headers = [h for _, h in iter_batches(buf)]  # verifies CRCs
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(999_999, 12), (1_000_000, 12)]
    assert [r.offset for r in decode_records(buf, positions[1])] == [1_000_000, 1_000_001, 1_000_002]


# --- Rejections and their Kafka codes ----------------------------------------------------------------------


def test_crc_mismatch_is_corrupt_message() -> None:
    buf = bytearray(build_batch(SPECS))
    buf[-1] ^= 0x01
    assert not crc_is_valid(buf, 0, parse_header(buf))
    assert error_of(iter_batches, buf) == errors.CORRUPT_MESSAGE
    assert error_of(validate_batches, buf, max_message_bytes=1 << 20) == errors.CORRUPT_MESSAGE
    assert error_of(decode_records, buf) == errors.CORRUPT_MESSAGE
    assert [h.base_offset for _, h in iter_batches(buf, verify_crc=False)] == [0]


def test_wrong_magic_is_corrupt_message() -> None:
    for magic in (0, 1, 3, 255):
        buf = bytearray(build_batch(SPECS))
        buf[16] = magic
        assert error_of(parse_header, buf) == errors.CORRUPT_MESSAGE
    buf[16] = (
        1  # Kafka's produce path answers magic 0/1 with INVALID_RECORD, anything else with CORRUPT_MESSAGE
    )
    assert error_of(validate_batches, buf, max_message_bytes=1 << 20) == INVALID_RECORD


def test_truncation_and_bad_length_are_corrupt_message() -> None:
    batch = build_batch(SPECS)
    for cut in (1, BATCH_HEADER_SIZE - 1, BATCH_HEADER_SIZE, len(batch) - 1):
        assert error_of(parse_header, batch[:cut]) == errors.CORRUPT_MESSAGE
        assert error_of(validate_batches, batch[:cut], max_message_bytes=1 << 20) == errors.CORRUPT_MESSAGE
    for bad_length in (-1, 0, 48):
        buf = bytearray(batch)
        struct.pack_into(">i", buf, 8, bad_length)
        assert error_of(parse_header, buf) == errors.CORRUPT_MESSAGE
    buf = bytearray(batch)
    struct.pack_into(">h", buf, 21, 5)  # compression codec 5 does not exist
    recompute_crc(buf)
    assert error_of(parse_header, buf) == errors.CORRUPT_MESSAGE


def test_oversized_batch_is_message_too_large() -> None:
    batch = build_batch(SPECS)
    assert validate_batches(batch, max_message_bytes=len(batch))[0].size == len(batch)
    assert error_of(validate_batches, batch, max_message_bytes=len(batch) - 1) == errors.MESSAGE_TOO_LARGE


def patched(offset: int, fmt: str, value: int, **build: object) -> bytearray:
    buf = bytearray(build_batch(SPECS, **build))  # type: ignore[arg-type]
    struct.pack_into(fmt, buf, offset, value)
    recompute_crc(buf)
    return buf


@pytest.mark.parametrize(
    ("buf", "error"),
    [
        (b"", INVALID_RECORD),
        (build_batch(SPECS) * 2, INVALID_RECORD),  # produce v3+ carries exactly one batch
        (build_batch(SPECS) + b"\x00" * 30, errors.CORRUPT_MESSAGE),  # trailing garbage
        (build_batch(SPECS, base_offset=3), INVALID_RECORD),
        (patched(57, ">i", 4), INVALID_RECORD),  # record count disagrees with last offset delta
        (patched(23, ">i", -1), INVALID_RECORD),  # empty offset range
        (patched(57, ">i", 0, base_sequence=0), INVALID_RECORD),
        (build_batch(SPECS, is_control=True), INVALID_RECORD),
        (build_batch(SPECS, producer_id=7, producer_epoch=0, base_sequence=-1), INVALID_RECORD),
        (build_batch(SPECS, timestamp_type=1), errors.INVALID_TIMESTAMP),
    ],
)
def test_validate_batches_rejects_like_kafkas_produce_path(buf: bytes, error: errors.KafkaError) -> None:
    assert error_of(validate_batches, buf, max_message_bytes=1 << 20) == error


def test_decode_rejects_records_that_disagree_with_the_header() -> None:
    assert error_of(decode_records, patched(57, ">i", 4)) == errors.CORRUPT_MESSAGE  # runs out of records
    assert error_of(decode_records, patched(57, ">i", 2)) == errors.CORRUPT_MESSAGE  # bytes left over
    assert error_of(decode_records, patched(57, ">i", 2**31 - 1)) == errors.CORRUPT_MESSAGE
    garbage = bytearray(build_batch(SPECS, compression=Compression.ZSTD))
    garbage[BATCH_HEADER_SIZE + 4 :] = b"\xff" * (len(garbage) - BATCH_HEADER_SIZE - 4)
    recompute_crc(garbage)
    assert error_of(decode_records, garbage) == errors.CORRUPT_MESSAGE


# --- Recovery scan and consumer iteration ------------------------------------------------------------------


def three_batches() -> tuple[bytearray, list[int]]:
    batches = [build_batch(SPECS, base_offset=3 * i, compression=Compression(i + 1)) for i in range(3)]
    return bytearray(b"".join(batches)), [len(b) for b in batches]


def test_scan_valid_prefix_stops_at_a_torn_tail() -> None:
    buf, sizes = three_batches()
    torn = buf[: sizes[0] + sizes[1] + 20]
    valid, batches = scan_valid_prefix(torn)
    assert valid == sizes[0] + sizes[1]
    assert [(pos, h.base_offset) for pos, h in batches] == [(0, 0), (sizes[0], 3)]
    assert scan_valid_prefix(buf)[0] == len(buf)
    assert scan_valid_prefix(b"") == (0, [])


def test_scan_valid_prefix_stops_at_a_flipped_byte() -> None:
    buf, sizes = three_batches()
    buf[sizes[0] + 40] ^= 0x80  # inside the CRC range of the second batch
    valid, batches = scan_valid_prefix(buf)
    assert (valid, len(batches)) == (sizes[0], 1)


def test_scan_valid_prefix_stops_at_offsets_going_backwards() -> None:
    buf, sizes = three_batches()
    stamp(buf, sizes[0] + sizes[1], base_offset=4, partition_leader_epoch=0)  # overlaps batch 2 (3..5)
    assert scan_valid_prefix(buf)[0] == len(buf)  # no offset check without start_offset
    assert scan_valid_prefix(buf, start_offset=0)[0] == sizes[0] + sizes[1]
    assert scan_valid_prefix(buf, start_offset=1) == (0, [])


def test_iter_records_skips_control_batches_and_a_partial_tail() -> None:
    data = build_batch(SPECS[:2], base_offset=0, compression=Compression.SNAPPY)
    marker = build_batch([RecordSpec(b"\x00\x00\x00\x01", b"\x00\x00")], base_offset=2, is_control=True)
    tail = build_batch(SPECS, base_offset=3)
    buf = data + marker + tail[: len(tail) // 2]
    assert [r.offset for r in iter_records(buf)] == [0, 1]
    assert [r.offset for r in iter_records(data + marker + tail)] == [0, 1, 3, 4, 5]
    broken = bytearray(data + tail)
    broken[len(data) + 30] ^= 1
    with pytest.raises(InvalidRecordError):
        list(iter_records(broken))


# --- Properties ----------------------------------------------------------------------------------------------

optional_bytes = st.one_of(st.none(), st.binary(max_size=64))
record_specs = st.builds(
    RecordSpec,
    key=optional_bytes,
    value=optional_bytes,
    headers=st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3).map(tuple),
    timestamp=st.one_of(st.none(), st.integers(min_value=0, max_value=2**41)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(record_specs, min_size=1, max_size=20),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    base_timestamp=st.one_of(st.none(), st.integers(min_value=0, max_value=2**41)),
)
def test_property_build_then_decode_round_trips(
    specs: list[RecordSpec], codec: Compression, base_offset: int, base_timestamp: int | None
) -> None:
    batch = build_batch(specs, base_offset=base_offset, compression=codec, base_timestamp=base_timestamp)
    header = parse_header(batch)
    assert (header.size, header.record_count, header.next_offset) == (
        len(batch),
        len(specs),
        base_offset + len(specs),
    )
    default = -1 if base_timestamp is None else base_timestamp
    assert decode_records(batch) == expected_records(
        specs, base_offset=base_offset, default_timestamp=default
    )


@settings(max_examples=150, deadline=None)
@given(
    position=st.integers(min_value=0, max_value=10_000),
    replacement=st.binary(min_size=1, max_size=8),
    codec=st.sampled_from(list(Compression)),
    fix_crc=st.booleans(),
)
def test_property_damaged_batches_never_crash(
    position: int, replacement: bytes, codec: Compression, fix_crc: bool
) -> None:
    buf = bytearray(build_batch(SPECS, compression=codec, base_timestamp=0))
    position %= len(buf)
    buf[position : position + len(replacement)] = replacement
    if fix_crc and len(buf) >= BATCH_HEADER_SIZE:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    for operation in (
        lambda: list(iter_batches(buf)),
        lambda: decode_records(buf),
        lambda: list(iter_records(buf)),
        lambda: validate_batches(buf, max_message_bytes=1 << 20),
    ):
        with contextlib.suppress(InvalidRecordError):
            operation()
    valid, batches = scan_valid_prefix(buf)
    assert valid == sum(h.size for _, h in batches) <= len(buf)
