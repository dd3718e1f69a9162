"""Request and response bodies on the wire, through kio, sans-IO.

A request header's version follows from the request's flexibility (kio's `__header_schema__`). `decode_request`
peeks at api key, version and correlation id with one `struct` read, checks them against the broker's table,
then lets kio parse header and body, giving a `DecodedRequest` or a typed error the server turns into Kafka's
behaviour: `UnsupportedRequest` (ApiVersions answers error 35 with a v0 body, anything else closes the
connection) or `MalformedRequest` (the connection is closed). Trailing bytes after a complete body are ignored,
as Kafka does: librdkafka 2.x sends a Metadata v13 whose empty topic list leaves three extra bytes.
`encode_response` writes the response header (v0 for ApiVersions and non-flexible responses, else v1) and body,
framed; kio writes tagged fields only when they differ from their defaults, which old librdkafka (kcat) needs.
`encode_response_parts` writes the same frame as parts, a large records field being a part of its own, so a
Fetch response's records go from the log's read to the socket uncopied. A body may also come already written,
as an `EncodedBody` (`insync.protocol.fetch_response`): then only the header is written in front of its parts.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from insync.protocol.framing import frame
from insync.protocol.request_bounds import check_arrays

API_VERSIONS_KEY = 18
_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
# A bytes value at least this long becomes a part of its own in `encode_response_parts` instead of being copied.
PART_MIN_BYTES = 64 * 1024

SupportedVersions = Mapping[int, tuple[int, int]]
# kio resolves a schema class by importing its dotted path on every call (`pkgutil.resolve_name`), a visible share
# of a broker's CPU per small request. kio has 625 schemas (api, version, kind); this bounds the caches above that.
SCHEMA_CACHE_MAX = 1024
request_schema = functools.lru_cache(maxsize=SCHEMA_CACHE_MAX)(load_request_schema)
response_schema = functools.lru_cache(maxsize=SCHEMA_CACHE_MAX)(load_response_schema)


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity

    @property
    def flexible(self) -> bool:
        return bool(self.body.__flexible__)


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A request or response body already written: its parts in order, as `encode_response_parts` (or
    `encode_request`, for a request) sends them."""

    api_key: int
    api_version: int
    flexible: bool
    parts: list[Buffer]
    is_request: bool = False


_HEADER_V0 = struct.Struct(">i")  # correlation id
_HEADER_V1 = struct.Struct(">ib")  # correlation id, no tagged fields
_REQUEST_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length


class UnsupportedRequest(Exception):
    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequest(Exception):
    def __init__(self, reason: str, correlation_id: int | None = None) -> None:
        super().__init__(reason)
        self.correlation_id = correlation_id


def peek(frame_bytes: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame without parsing the rest."""
    if len(frame_bytes) < _PEEK.size:
        raise MalformedRequest(f"request of {len(frame_bytes)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame_bytes, 0)
    return int(api_key), int(api_version), int(correlation_id)


def decode_request(frame_bytes: bytes, supported: SupportedVersions) -> DecodedRequest:
    api_key, api_version, correlation_id = peek(frame_bytes)
    versions = supported.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedRequest(api_key, api_version, correlation_id)
    schema = request_schema(api_key, api_version)
    try:
        header, header_size = entity_reader(schema.__header_schema__)(frame_bytes, 0)
        check_arrays(frame_bytes, header_size, schema)  # kio's reader would abort the process on a huge count
        body, body_size = entity_reader(schema)(frame_bytes, header_size)
    except Exception as exc:  # kio raises a variety of errors on garbage; all mean the same here
        raise MalformedRequest(f"cannot parse {schema.__name__} v{api_version}: {exc!r}", correlation_id) from None
    assert header_size + body_size <= len(frame_bytes), "kio read past the frame"
    return DecodedRequest(api_key, api_version, correlation_id, header.client_id, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A framed response: header (v0 for ApiVersions and non-flexible bodies, else v1) and body."""
    return b"".join(encode_response_parts(api_key, api_version, correlation_id, body))


Buffer = bytes | bytearray | memoryview


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: Any) -> list[Buffer]:
    """The frame of `encode_response` as parts to send in order (module docstring): `bytes` the writer built, and
    each large records value of `body` as it is. The first part starts with the frame's size."""
    if isinstance(body, EncodedBody):
        return _framed_body(api_key, correlation_id, body)
    assert body.__api_key__ == api_key, (body, api_key)
    parts = Parts()
    sink: Any = parts  # kio's writers only call write()
    if api_key == API_VERSIONS_KEY or not body.__flexible__:
        entity_writer(ResponseHeaderV0)(sink, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    else:
        entity_writer(ResponseHeaderV1)(sink, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    entity_writer(type(body))(sink, body)
    return parts.written()


def _framed_body(api_key: int, correlation_id: int, body: EncodedBody) -> list[Buffer]:
    assert body.api_key == api_key and api_key != API_VERSIONS_KEY and body.parts, (body.api_key, api_key)
    assert not body.is_request, body.api_key
    header = _HEADER_V1.pack(correlation_id, 0) if body.flexible else _HEADER_V0.pack(correlation_id)
    size = len(header) + sum(len(part) for part in body.parts)
    first = body.parts[0]
    if len(first) >= PART_MIN_BYTES:  # a records part: sent as it is, never copied
        return [_SIZE.pack(size) + header, *body.parts]
    return [_SIZE.pack(size) + header + first, *body.parts[1:]]


class Parts:
    """A write target that keeps large values by reference: kio writes a records field as its length and then
    `write(value)`, so the value arrives here whole and is kept as a part instead of copied (so does
    `fetch_response`). With `framed`, the frame's size opens the first part."""

    def __init__(self, framed: bool = True) -> None:
        self._parts: list[Buffer] = []
        self._framed = framed
        self._chunk = bytearray(_SIZE.size if framed else 0)  # the frame's size goes in front, once it is known
        self._size = 0  # bytes after the size prefix

    def write(self, data: Buffer) -> int:
        size = len(data)
        self._size += size
        if size < PART_MIN_BYTES:
            self._chunk += data
            return size
        if self._chunk:
            self._parts.append(bytes(self._chunk))
            self._chunk = bytearray()
        self._parts.append(data)
        return size

    def written(self) -> list[Buffer]:
        """Every part written (at least one), the first opening with the frame's size when `framed`."""
        if self._chunk or not self._parts:
            self._parts.append(bytes(self._chunk))
            self._chunk = bytearray()
        if self._framed:
            first = self._parts[0]
            assert isinstance(first, bytes) and len(first) >= _SIZE.size, "the size prefix opens the first part"
            self._parts[0] = _SIZE.pack(self._size) + first[_SIZE.size:]
        return self._parts


def request_key(body: Any) -> tuple[int, int]:
    """(api key, api version) of a request body: a kio entity or an `EncodedBody`."""
    if isinstance(body, EncodedBody):
        return body.api_key, body.api_version
    return int(body.__api_key__), int(body.__version__)


def encode_request(body: Any, correlation_id: int, client_id: str | None = "insync") -> bytes:
    """A framed request (used by insync's own clients: followers, tools, tests); `body` a kio entity or an
    `EncodedBody` (a follower's Fetch, `insync.protocol.fetch_request`)."""
    if isinstance(body, EncodedBody):
        return _framed_request(body, correlation_id, client_id)
    header_schema = body.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_schema)(buffer, header_schema(
        request_api_key=body.__api_key__, request_api_version=body.__version__,
        correlation_id=i32(correlation_id), client_id=client_id))
    entity_writer(type(body))(buffer, body)
    return frame(buffer.getvalue())


def _framed_request(body: EncodedBody, correlation_id: int, client_id: str | None) -> bytes:
    """Request header v2 (flexible) or v1: key, version, correlation id, client id as a nullable int16-length
    string (never compact, even in v2), and v2's empty tagged fields; then the body."""
    assert body.is_request, body.api_key
    name = b"" if client_id is None else client_id.encode()
    header = _REQUEST_HEADER.pack(body.api_key, body.api_version, correlation_id, len(name) if client_id is not None
                                  else -1) + name + (b"\x00" if body.flexible else b"")
    return frame(header + b"".join(body.parts))


def decode_response(api_key: int, api_version: int, payload: bytes | memoryview) -> tuple[int, Any]:
    """(correlation id, body) of a response payload (without its size prefix)."""
    schema = response_schema(api_key, api_version)
    header_schema = ResponseHeaderV0 if api_key == API_VERSIONS_KEY or not schema.__flexible__ else ResponseHeaderV1
    try:
        header, header_size = entity_reader(header_schema)(payload, 0)
        body, _ = entity_reader(schema)(payload, header_size)
    except Exception as exc:
        raise MalformedRequest(f"cannot parse {schema.__name__} v{api_version}: {exc!r}") from None
    return int(header.correlation_id), body  # type: ignore[attr-defined]
