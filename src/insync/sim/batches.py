"""The record batches simulated producers write, and how the checker recognises them again.

A batch's identity is `(producer_id, base_sequence)` in its v2 header: the header lies inside the CRC, survives
stamping by the leader and replication byte for byte, and reading it is one `struct` unpack, so the checker
never decodes records. The records themselves carry unique keys and values (`p<producer>-s<sequence>`) so that
a person (or `decode_records`) reading a replica's log can match them to the producer's history.
"""

from __future__ import annotations

from collections.abc import Iterator

from insync.protocol.records import RecordSpec, build_batch, iter_batches
from insync.sim.history import BatchId


def make_batch(producer_id: int, base_sequence: int, record_count: int, value_bytes: int, now_ms: int) -> bytes:
    assert producer_id >= 0 and base_sequence >= 0 and record_count >= 1, (producer_id, base_sequence)
    pad = b"." * max(0, value_bytes - 16)
    records = [
        RecordSpec(key=b"p%d-s%d" % (producer_id, base_sequence + i), value=b"v%d-%d" % (producer_id, base_sequence + i) + pad)
        for i in range(record_count)
    ]
    return build_batch(records, base_timestamp=now_ms, producer_id=producer_id, producer_epoch=0,
                       base_sequence=base_sequence)


def batch_ids(data: bytes | memoryview) -> Iterator[tuple[int, int, BatchId]]:
    """(base_offset, last_offset, identity) of every batch in `data`, without verifying CRCs again."""
    for _, header in iter_batches(data, verify_crc=False):
        yield header.base_offset, header.last_offset, (header.producer_id, header.base_sequence)
