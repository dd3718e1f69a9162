"""The four codecs of Kafka's record batches, bounded on the way in.

A v2 batch compresses its records section as one stream, with the codec in the low three bits of the batch
attributes. The formats are the ones Kafka's Java producer writes, so real consumers can read what we build:
gzip (one member); snappy (Java writes xerial framing, librdkafka a raw block: we read both and write xerial);
lz4 (a *frame* with independent blocks, since Kafka's `Lz4BlockInputStream` decompresses each on its own); zstd
(one frame).

Decompression never trusts the sender: output is bounded by `max_bytes` (a compressed bomb is rejected before it
is inflated past the bound), and every failure is an `InvalidRecordError(CORRUPT_MESSAGE)`, never a crash.
Snappy states its uncompressed length up front, checked before inflating; the others inflate into a buffer of
bounded capacity, grown geometrically up to the bound. `InvalidRecordError` and `Compression` live here, the
lowest layer, and `records` re-exports them.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from types import ModuleType

import cramjam

from insync import errors
from insync.errors import KafkaError, KafkaException


class Compression(IntEnum):
    """Kafka's compression codec ids (batch attributes bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class InvalidRecordError(KafkaException):
    """A record batch that a broker must refuse; `error` is the Kafka code to answer with. `record_errors` names
    the records at fault, (index in the batch, why), as Kafka's RecordValidationException does (KIP-467)."""

    def __init__(self, error: KafkaError, detail: str = "",
                 record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(error, detail)
        self.record_errors = record_errors


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version (both 1, as snappy-java writes)
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size, what Kafka's producer uses

_INITIAL_CAPACITY_BYTES = 64 * 1024
_EXPANSION_GUESS = 8  # typical compression ratios of log data fit in the first try
_GROWTH_FACTOR = 4
_GROWTH_STEPS_MAX = 64  # capacity * 4**64 exceeds any bound; the loop always ends at max_bytes first
_OVERFLOW_MESSAGE = "failed to write whole buffer"  # cramjam's error when the output buffer is full

_STREAM_CODECS: dict[Compression, ModuleType] = {
    Compression.GZIP: cramjam.gzip,
    Compression.LZ4: cramjam.lz4,
    Compression.ZSTD: cramjam.zstd,
}


def compress(codec: Compression, data: bytes | bytearray | memoryview) -> bytes:
    """`data` compressed with `codec`, in the format Kafka's Java producer writes."""
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.SNAPPY:
        return _compress_xerial(data)
    if codec is Compression.LZ4:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(bytes(data))  # the streaming API takes only bytes
        return bytes(compressor.finish())
    return bytes(_STREAM_CODECS[codec].compress(data))


def decompress(codec: Compression, data: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    """`data` inflated; raises InvalidRecordError(CORRUPT_MESSAGE) on garbage or past `max_bytes` of output."""
    assert max_bytes > 0
    if codec is Compression.NONE:
        _check_bound(len(data), max_bytes)
        return bytes(data)
    if codec is Compression.SNAPPY:
        if bytes(data[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC:
            return _decompress_xerial(data, max_bytes)
        return _decompress_snappy_block(data, max_bytes)
    return _decompress_stream(_STREAM_CODECS[codec], data, max_bytes)


def _corrupt(detail: str) -> InvalidRecordError:
    return InvalidRecordError(errors.CORRUPT_MESSAGE, detail)


def _check_bound(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise _corrupt(f"decompressed batch exceeds {max_bytes} bytes")


def _decompress_stream(codec: ModuleType, data: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    capacity = min(max_bytes, max(_INITIAL_CAPACITY_BYTES, len(data) * _EXPANSION_GUESS))
    for _ in range(_GROWTH_STEPS_MAX):
        out = bytearray(capacity)
        try:
            size: int = codec.decompress_into(data, out)
        except cramjam.DecompressionError as e:
            if _OVERFLOW_MESSAGE not in str(e):
                raise _corrupt(f"cannot decompress records: {e}") from None
            if capacity >= max_bytes:
                raise _corrupt(f"decompressed batch exceeds {max_bytes} bytes") from None
            capacity = min(max_bytes, capacity * _GROWTH_FACTOR)
            continue
        assert 0 <= size <= capacity
        del out[size:]
        return bytes(out)
    raise AssertionError("capacity growth must reach max_bytes within the step limit")


def _decompress_snappy_block(block: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    try:
        _check_bound(cramjam.snappy.decompress_raw_len(block), max_bytes)
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise _corrupt(f"cannot decompress snappy records: {e}") from None


def _compress_xerial(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _decompress_xerial(data: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size:
        raise _corrupt("truncated xerial snappy header")
    parts: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER.size
    # Bounded: every block advances pos by at least the 4-byte length prefix.
    while pos < len(view):
        if len(view) - pos < _XERIAL_BLOCK_LENGTH.size:
            raise _corrupt("truncated xerial snappy block length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or length > len(view) - pos:
            raise _corrupt(f"xerial snappy block of {length} bytes overruns the batch")
        part = _decompress_snappy_block(view[pos : pos + length], max_bytes - total)
        total += len(part)
        parts.append(part)
        pos += length
    assert pos == len(view)
    return b"".join(parts)
