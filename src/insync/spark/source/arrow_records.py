"""Kafka v2 record batches straight into Arrow columns, without a Python object per record.

A Spark task reads hundreds of thousands of records a second; at that rate a Python object per record (what
any Kafka client library hands out) costs more than everything else in the read. Here the batch headers are
read in Python (one `protocol.records.parse_header` and one CRC32C call per batch, as the broker does), and
the records inside are decoded by a compiled loop (numba) that copies keys and values into Arrow buffers as it
meets them, in the pass that reads the record. Headers are gathered after.

`decode(buf, first, end, include_headers)` takes the `records` field of one partition of a Fetch response and
returns the Arrow columns of the records with offsets in `[first, end)` plus where the next fetch starts. As in
Kafka's consumer: control batches and, under read_committed, aborted ones (`read_committed`) are skipped but move
the position, an incomplete last batch is left for the next fetch, and a corrupt batch (bad magic, CRC mismatch,
a length or varint that overruns its batch) raises `InvalidRecordError` naming the batch's offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numba
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from insync import limits
from insync.protocol.compression import Compression, decompress
from insync.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    crc_is_valid,
    parse_header,
)
from insync.protocol.records import (
    _corrupt as corrupt,  # noqa: PLC2701  # the records module's own CORRUPT_MESSAGE constructor
)
from insync.spark.source.read_committed import AbortedTransaction, committed_batches

I64 = npt.NDArray[np.int64]
_MAGIC_OFFSET = 16  # of the magic byte in a batch (the same place in every message format)
U8 = npt.NDArray[np.uint8]

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])

# Error codes of the compiled loops (0: fine); `_ERRORS` words them.
_OK, _OVERRUN, _LONG_VARINT, _BAD_COUNT, _LEFTOVER, _NULL_HEADER_KEY = range(6)
_ERRORS = {_OVERRUN: "a record length or field runs past the end of its batch",
           _LONG_VARINT: "a varint longer than 10 bytes", _BAD_COUNT: "an invalid header count",
           _LEFTOVER: "bytes left after the last record, or a record whose fields do not fill it",
           _NULL_HEADER_KEY: "a record header with a null key"}


# `_parse` and its two helpers are compiled without numba's runtime (`_nrt=False`, numba's option for code that
# allocates nothing) and the helpers are inlined into it (numba IR inlining). Called, each of a record's eight
# varints and fields pushes the buffer's array struct on the stack; with the runtime, each use of an array also
# takes and drops a reference with an atomic instruction, the larger part of a decode's time. Inlining and
# dropping the runtime each make `_parse` markedly cheaper.
_F = TypeVar("_F", bound=Callable[..., Any])


def _without_runtime(*, inline: Literal["never", "always"] = "never") -> Callable[[_F], _F]:
    """`numba.njit` for code that allocates nothing, compiled without numba's runtime."""
    decorate: Callable[[_F], _F] = numba.njit(cache=True, nogil=True, inline=inline,
                                              _nrt=False)  # type: ignore[call-overload]  # not in numba's stubs
    return decorate


@_without_runtime(inline="always")
def _varint(buf: U8, pos: int, end: int) -> tuple[int, int]:
    """Kafka's zigzag varint at `pos` (Kafka's `ByteUtils.readVarlong`): (value, next position); position -1 if
    it runs past `end`, -2 if it is longer than 10 bytes."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if pos >= end:
            return 0, -1
        byte = np.uint64(buf[pos])
        pos += 1
        raw |= (byte & np.uint64(0x7F)) << shift
        if byte < np.uint64(0x80):
            return int(np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))), pos
        shift += np.uint64(7)
    return 0, -2


@_without_runtime(inline="always")
def _field(buf: U8, pos: int, end: int) -> tuple[int, int, int]:
    """A length-prefixed byte field: (start, length (-1: null), next position); next position < 0 on error."""
    length, pos = _varint(buf, pos, end)
    if pos < 0:
        return 0, 0, pos
    if length < -1 or (length > 0 and pos + length > end):
        return 0, 0, -1
    return pos, length, pos + max(length, 0)


@_without_runtime()
def _parse(buf: U8, starts: I64, ends: I64, counts: I64, base_offsets: I64, base_timestamps: I64,
           max_timestamps: I64, log_append: npt.NDArray[np.bool_], first: int, last: int, out: I64,
           key_offsets: npt.NDArray[np.int32], key_data: U8, value_offsets: npt.NDArray[np.int32],
           value_data: U8) -> tuple[int, int, int]:
    """Decode the records of every batch body `buf[starts[b]:ends[b]]` (`counts[b]` records each); those with offsets
    in `[first, last)` become rows of `out`: offset, timestamp, key start, key length, value start, value length,
    headers start, header count, timestamp type. Their keys and values are copied as they are met, in Arrow's binary
    layout (`key_offsets`/`key_data`, `value_offsets`/`value_data`; a null is empty): the copy brings each next
    record into the cache, so reading the records and gathering their bytes is one pass, not two. Every record is
    checked, in the range or not. Returns (rows written, error code, index of the failing batch)."""
    row = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    key_at = 0
    value_at = 0
    for b in range(len(starts)):
        pos = starts[b]
        end = ends[b]
        for _ in range(counts[b]):
            length, pos = _varint(buf, pos, end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            record_end = pos + length
            if length < 6 or record_end > end:
                return row, _OVERRUN, b
            pos += 1  # attributes: unused in v2
            ts_delta, pos = _varint(buf, pos, record_end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            offset_delta, pos = _varint(buf, pos, record_end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            key_start, key_length, pos = _field(buf, pos, record_end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            value_start, value_length, pos = _field(buf, pos, record_end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            header_count, pos = _varint(buf, pos, record_end)
            if pos < 0:
                return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            if header_count < 0 or header_count > length:
                return row, _BAD_COUNT, b
            headers_start = pos
            for _h in range(header_count):
                hk_start, hk_length, pos = _field(buf, pos, record_end)
                if pos < 0:
                    return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
                if hk_length < 0:
                    return row, _NULL_HEADER_KEY, b
                hv_start, hv_length, pos = _field(buf, pos, record_end)
                if pos < 0:
                    return row, _OVERRUN if pos == -1 else _LONG_VARINT, b
            if pos != record_end:
                return row, _LEFTOVER, b
            offset = base_offsets[b] + offset_delta
            if offset < first or offset >= last:
                continue
            out[row, 0] = offset
            out[row, 1] = max_timestamps[b] if log_append[b] else base_timestamps[b] + ts_delta
            out[row, 2] = key_start
            out[row, 3] = key_length
            out[row, 4] = value_start
            out[row, 5] = value_length
            out[row, 6] = headers_start
            out[row, 7] = header_count
            out[row, 8] = 1 if log_append[b] else 0  # the timestamp type: LogAppendTime or CreateTime
            if key_length > 0:
                _copy(key_data, key_at, buf, key_start, key_length)  # type: ignore[call-arg]
                key_at += key_length
            if value_length > 0:
                _copy(value_data, value_at, buf, value_start, value_length)  # type: ignore[call-arg]
                value_at += value_length
            row += 1
            key_offsets[row] = key_at
            value_offsets[row] = value_at
        if pos != end:
            return row, _LEFTOVER, b
    return row, _OK, 0


@intrinsic
def _copy(typingctx: Any, dst: Any, dst_at: Any, src: Any, src_at: Any, length: Any) -> tuple[Any, Any]:
    """`dst[dst_at:dst_at+length] = src[src_at:src_at+length]` as one memcpy (LLVM's intrinsic): numba's own
    slice copy goes byte by byte, ten times slower, and copying values is most of a decode."""
    del typingctx
    signature = types.void(dst, dst_at, src, src_at, length)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        dst_value, dst_at_value, src_value, src_at_value, length_value = args
        dst_array = context.make_array(sig.args[0])(context, builder, dst_value)
        src_array = context.make_array(sig.args[2])(context, builder, src_value)
        to = builder.gep(dst_array.data, [dst_at_value])
        source = builder.gep(src_array.data, [src_at_value])
        cgutils.raw_memcpy(builder, to, source, length_value, 1)  # type: ignore[no-untyped-call]
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(cache=True, nogil=True)
def _gather(buf: U8, starts: I64, lengths: I64) -> tuple[npt.NDArray[np.int32], U8]:
    """Arrow binary layout of the fields `buf[starts[i]:starts[i]+lengths[i]]` (length -1, null, as empty):
    (int32 offsets, n + 1 of them; the bytes end to end). `_parse` checked every field lies inside `buf`."""
    n = len(starts)
    offsets = np.empty(n + 1, np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        total += max(lengths[i], 0)
        offsets[i + 1] = total
    data = np.empty(total, np.uint8)
    at = 0
    for i in range(n):
        length = lengths[i]
        if length > 0:
            _copy(data, at, buf, starts[i], length)  # type: ignore[call-arg]  # numba passes typingctx
            at += length
    return offsets, data


@numba.njit(cache=True, nogil=True)
def _header_fields(buf: U8, starts: I64, counts: I64) -> I64:
    """For records whose headers start at `starts[i]` (`counts[i]` of them, already validated by `_parse`):
    one row per header: key start, key length, value start, value length."""
    out = np.empty((counts.sum(), 4), np.int64)
    row = 0
    for i in range(len(starts)):
        pos = starts[i]
        for _ in range(counts[i]):
            out[row, 0], out[row, 1], pos = _field(buf, pos, len(buf))
            out[row, 2], out[row, 3], pos = _field(buf, pos, len(buf))
            row += 1
    return out


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one fetched buffer held inside the wanted range."""

    keys: pa.Array  # binary
    values: pa.Array  # binary
    offsets: pa.Array  # int64
    timestamps_ms: pa.Array  # int64, Kafka milliseconds
    timestamp_types: pa.Array  # int32: 0 CreateTime, 1 LogAppendTime
    headers: pa.Array | None  # list<struct<key string, value binary>> when asked for
    next_offset: int  # where the next fetch starts: past the last complete batch, or `first` if none

    @property
    def rows(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True, slots=True)
class Scan:
    """The complete batches of a buffer, CRC-checked: (position, header) each, and the offset after the last."""

    batches: list[tuple[int, BatchHeader]]
    next_offset: int


def scan(buf: bytes | memoryview, first: int, *, check_crcs: bool = True) -> Scan:
    """Batch headers only: tells where the next fetch starts before the records are decoded. `check_crcs`
    False skips the CRC32C of each batch (the consumer option `check.crcs`); nothing else is checked less."""
    return Scan(*_batches(buf, first, check_crcs))


def _batches(buf: bytes | memoryview, first: int, check_crcs: bool = True
             ) -> tuple[list[tuple[int, BatchHeader]], int]:
    found: list[tuple[int, BatchHeader]] = []
    next_offset = first
    pos = 0
    while len(buf) - pos >= LOG_OVERHEAD:  # bounded: advances by a whole batch or stops
        batch_length = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True)
        if len(buf) - pos < batch_length + LOG_OVERHEAD:
            break  # the partial batch a byte limit cut: Kafka's consumer leaves it for the next fetch
        magic = buf[pos + _MAGIC_OFFSET] if len(buf) - pos > _MAGIC_OFFSET else MAGIC
        if magic != MAGIC:
            base = int.from_bytes(buf[pos:pos + 8], "big", signed=True)
            raise corrupt(f"the batch at offset {base} is in message format v{magic} (written before Kafka 0.11 "
                          "and never converted); the insync source reads v2 record batches only")
        header = parse_header(buf, pos)
        if check_crcs and not crc_is_valid(buf, pos, header):
            raise corrupt(f"CRC mismatch in batch at offset {header.base_offset} (position {pos})")
        if not 0 <= header.record_count <= limits.RECORDS_PER_BATCH_MAX:
            raise corrupt(f"record count {header.record_count} out of range in batch at offset "
                          f"{header.base_offset}")
        found.append((pos, header))
        next_offset = max(next_offset, header.next_offset)
        pos += header.size
    return found, next_offset


def decode(buf: bytes | memoryview, first: int, end: int, include_headers: bool, scanned: Scan | None = None,
           aborted: Sequence[AbortedTransaction] | None = None) -> Decoded:
    """The records of `buf` (a Fetch response's records) with offsets in `[first, end)`; see the module doc.
    `scanned`: `scan(buf, first)` if the caller already has it. `aborted`: a read_committed response's aborted
    transactions, whose batches are left out."""
    assert 0 <= first <= end, (first, end)
    batches, next_offset = (scanned.batches, scanned.next_offset) if scanned is not None else _batches(buf, first)
    if aborted:  # without aborted transactions read_committed drops only control batches, as below
        batches = committed_batches(buf, batches, aborted)
    data = [(pos, h) for pos, h in batches if not h.is_control and h.record_count > 0 and h.next_offset > first]
    # Compressed bodies are decompressed and appended after the fetched bytes, so one buffer holds them all.
    parts: list[bytes | memoryview] = [buf]
    size = len(buf)
    bodies: list[tuple[int, int]] = []
    with memoryview(buf) as view:
        for pos, h in data:
            body = view[pos + BATCH_HEADER_SIZE:pos + h.size]
            if h.compression is Compression.NONE:
                bodies.append((pos + BATCH_HEADER_SIZE, pos + h.size))
                continue
            plain = decompress(h.compression, body, limits.DECOMPRESSED_BATCH_BYTES_MAX)
            bodies.append((size, size + len(plain)))
            parts.append(plain)
            size += len(plain)
    whole = np.frombuffer(buf if len(parts) == 1 else b"".join(parts), np.uint8)
    counts = np.fromiter((h.record_count for _, h in data), np.int64, len(data))
    n = int(counts.sum())
    out = np.empty((n, 9), np.int64)
    key_offsets, value_offsets = np.empty(n + 1, np.int32), np.empty(n + 1, np.int32)
    # Keys and values together are smaller than the bytes that hold them; untouched capacity costs no memory.
    key_data, value_data = np.empty(len(whole), np.uint8), np.empty(len(whole), np.uint8)
    rows, error, failed = _parse(
        whole, np.fromiter((b[0] for b in bodies), np.int64, len(data)),
        np.fromiter((b[1] for b in bodies), np.int64, len(data)), counts,
        np.fromiter((h.base_offset for _, h in data), np.int64, len(data)),
        np.fromiter((h.base_timestamp for _, h in data), np.int64, len(data)),
        np.fromiter((h.max_timestamp for _, h in data), np.int64, len(data)),
        np.fromiter((h.timestamp_type == 1 for _, h in data), np.bool_, len(data)), first, end, out,
        key_offsets, key_data, value_offsets, value_data)
    if error != _OK:
        raise corrupt(f"malformed record in batch at offset {data[failed][1].base_offset}: {_ERRORS[error]}")
    found = out[:rows]
    stamp_types = found[:, 8].astype(np.int32)
    headers = _headers(whole, found) if include_headers else None
    return Decoded(keys=_arrow_binary(key_offsets[:rows + 1], key_data, found[:, 3]),
                   values=_arrow_binary(value_offsets[:rows + 1], value_data, found[:, 5]),
                   offsets=pa.array(found[:, 0]), timestamps_ms=pa.array(found[:, 1]),
                   timestamp_types=pa.array(stamp_types), headers=headers, next_offset=next_offset)


def _binary(buf: U8, starts: I64, lengths: I64) -> pa.Array:
    starts, lengths = np.ascontiguousarray(starts), np.ascontiguousarray(lengths)
    offsets, data = _gather(buf, starts, lengths)
    return _arrow_binary(offsets, data, lengths)


def _arrow_binary(offsets: npt.NDArray[np.int32], data: U8, lengths: I64) -> pa.Array:
    """An Arrow binary array of `len(offsets) - 1` values: `data[offsets[i]:offsets[i+1]]`, null where
    `lengths[i]` is -1."""
    assert int(offsets[-1]) < 2**31, "a fetch response is bounded well below Arrow's 2 GiB binary limit"
    nulls = lengths < 0
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    return pa.Array.from_buffers(pa.binary(), len(lengths), [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=int(nulls.sum()))


def _headers(buf: U8, rows: I64) -> pa.Array:
    counts = np.ascontiguousarray(rows[:, 7])
    fields = _header_fields(buf, np.ascontiguousarray(rows[:, 6]), counts)
    keys = _binary(buf, fields[:, 0], fields[:, 1]).view(pa.string())
    try:
        keys.validate(full=True)  # header keys are UTF-8 strings in Kafka: refuse bytes that are not
    except pa.ArrowInvalid as exc:
        raise corrupt(f"a record header key is not UTF-8: {exc}") from None
    structs = pa.StructArray.from_arrays([keys, _binary(buf, fields[:, 2], fields[:, 3])], fields=list(HEADER_TYPE))
    list_offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    # A record without headers has null headers, as in Spark's Kafka source (and librdkafka).
    return pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=pa.list_(HEADER_TYPE),
                                    mask=pa.array(counts == 0))
