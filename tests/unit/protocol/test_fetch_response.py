"""The hot path's Fetch response writer gives kio's bytes exactly, for every version and any plain values."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from kio.schema.errors import ErrorCode

from insync.protocol import fetch_response
from insync.protocol.codec import PART_MIN_BYTES, encode_response_parts, response_schema
from insync.protocol.kio import build, nested

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
ERROR_CODES = st.sampled_from([int(c) for c in ErrorCode])
RECORDS = st.one_of(st.none(), st.binary(max_size=300))
PARTITION = st.tuples(I32, ERROR_CODES, I64, I64, I64, RECORDS)


def kio_body(version: int, error_code: int, session_id: int, topics: list[Any], read_committed: bool = False) -> Any:
    """The same response as kio entities, as `insync.wire.fetch` builds them."""
    cls = response_schema(fetch_response.FETCH_KEY, version)
    partition_cls, topic_cls = nested(cls, "PartitionData"), nested(cls, "FetchableTopicResponse")
    responses = tuple(
        build(topic_cls, topic=topic, topic_id=topic, partitions=tuple(
            build(partition_cls, partition_index=p[0], error_code=ErrorCode(p[1]), high_watermark=p[2],
                  last_stable_offset=p[3], log_start_offset=p[4],
                  aborted_transactions=() if read_committed else None,
                  preferred_read_replica=-1, records=p[5]) for p in partitions))
        for topic, partitions in topics)
    return build(cls, throttle_time=datetime.timedelta(0), error_code=ErrorCode(error_code), session_id=session_id,
                 responses=responses)


def frame_bytes(version: int, correlation_id: int, body: Any) -> bytes:
    return b"".join(bytes(part) for part in encode_response_parts(fetch_response.FETCH_KEY, version, correlation_id,
                                                                  body))


@st.composite
def topics_for(draw: st.DrawFn, version: int) -> list[Any]:
    by_id = version >= fetch_response.TOPIC_ID_FROM
    topic = st.uuids() if by_id else st.text(max_size=40)
    return draw(st.lists(st.tuples(topic, st.lists(PARTITION, max_size=3)), max_size=3))


@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("version", fetch_response.VERSIONS)
def test_same_bytes_as_kio(version: int, read_committed: bool) -> None:
    """Aborted transactions are null, or an empty list for a READ_COMMITTED consumer (as Kafka answers)."""
    @settings(max_examples=60, deadline=None, database=None)
    @given(I32, ERROR_CODES, I32, topics_for(version))
    def check(correlation_id: int, error_code: int, session_id: int, topics: list[Any]) -> None:
        fast = fetch_response.encode(version, error_code if version >= 7 else 0, session_id if version >= 7 else 0,
                                     topics, read_committed)
        expected = kio_body(version, error_code, session_id, topics, read_committed)
        assert frame_bytes(version, correlation_id, fast) == frame_bytes(version, correlation_id, expected)

    check()


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_large_records_are_sent_uncopied(version: int) -> None:
    records = bytes(range(256)) * (PART_MIN_BYTES // 256 + 1)
    topic = uuid.uuid4() if version >= fetch_response.TOPIC_ID_FROM else "orders"
    topics = [(topic, [(0, 0, 10, 10, 0, records), (1, 0, 5, 5, 0, b"")])]
    parts = encode_response_parts(fetch_response.FETCH_KEY, version, 7, fetch_response.encode(version, 0, 0, topics))
    assert any(part is records for part in parts)
    assert b"".join(bytes(p) for p in parts) == frame_bytes(version, 7, kio_body(version, 0, 0, topics))
