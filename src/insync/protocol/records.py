"""Kafka RecordBatch v2 (magic 2): a header view for the hot path, validation, and a builder/decoder for tools.

Layout (big-endian), as in Kafka's `DefaultRecordBatch`:

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8 | 17 crc uint32
    21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64 | 35 maxTimestamp int64
    43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32 | 57 recordsCount int32 | 61 records

The CRC32C covers bytes 21 to the end, so a leader stamps base offset and leader epoch in place without
recomputing it, as Kafka does. The produce/fetch path never touches records: one `struct.unpack_from` per batch
gives a `BatchHeader` and the CRC is one C call; only `decode_records` (consumers, tools) looks inside. Bad input
raises `InvalidRecordError` with the error a broker answers: CORRUPT_MESSAGE for structural damage,
MESSAGE_TOO_LARGE over `max.message.bytes`, INVALID_RECORD for what Kafka's `LogValidator` rejects.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from crc32c import crc32c

from insync import errors, limits
from insync.protocol.compression import Compression, InvalidRecordError, compress, decompress

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "BatchHeader",
    "Compression",
    "InvalidRecordError",
    "Record",
    "RecordSpec",
    "build_batch",
    "empty_batch",
    "rebuild_batch",
    "crc_is_valid",
    "decode_records",
    "iter_batches",
    "iter_records",
    "parse_header",
    "scan_valid_prefix",
    "stamp",
    "validate_batches",
    "validate_keys",
]

Buffer = bytes | bytearray | memoryview

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
MAGIC = 2

_LENGTH_OFFSET = 8
_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_ATTRIBUTES_OFFSET = 21
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiibI")  # the fields before the CRC range
_CRC_RANGE_HEADER = struct.Struct(">hiqqqhii")  # attributes .. records count
_BATCH_LENGTH = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
assert _HEADER.size == BATCH_HEADER_SIZE == _PREFIX.size + _CRC_RANGE_HEADER.size

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40  # the base timestamp is the batch's delete horizon (Kafka's log cleaner, KIP-534)
_INT32_MAX = 2**31 - 1
# A record is at least 7 bytes: length, attributes, timestamp delta, offset delta, key, value, header count.
_MIN_RECORD_BYTES = 7
_VARINT_BYTES_MAX = 10
_NO_TIMESTAMP = -1

_INVALID_RECORD = errors.BY_NAME["INVALID_RECORD"]


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61 fixed bytes of a v2 batch, in Kafka's field order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of this batch, base offset and length included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones (its base timestamp, once a clean has set it)."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps past int32 max to 0 as Kafka's `incrementSequence` does."""
        if self.base_sequence == -1:
            return -1
        if self.base_sequence > _INT32_MAX - self.last_offset_delta:
            return self.last_offset_delta - (_INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + self.last_offset_delta


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to build; a `None` timestamp takes the batch's base timestamp (or -1, Kafka's NO_TIMESTAMP)."""

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


def _corrupt(detail: str) -> InvalidRecordError:
    return InvalidRecordError(errors.CORRUPT_MESSAGE, detail)


# --- Header view (hot path) -------------------------------------------------------------------------------


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; the whole batch must lie inside `buf`. Raises CORRUPT_MESSAGE."""
    assert pos >= 0
    available = len(buf) - pos
    if available < BATCH_HEADER_SIZE:
        raise _corrupt(f"truncated batch header at position {pos}: {available} bytes")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise _corrupt(f"unsupported magic {header.magic} at position {pos} (only v2 batches are accepted)")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise _corrupt(f"batch length {header.batch_length} at position {pos} is below the v2 minimum")
    if header.size > available:
        raise _corrupt(f"truncated batch at position {pos}: needs {header.size} bytes, has {available}")
    if header.attributes & _COMPRESSION_MASK > Compression.ZSTD:
        raise _corrupt(f"unknown compression codec {header.attributes & _COMPRESSION_MASK} at position {pos}")
    return header


def crc_is_valid(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """Whether the stored CRC32C matches the bytes from the attributes to the end of the batch."""
    assert pos >= 0 and pos + header.size <= len(buf)
    with memoryview(buf) as view:
        return crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + header.size]) == header.crc


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every batch in `buf`; raises InvalidRecordError at the first bad or partial one."""
    pos = 0
    # Bounded: every step advances by a whole batch of at least BATCH_HEADER_SIZE bytes.
    while pos < len(buf):
        header = parse_header(buf, pos)
        if verify_crc and not crc_is_valid(buf, pos, header):
            raise _corrupt(f"CRC mismatch in batch at offset {header.base_offset} (position {pos})")
        yield pos, header
        pos += header.size


def scan_valid_prefix(
    buf: Buffer, *, start_offset: int | None = None
) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Recovery: the byte length of the leading run of complete, CRC-valid batches, and those batches.

    Stops without raising at the first truncated or corrupt batch. With `start_offset`, also stops at a batch
    whose base offset goes backwards (below `start_offset` for the first batch, below the previous batch's
    next offset after that).
    """
    batches: list[tuple[int, BatchHeader]] = []
    next_offset = start_offset
    pos = 0
    while pos < len(buf):  # bounded: every step advances by a whole batch
        try:
            header = parse_header(buf, pos)
        except InvalidRecordError:
            break
        if not crc_is_valid(buf, pos, header):
            break
        if next_offset is not None:
            if header.base_offset < next_offset:
                break
            next_offset = header.next_offset
        batches.append((pos, header))
        pos += header.size
    assert pos <= len(buf)
    return pos, batches


def stamp(buf: bytearray | memoryview, pos: int, *, base_offset: int, partition_leader_epoch: int) -> None:
    """Overwrite base offset and partition leader epoch in place; both lie outside the CRC, which stays valid."""
    assert pos >= 0 and pos + BATCH_HEADER_SIZE <= len(buf)
    assert buf[pos + _MAGIC_OFFSET] == MAGIC, "stamp() needs a parsed v2 batch at pos"
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def validate_batches(buf: Buffer, *, max_message_bytes: int, from_client: bool = True) -> list[BatchHeader]:
    """What a leader checks on a produce request's records before appending anything.

    Kafka's rules and codes, in Kafka's order (`ProduceRequest.validateRecords`, then
    `UnifiedLog.analyzeAndValidateRecords`, then `LogValidator.validateBatch`): exactly one complete v2 batch
    (none, more than one, or magic 0/1 -> INVALID_RECORD; truncated, bad length or unknown magic ->
    CORRUPT_MESSAGE); base offset 0 (INVALID_RECORD); size <= max_message_bytes (MESSAGE_TOO_LARGE); CRC
    (CORRUPT_MESSAGE); record count = last offset delta + 1 > 0, no control batch, a sequence whenever there is
    a producer id (INVALID_RECORD); CreateTime only (INVALID_TIMESTAMP). Returns the one header. A batch not
    `from_client` is a coordinator's (Kafka's AppendOrigin.COORDINATOR: markers, transactional offset commits),
    which skips the client-batch rules.
    """
    assert max_message_bytes > 0
    if len(buf) == 0:
        raise InvalidRecordError(_INVALID_RECORD, "produce request must have at least one record batch")
    if len(buf) > _MAGIC_OFFSET and buf[_MAGIC_OFFSET] in (0, 1):
        raise InvalidRecordError(_INVALID_RECORD, f"magic {buf[_MAGIC_OFFSET]}: produce needs v2 batches")
    header = parse_header(buf, 0)
    if header.size < len(buf):
        parse_header(buf, header.size)  # a damaged second batch is corrupt; a sound one is one too many
        raise InvalidRecordError(_INVALID_RECORD, "produce request must contain exactly one record batch")
    if header.base_offset != 0:
        raise InvalidRecordError(
            _INVALID_RECORD, f"base offset of a produced batch must be 0, not {header.base_offset}"
        )
    if header.size > max_message_bytes:
        raise InvalidRecordError(
            errors.MESSAGE_TOO_LARGE,
            f"batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}",
        )
    if not crc_is_valid(buf, 0, header):
        raise _corrupt("CRC mismatch in produced batch")
    if from_client:
        _validate_client_batch(header)
    return [header]


def _validate_client_batch(header: BatchHeader) -> None:
    if header.last_offset_delta < 0:
        raise InvalidRecordError(_INVALID_RECORD, f"invalid last offset delta {header.last_offset_delta}")
    if header.record_count <= 0:
        raise InvalidRecordError(_INVALID_RECORD, f"invalid record count {header.record_count}")
    if header.record_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            _INVALID_RECORD,
            f"record count {header.record_count} inconsistent with last offset delta {header.last_offset_delta}",
        )
    if header.is_control:
        raise InvalidRecordError(_INVALID_RECORD, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            _INVALID_RECORD,
            f"producer id {header.producer_id} with invalid base sequence {header.base_sequence}",
        )
    if header.timestamp_type == 1:
        raise InvalidRecordError(errors.INVALID_TIMESTAMP, "producers may not set LogAppendTime")


def validate_keys(buf: Buffer, topic_partition: str) -> None:
    """A compacted log keeps the last record of each key: a batch with a record without one is refused (Kafka's
    LogValidator: INVALID_RECORD, a record error naming each such record, and Kafka's summary)."""
    why = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    keyless = tuple((i, why) for i, record in enumerate(decode_records(buf)) if record.key is None)
    if keyless:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i, message in keyless[:3])
        raise InvalidRecordError(errors.BY_NAME["INVALID_RECORD"], "One or more records have been rejected due "
                                 f"to {len(keyless)} record errors in total, and only showing the first three "
                                 f"errors at most: [{shown}]", keyless)


# --- Records (consumers and tools) ------------------------------------------------------------------------


def decode_records(buf: Buffer, pos: int = 0) -> list[Record]:
    """Every record of the batch at `pos`, CRC-checked and decompressed; raises CORRUPT_MESSAGE."""
    header = parse_header(buf, pos)
    if not crc_is_valid(buf, pos, header):
        raise _corrupt(f"CRC mismatch in batch at offset {header.base_offset}")
    count = header.record_count
    if count < 0 or count > limits.RECORDS_PER_BATCH_MAX:
        raise _corrupt(f"record count {count} out of range")
    if count == 0:
        return []
    with memoryview(buf) as view, view[pos + BATCH_HEADER_SIZE : pos + header.size] as section:
        if header.compression is Compression.NONE:
            data = bytes(section)
        else:
            data = decompress(header.compression, section, limits.DECOMPRESSED_BATCH_BYTES_MAX)
    if count * _MIN_RECORD_BYTES > len(data):
        raise _corrupt(f"{count} records cannot fit in {len(data)} bytes")
    try:
        return _parse_records(data, header)
    except (IndexError, ValueError) as e:  # a length or varint that runs off the end, or a bad header key
        raise _corrupt(f"malformed record in batch at offset {header.base_offset}: {e}") from None


def iter_records(buf: Buffer) -> Iterator[Record]:
    """Every record of every data batch in `buf`, skipping control batches.

    Like Kafka's consumer, an incomplete batch at the end (a fetch response cut at its byte limit) ends the
    iteration quietly; a corrupt batch raises.
    """
    pos = 0
    while pos < len(buf) and not _is_partial_tail(buf, pos):  # bounded: advances by a whole batch
        header = parse_header(buf, pos)
        if not header.is_control:
            yield from decode_records(buf, pos)
        pos += header.size


def _is_partial_tail(buf: Buffer, pos: int) -> bool:
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return True
    batch_length: int = _BATCH_LENGTH.unpack_from(buf, pos + _LENGTH_OFFSET)[0]
    return remaining < batch_length + LOG_OVERHEAD


def _parse_records(data: bytes, header: BatchHeader) -> list[Record]:
    log_append_time = header.timestamp_type == 1
    records: list[Record] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = _read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise _corrupt(f"record length {length} overruns the batch")
        pos += 1  # attributes: unused in v2
        timestamp_delta, pos = _read_varint(data, pos)
        offset_delta, pos = _read_varint(data, pos)
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
        header_count, pos = _read_varint(data, pos)
        if header_count < 0 or header_count > length:
            raise _corrupt(f"invalid header count {header_count}")
        headers = []
        for _ in range(header_count):
            header_key, pos = _read_bytes(data, pos)
            if header_key is None:
                raise _corrupt("null record header key")
            header_value, pos = _read_bytes(data, pos)
            headers.append((header_key.decode("utf-8"), header_value))
        if pos != end:
            raise _corrupt(f"record declares {length} bytes but its fields take {length + pos - end}")
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    if pos != len(data):
        raise _corrupt(f"{len(data) - pos} bytes left after the last of {header.record_count} records")
    return records


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's `ByteUtils.readVarlong`) at `pos`: (value, position after it)."""
    byte = data[pos]
    if byte < 0x80:  # the common case: small lengths and deltas
        return (byte >> 1) ^ -(byte & 1), pos + 1
    raw = byte & 0x7F
    for shift in range(7, 7 * _VARINT_BYTES_MAX, 7):
        pos += 1
        byte = data[pos]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + 1
    raise _corrupt("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(data):
        raise _corrupt(f"field length {length} overruns the batch")
    return data[pos : pos + length], pos + length


# --- Builder (tests and tools) ----------------------------------------------------------------------------


def build_batch(
    records: Sequence[RecordSpec | tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: Compression = Compression.NONE,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    timestamp_type: int = 0,
    is_control: bool = False,
) -> bytes:
    """One v2 batch holding `records` at consecutive offsets from `base_offset`, with a valid CRC.

    Without timestamps (neither `base_timestamp` nor per record) records carry -1, Kafka's NO_TIMESTAMP: this
    module never reads the clock, so pass `base_timestamp=now_ms` for realistic data.
    """
    assert len(records) > 0, "a built batch holds at least one record"
    assert len(records) <= limits.RECORDS_PER_BATCH_MAX
    assert timestamp_type in (0, 1)
    specs = [r if isinstance(r, RecordSpec) else RecordSpec(key=r[0], value=r[1]) for r in records]
    default_timestamp = _NO_TIMESTAMP if base_timestamp is None else base_timestamp
    timestamps = [default_timestamp if s.timestamp is None else s.timestamp for s in specs]
    first_timestamp = timestamps[0] if base_timestamp is None else base_timestamp
    body = bytearray()
    for offset_delta, (spec, timestamp) in enumerate(zip(specs, timestamps, strict=True)):
        _write_record(body, spec, offset_delta, timestamp - first_timestamp)
    attributes = (
        compression
        | (_TIMESTAMP_TYPE_BIT if timestamp_type else 0)
        | (_TRANSACTIONAL_BIT if is_transactional else 0)
        | (_CONTROL_BIT if is_control else 0)
    )
    crc_range = _CRC_RANGE_HEADER.pack(
        attributes,
        len(specs) - 1,
        first_timestamp,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(specs),
    ) + compress(compression, body)
    batch_length = _PREFIX.size - LOG_OVERHEAD + len(crc_range)
    prefix = _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, crc32c(crc_range))
    return prefix + crc_range


def rebuild_batch(header: BatchHeader, records: Sequence[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch `header` with only `records` (some of its own) in it, as Kafka's cleaner rebuilds one: base and
    last offset, producer fields, leader epoch and compression kept; with `delete_horizon_ms` the base timestamp
    becomes the delete horizon and its attribute bit is set (record timestamps stay as they were)."""
    assert records and all(header.base_offset <= r.offset <= header.last_offset for r in records), header
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    body = bytearray()
    for record in records:
        delta = 0 if header.timestamp_type == 1 else record.timestamp - base_timestamp
        _write_record(body, RecordSpec(record.key, record.value, record.headers), record.offset - header.base_offset,
                      delta)
    attributes = header.attributes & ~_DELETE_HORIZON_BIT | (_DELETE_HORIZON_BIT if delete_horizon_ms is not None else 0)
    max_timestamp = header.max_timestamp if header.timestamp_type == 1 else max(r.timestamp for r in records)
    return _assemble(header, attributes, base_timestamp, max_timestamp, len(records),
                     compress(header.compression, body))


def empty_batch(header: BatchHeader) -> bytes:
    """The header of batch `header` with no records: what Kafka's cleaner keeps of a batch that holds a producer's
    last sequence, or ends a cleaning round (`DefaultRecordBatch.writeEmptyHeader`)."""
    attributes = header.attributes & ~_COMPRESSION_MASK
    return _assemble(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _assemble(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int, count: int,
              body: bytes) -> bytes:
    crc_range = _CRC_RANGE_HEADER.pack(attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                                       header.producer_id, header.producer_epoch, header.base_sequence, count) + body
    batch_length = _PREFIX.size - LOG_OVERHEAD + len(crc_range)
    return _PREFIX.pack(header.base_offset, batch_length, header.partition_leader_epoch, MAGIC,
                        crc32c(crc_range)) + crc_range


def _write_record(out: bytearray, spec: RecordSpec, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused in v2
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, spec.key)
    _write_bytes(body, spec.value)
    _write_varint(body, len(spec.headers))
    for header_key, header_value in spec.headers:
        _write_bytes(body, header_key.encode("utf-8"))
        _write_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def _write_varint(out: bytearray, value: int) -> None:
    assert -(2**63) <= value < 2**63
    raw = (value << 1) ^ (value >> 63)  # zigzag, as Kafka's ByteUtils.writeVarlong
    while raw >= 0x80:  # at most 10 bytes for a 64-bit value
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
        return
    _write_varint(out, len(value))
    out += value
