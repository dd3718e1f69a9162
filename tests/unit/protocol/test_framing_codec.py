import datetime
import io

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i32

from insync.protocol.codec import (
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from insync.protocol.framing import FrameDecoder, FrameError, frame

SUPPORTED = {18: (0, 4)}


def api_versions_request(version: int, correlation_id: int = 7) -> bytes:
    schema = load_request_schema(18, version)
    body = schema(client_software_name="t", client_software_version="1") if version >= 3 else schema()
    return encode_request(body, correlation_id)


def test_frames_split_across_reads_and_batched() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    data = frame(b"a" * 10) + frame(b"b" * 20) + frame(b"c" * 8)
    frames = []
    for i in range(0, len(data), 3):
        frames += list(decoder.feed(data[i : i + 3]))
    assert frames == [b"a" * 10, b"b" * 20, b"c" * 8]
    assert decoder.buffered_bytes == 0


def test_oversized_and_undersized_frames_are_refused_before_buffering() -> None:
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        list(FrameDecoder(max_frame_bytes=100).feed(b"\x00\x00\x01\x00"))
    with pytest.raises(FrameError, match="smaller than a request header"):
        list(FrameDecoder(max_frame_bytes=100).feed(b"\x00\x00\x00\x02ab"))
    with pytest.raises(FrameError):
        list(FrameDecoder(max_frame_bytes=100).feed(b"\xff\xff\xff\xff"))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_decode_api_versions_every_version(version: int) -> None:
    payload = api_versions_request(version)[4:]
    request = decode_request(payload, SUPPORTED)
    assert (request.api_key, request.api_version, request.correlation_id) == (18, version, 7)
    assert request.flexible == (version >= 3)


def test_unsupported_version_carries_correlation_id() -> None:
    payload = api_versions_request(4, correlation_id=99)[4:]
    with pytest.raises(UnsupportedRequest) as info:
        decode_request(payload, {18: (0, 3)})
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (18, 4, 99)
    with pytest.raises(UnsupportedRequest):
        decode_request(payload, {})


def test_malformed_and_trailing_bytes() -> None:
    payload = api_versions_request(3)[4:]
    with pytest.raises(MalformedRequest, match="cannot parse"):
        decode_request(payload[:-3], SUPPORTED)
    # Kafka ignores bytes after a complete body; librdkafka relies on it (Metadata v13 "brokers only").
    assert decode_request(payload + b"\x00\x00", SUPPORTED).api_version == 3
    with pytest.raises(MalformedRequest, match="shorter than a request header"):
        decode_request(b"\x00\x12", SUPPORTED)


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    schema = load_response_schema(18, 3)
    body = schema(error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0))
    framed = encode_response(18, 3, 42, body)
    assert framed[4:8] == (42).to_bytes(4, "big")
    correlation_id, decoded = decode_response(18, 3, framed[4:])
    assert correlation_id == 42 and decoded == body


def test_flexible_response_round_trip_with_header_v1() -> None:
    schema = load_response_schema(3, 12)
    body = schema(throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c", controller_id=i32(1), topics=())
    framed = encode_response(3, 12, 5, body)
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, body)
    assert len(framed) == 4 + 4 + 1 + len(buffer.getvalue())  # size, correlation id, empty tagged fields
    assert decode_response(3, 12, framed[4:]) == (5, body)


def _fetch_response(version: int, records: list[object]) -> object:
    """A Fetch response of one topic with a partition per records value."""
    from insync import errors
    from insync.protocol.kio import build, code, nested, response_class

    cls = response_class(1, version)
    partitions = tuple(build(nested(cls, "PartitionData"), partition_index=i, error_code=code(errors.NONE),
                             high_watermark=100, last_stable_offset=100, log_start_offset=0,
                             aborted_transactions=(), preferred_read_replica=-1, records=r)
                       for i, r in enumerate(records))
    topic = build(nested(cls, "FetchableTopicResponse"), topic="t", partitions=partitions)
    return build(cls, throttle_time=datetime.timedelta(0), error_code=code(errors.NONE), session_id=0,
                 responses=(topic,))


@pytest.mark.parametrize("version", [4, 11, 12])
def test_response_parts_frame_the_same_bytes_and_keep_large_records_by_reference(version: int) -> None:
    from insync.protocol.codec import PART_MIN_BYTES, encode_response_parts

    large = bytes(range(256)) * (PART_MIN_BYTES // 256 + 3)
    records = [b"small", large, None, large[:PART_MIN_BYTES]]
    body = _fetch_response(version, records)
    parts = encode_response_parts(1, version, 9, body)
    assert b"".join(parts) == encode_response(1, version, 9, body)  # type: ignore[arg-type]
    # The two large values are the body's own objects, not copies; everything else is in bytes parts.
    assert [p for p in parts if len(p) >= PART_MIN_BYTES and p is large] == [large]
    assert sum(1 for p in parts if len(p) >= PART_MIN_BYTES) == 2
    correlation_id, decoded = decode_response(1, version, b"".join(parts)[4:])  # type: ignore[arg-type]
    assert correlation_id == 9
    assert [p.records for p in decoded.responses[0].partitions] == records
