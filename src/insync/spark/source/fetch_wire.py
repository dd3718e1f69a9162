"""Fetch responses (v4 to v12) read straight off the received bytes, records left where they are.

kio parses a response into entities and copies every bytes field out of the buffer; for a Fetch response that is
megabytes of records, copied once more before `arrow_records` gathers the values it wants. The Spark source's
tasks read Fetch responses at hundreds of megabytes a second, so their records are taken here as a `memoryview`
into the receive buffer instead: no copy. Everything else of a response is small and read field by field.

Layout (Kafka's FetchResponse.json): header (correlation id; v12 adds tagged fields), throttle time, v7+ error
code and session id, then topics → partitions: index, error, high watermark, last stable offset, v5+ log start
offset, aborted transactions, v11+ preferred read replica, records. v12 is flexible: compact arrays, strings
and bytes (unsigned varint length + 1) and tagged fields closing every structure (v12 puts diverging_epoch,
current_leader and snapshot_id there; they are skipped). A response that does not parse raises
`MalformedResponse`, naming where.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

FLEXIBLE_FROM = 12
VERSIONS = range(4, 13)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VARINT_BYTES_MAX = 5


class MalformedResponse(ValueError):
    """The bytes are not a Fetch response of the version asked for."""


@dataclass(frozen=True, slots=True)
class PartitionView:
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int  # -1 before v5
    records: memoryview  # into the response's buffer: valid as long as that buffer is not reused
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] | None = None  # (producer id, first offset) each


@dataclass(frozen=True, slots=True)
class FetchView:
    correlation_id: int
    error_code: int  # 0 before v7
    partitions: list[PartitionView]


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos = buf, 0

    def _take(self, size: int, what: str) -> int:
        at = self.pos
        if size < 0 or at + size > len(self.buf):
            raise MalformedResponse(f"{what} at byte {at} runs past the end ({len(self.buf)} bytes)")
        self.pos = at + size
        return at

    def int16(self) -> int:
        return int(_I16.unpack_from(self.buf, self._take(2, "an int16"))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self.buf, self._take(4, "an int32"))[0])

    def int64(self) -> int:
        return int(_I64.unpack_from(self.buf, self._take(8, "an int64"))[0])

    def uvarint(self) -> int:
        value = 0
        for i in range(_VARINT_BYTES_MAX):
            byte = self.buf[self._take(1, "a varint")]
            value |= (byte & 0x7F) << (7 * i)
            if byte < 0x80:
                return value
        raise MalformedResponse(f"a varint at byte {self.pos} is longer than {_VARINT_BYTES_MAX} bytes")

    def count(self, flexible: bool, what: str) -> int:
        """An array's length (compact: varint n+1); -1 for null."""
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < -1 or n > len(self.buf) - self.pos:  # every element takes a byte at least
            raise MalformedResponse(f"{what} count {n} at byte {self.pos} is impossible")
        return n

    def view(self, size: int, what: str) -> memoryview:
        at = self._take(size, what)
        return self.buf[at:at + size]

    def string(self, flexible: bool) -> str:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size < 0:
            raise MalformedResponse(f"a null topic name at byte {self.pos}")
        at = self.pos
        try:
            return str(self.view(size, "a string"), "utf-8")
        except UnicodeDecodeError:
            raise MalformedResponse(f"the string at byte {at} is not UTF-8") from None

    def nullable_bytes(self, flexible: bool) -> memoryview:
        size = self.uvarint() - 1 if flexible else self.int32()
        return self.buf[0:0] if size < 0 else self.view(size, "records")

    def skip_tagged_fields(self) -> None:
        n = self.uvarint()
        if n > len(self.buf) - self.pos:  # every field takes two bytes at least
            raise MalformedResponse(f"{n} tagged fields at byte {self.pos} is impossible")
        for _ in range(n):
            self.uvarint()  # tag
            self._take(self.uvarint(), "a tagged field")


def _aborted_transactions(c: _Cursor, flexible: bool) -> tuple[tuple[int, int], ...] | None:
    count = c.count(flexible, "aborted transactions")
    if count < 0:
        return None
    found = []
    for _ in range(count):  # bounded: `count` checked the bytes left
        found.append((c.int64(), c.int64()))
        if flexible:
            c.skip_tagged_fields()
    return tuple(found)


def parse(payload: memoryview, version: int) -> FetchView:
    """The Fetch response of `version` in `payload` (the frame without its size prefix)."""
    if version not in VERSIONS:
        raise MalformedResponse(f"Fetch v{version} is not read here (v{VERSIONS[0]} to v{VERSIONS[-1]})")
    flexible = version >= FLEXIBLE_FROM
    c = _Cursor(payload)
    correlation_id = c.int32()
    if flexible:
        c.skip_tagged_fields()
    c.int32()  # throttle time
    error_code = 0
    if version >= 7:
        error_code = c.int16()
        c.int32()  # session id
    partitions: list[PartitionView] = []
    for _ in range(max(0, c.count(flexible, "topics"))):  # bounded by the bytes left
        topic = c.string(flexible)
        for _ in range(max(0, c.count(flexible, "partitions"))):
            index, error, high_watermark = c.int32(), c.int16(), c.int64()
            last_stable_offset = c.int64()
            log_start = c.int64() if version >= 5 else -1
            aborted = _aborted_transactions(c, flexible)
            if version >= 11:
                c.int32()  # preferred read replica
            records = c.nullable_bytes(flexible)
            if flexible:
                c.skip_tagged_fields()
            partitions.append(PartitionView(topic, index, error, high_watermark, log_start, records,
                                            last_stable_offset, aborted))
        if flexible:
            c.skip_tagged_fields()
    if flexible:
        c.skip_tagged_fields()
    return FetchView(correlation_id, error_code, partitions)
