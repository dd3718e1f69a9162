"""The record batches simulated producers write, and how the checker recognises them again.

A batch's identity is `(producer_id, base_sequence)` in its v2 header: the header lies inside the CRC, survives
stamping by the leader and replication byte for byte, and reading it is one `struct` unpack, so the checker
never decodes records. The records themselves carry unique keys and values (`p<producer>-s<sequence>`) so that
a person (or `decode_records`) reading a replica's log can match them to the producer's history.

Producers make thousands of batches per simulated second, so `make_batch` encodes them itself instead of going
through `protocol.records.build_batch` record by record: every record has timestamp delta 0 and no headers,
which leaves only the offset delta, key and value to vary. The bytes are identical to `build_batch`'s (a test
checks it), so brokers see exactly what a Kafka producer would send.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from crc32c import crc32c

from insync.protocol.records import LOG_OVERHEAD, MAGIC, iter_batches
from insync.sim.history import BatchId

_CRC_RANGE_HEADER = struct.Struct(">hiqqqhii")  # attributes .. records count, as in protocol.records
_PREFIX = struct.Struct(">qiibI")  # base offset, length, partition leader epoch, magic, crc
_VARINTS = 1 << 14
RECORDS_PER_BATCH_MAX = _VARINTS


def _zigzag_varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    for _ in range(10):
        if zigzag < 0x80:
            out.append(zigzag)
            return bytes(out)
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    raise AssertionError(value)


_VARINT = [_zigzag_varint(v) for v in range(_VARINTS)]


_TRANSACTIONAL = 0x10  # the attributes bit of a transactional batch


def make_batch(producer_id: int, base_sequence: int, record_count: int, value_bytes: int, now_ms: int,
               producer_epoch: int = 0, transactional: bool = False) -> bytes:
    """One v2 batch (no compression, CreateTime `now_ms`) of `record_count` records with unique keys/values; a
    `transactional` one belongs to the open transaction of `producer_id` in `producer_epoch`."""
    assert producer_id >= 0 and base_sequence >= 0 and producer_epoch >= 0, (producer_id, base_sequence)
    assert 1 <= record_count <= RECORDS_PER_BATCH_MAX, record_count
    pad = b"." * max(0, value_bytes - 16)
    varint = _VARINT
    records = []
    for delta in range(record_count):
        key = b"p%d-s%d" % (producer_id, base_sequence + delta)
        value = b"v%d-%d" % (producer_id, base_sequence + delta) + pad
        body = b"".join((b"\x00\x00", varint[delta], varint[len(key)], key, varint[len(value)], value, b"\x00"))
        records.append(varint[len(body)] + body)
    attributes = _TRANSACTIONAL if transactional else 0
    crc_range = _CRC_RANGE_HEADER.pack(attributes, record_count - 1, now_ms, now_ms, producer_id, producer_epoch,
                                       base_sequence, record_count) + b"".join(records)
    batch_length = _PREFIX.size - LOG_OVERHEAD + len(crc_range)
    return _PREFIX.pack(0, batch_length, -1, MAGIC, crc32c(crc_range)) + crc_range


def batch_ids(data: bytes | memoryview) -> Iterator[tuple[int, int, BatchId]]:
    """(base_offset, last_offset, identity) of every batch in `data`, without verifying CRCs again."""
    for _, header in iter_batches(data, verify_crc=False):
        yield header.base_offset, header.last_offset, (header.producer_id, header.base_sequence)
