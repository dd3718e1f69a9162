"""The hot path's Produce response writer gives kio's bytes exactly, for every version and any plain values."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from kio.schema.errors import ErrorCode

from insync.protocol import produce_response
from insync.protocol.codec import encode_response_parts, response_schema
from insync.protocol.kio import build, nested

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
ERROR_CODES = st.sampled_from([int(c) for c in ErrorCode])
PARTITION = st.tuples(I32, ERROR_CODES, I64, I64)


def kio_body(version: int, topics: list[Any]) -> Any:
    """The same response as kio entities, as `insync.wire.produce` builds them on its general path."""
    cls = response_schema(produce_response.PRODUCE_KEY, version)
    partition_cls, topic_cls = nested(cls, "PartitionProduceResponse"), nested(cls, "TopicProduceResponse")
    responses = tuple(
        build(topic_cls, name=topic, topic_id=topic, partition_responses=tuple(
            build(partition_cls, index=p[0], error_code=ErrorCode(p[1]), base_offset=p[2], log_append_time=None,
                  log_start_offset=p[3], record_errors=()) for p in partitions))
        for topic, partitions in topics)
    return build(cls, responses=responses, throttle_time=datetime.timedelta(0), node_endpoints=())


def frame_bytes(version: int, correlation_id: int, body: Any) -> bytes:
    return b"".join(bytes(part) for part in encode_response_parts(produce_response.PRODUCE_KEY, version,
                                                                  correlation_id, body))


@st.composite
def topics_for(draw: st.DrawFn, version: int) -> list[Any]:
    topic = st.uuids() if version >= produce_response.TOPIC_ID_FROM else st.text(max_size=40)
    return draw(st.lists(st.tuples(topic, st.lists(PARTITION, max_size=3)), max_size=3))


@pytest.mark.parametrize("version", produce_response.VERSIONS)
def test_same_bytes_as_kio(version: int) -> None:
    @settings(max_examples=60, deadline=None, database=None)
    @given(I32, topics_for(version))
    def check(correlation_id: int, topics: list[Any]) -> None:
        fast = produce_response.encode(version, topics)
        assert frame_bytes(version, correlation_id, fast) == frame_bytes(version, correlation_id,
                                                                         kio_body(version, topics))

    check()


def test_a_long_topic_name_takes_a_multi_byte_compact_length() -> None:
    topics = [("t" * 300, [(0, 0, 41, -1)]), (uuid.uuid4().hex, [(1, 6, -1, -1), (2, 0, 7, -1)])]
    for version in (8, 9, 12):
        assert frame_bytes(version, 3, produce_response.encode(version, topics)) == frame_bytes(
            version, 3, kio_body(version, topics))
