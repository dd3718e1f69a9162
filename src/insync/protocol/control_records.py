"""Transaction control records, as the log holds them and read_committed consumers meet them: Kafka's
EndTransactionMarker (a COMMIT or ABORT control batch a partition leader appends for the coordinator), and the
aborted transactions a read_committed Fetch lists so that a consumer can skip their records (Kafka's AbortedTxn:
producer id, first offset, and the offset of the ABORT marker). The replication layer's aborted-transaction index
and the log cleaner both read them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from insync.protocol.records import RecordSpec, build_batch, decode_records

ABORT, COMMIT = 0, 1  # Kafka's ControlRecordType for transaction markers
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of its ABORT marker


def marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                 timestamp_ms: int) -> bytes:
    """The control batch a partition leader appends for WriteTxnMarkers (Kafka's EndTransactionMarker)."""
    assert producer_id < 0 or producer_epoch >= 0, (producer_id, producer_epoch)  # a negative id: no producer
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch([RecordSpec(key=key, value=value)], base_timestamp=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, is_transactional=True, is_control=True)


def marker_type(batch: bytes | memoryview, pos: int = 0) -> int | None:
    """COMMIT or ABORT for a control batch at `pos` holding a transaction marker, None for another control
    record (Kafka's leader-change records)."""
    marker = marker_info(batch, pos)
    return None if marker is None else marker[0]


def marker_info(batch: bytes | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(COMMIT or ABORT, coordinator epoch) of a control batch at `pos` holding a transaction marker, None for
    another control record; the epoch is -1 in a marker whose value is too short to hold one."""
    records = decode_records(batch, pos)
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    _, kind = _CONTROL_KEY.unpack_from(records[0].key, 0)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value
    epoch = _MARKER_VALUE.unpack_from(value, 0)[1] if value is not None and len(value) >= _MARKER_VALUE.size else -1
    return int(kind), int(epoch)
