"""A follower's Fetch request written with struct gives kio's bytes exactly, header included."""

from __future__ import annotations

import datetime
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from insync.protocol import fetch_request
from insync.protocol.codec import encode_request, request_key
from insync.protocol.kio import build, nested, request_class

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
PARTITION = st.tuples(I32, I32, I64, I32, I64, I32)
TOPICS = st.lists(st.tuples(st.uuids(), st.lists(PARTITION, max_size=3)), max_size=3)
FORGOTTEN = st.lists(st.tuples(st.uuids(), st.lists(I32, max_size=3)), max_size=3)


def kio_body(version: int, replica_id: int, replica_epoch: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
             topics: list[Any], session_id: int, session_epoch: int, forgotten: list[Any]) -> Any:
    cls = request_class(fetch_request.FETCH_KEY, version)
    partition_cls, topic_cls = nested(cls, "FetchPartition"), nested(cls, "FetchTopic")
    forgotten_cls = nested(cls, "ForgottenTopic")
    entities = tuple(build(topic_cls, topic_id=topic_id, partitions=tuple(
        build(partition_cls, partition=p[0], current_leader_epoch=p[1], fetch_offset=p[2], last_fetched_epoch=p[3],
              log_start_offset=p[4], partition_max_bytes=p[5]) for p in partitions)) for topic_id, partitions in topics)
    return build(cls, replica_state=build(nested(cls, "ReplicaState"), replica_id=replica_id,
                                          replica_epoch=replica_epoch),
                 max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
                 isolation_level=0, session_id=session_id, session_epoch=session_epoch, topics=entities,
                 forgotten_topics_data=tuple(build(forgotten_cls, topic_id=topic_id, partitions=tuple(indexes))
                                             for topic_id, indexes in forgotten),
                 rack_id="")


@settings(max_examples=200, deadline=None, database=None)
@given(I32, st.integers(0, 2**31 - 1), I64, st.integers(0, 2**31 - 1), I32, I32, TOPICS,
       st.one_of(st.none(), st.text(max_size=20)), I32, I32, FORGOTTEN)
def test_same_bytes_as_kio(correlation_id: int, replica_id: int, replica_epoch: int, max_wait_ms: int, min_bytes: int,
                           max_bytes: int, topics: list[Any], client_id: str | None, session_id: int,
                           session_epoch: int, forgotten: list[Any]) -> None:
    for version in fetch_request.VERSIONS:
        fast = fetch_request.encode(version, replica_id, replica_epoch, max_wait_ms, min_bytes, max_bytes, topics,
                                    session_id, session_epoch, forgotten)
        expected = kio_body(version, replica_id, replica_epoch, max_wait_ms, min_bytes, max_bytes, topics, session_id,
                            session_epoch, forgotten)
        assert request_key(fast) == request_key(expected) == (1, version)
        assert encode_request(fast, correlation_id, client_id) == encode_request(expected, correlation_id, client_id)
