from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from apis_helpers import TOPIC_ID, UNKNOWN_ID, client_request, cluster_image, request_entity, wire
from kio.schema.errors import ErrorCode

from insync import errors
from insync.broker.messages import ConsumerFetchPartition, ConsumerFetchResponse
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import build, field_or, nested, response_class
from insync.protocol.records import build_batch
from insync.replication.messages import (
    EpochEndOffset,
    FetchPartitionData,
    FetchRequest,
    FetchRequestPartition,
    FetchResponse,
)
from insync.types import BrokerEpoch, BrokerId, LeaderEpoch, Offset, TopicPartition
from insync.wire import fetch

BATCH = build_batch([(b"k", b"v")], base_offset=10, partition_leader_epoch=4)
ORDERS_0 = TopicPartition("orders", 0)


def fetch_request(version: int, replica: int = -1, session_epoch: int = -1, isolation_level: int = 0
                  ) -> DecodedRequest:
    partitions = tuple(request_entity(1, version, "FetchPartition", partition=p, fetch_offset=10 + p,
                                      current_leader_epoch=4, last_fetched_epoch=3, log_start_offset=0,
                                      partition_max_bytes=1 << 20) for p in (0, 1))
    ghost = (request_entity(1, version, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=100),)
    topics = (request_entity(1, version, "FetchTopic", topic="orders", topic_id=uuid.UUID(TOPIC_ID),
                             partitions=partitions),
              request_entity(1, version, "FetchTopic", topic="ghost", topic_id=uuid.UUID(UNKNOWN_ID),
                             partitions=ghost))
    replica_fields: dict[str, Any] = {"replica_id": replica}
    if version >= 15:
        replica_fields = {"replica_state": request_entity(1, version, "ReplicaState", replica_id=replica)}
    return client_request(1, version, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
                          max_bytes=50_000_000, session_id=0, session_epoch=session_epoch, topics=topics,
                          forgotten_topics_data=(), isolation_level=isolation_level, **replica_fields)


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 17])
def test_consumer_fetch_round_trip(version: int) -> None:
    decoded = fetch.decode_request(fetch_request(version), cluster_image())
    request = decoded.request
    assert not fetch.is_follower_fetch(request)
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (500, 1, 50_000_000)
    first = request.partitions[0]
    assert (first.topic_partition, first.fetch_offset, first.partition_max_bytes) == (ORDERS_0, 10, 1 << 20)
    assert first.current_leader_epoch == (4 if version >= 9 else -1)
    assert first.last_fetched_epoch == (3 if version >= 12 else -1)
    assert first.log_start_offset == (0 if version >= 5 else -1)
    consumer = fetch.consumer_request(request)
    assert consumer.partitions[:2] == ((ORDERS_0, 10), (TopicPartition("orders", 1), 11))

    results = [ConsumerFetchPartition(ORDERS_0, errors.NONE, Offset(11), Offset(0), BATCH),
               ConsumerFetchPartition(TopicPartition("orders", 1), errors.NOT_LEADER_OR_FOLLOWER, Offset(-1),
                                      Offset(-1), b"")]
    if version < 13:
        assert request.partitions[2].topic_partition == TopicPartition("ghost", 0)
        results.append(ConsumerFetchPartition(TopicPartition("ghost", 0), errors.UNKNOWN_TOPIC_OR_PARTITION,
                                              Offset(-1), Offset(-1), b""))
    else:
        assert [r.error for r in decoded.rejected] == [errors.UNKNOWN_TOPIC_ID]
    body = wire(fetch.encode_response(ConsumerFetchResponse(42, tuple(results)), decoded))
    assert body.__version__ == version and body.__flexible__ == (version >= 12)
    if version >= 7:
        assert body.session_id == 0 and body.error_code == 0
    orders, ghost = body.responses
    assert (orders.topic_id == uuid.UUID(TOPIC_ID)) if version >= 13 else (orders.topic == "orders")
    p0, p1 = orders.partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark, p0.last_stable_offset) == (0, 0, 11, 11)
    assert bytes(p0.records) == BATCH and p0.aborted_transactions is None  # READ_UNCOMMITTED, as Kafka
    assert (p1.error_code, bytes(p1.records or b"")) == (errors.NOT_LEADER_OR_FOLLOWER.code, b"")
    expected = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
    assert ghost.partitions[0].error_code == expected.code


@pytest.mark.parametrize("version", [4, 12, 14, 15, 17])
def test_follower_fetch_round_trip(version: int) -> None:
    decoded = fetch.decode_request(fetch_request(version, replica=2), cluster_image())
    assert fetch.is_follower_fetch(decoded.request) and decoded.request.replica_id == 2
    diverging = EpochEndOffset(LeaderEpoch(3), Offset(8))
    response = FetchResponse(42, errors.NONE, (
        FetchPartitionData(ORDERS_0, errors.NONE, Offset(11), Offset(0), Offset(12), None, BATCH),
        FetchPartitionData(TopicPartition("orders", 1), errors.NONE, Offset(11), Offset(0), Offset(12), diverging),
    ))
    body = wire(fetch.encode_response(response, decoded))
    p0, p1 = body.responses[0].partitions
    assert bytes(p0.records) == BATCH and field_or(p0, "log_start_offset", 0) == 0
    if version >= 12:
        assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (3, 8)
        assert p0.diverging_epoch.epoch == -1


def test_top_level_error_from_replication() -> None:
    for version, expect_partitions in ((6, True), (12, False)):
        decoded = fetch.decode_request(fetch_request(version, replica=2), cluster_image())
        body = wire(fetch.encode_response(FetchResponse(42, errors.NOT_LEADER_OR_FOLLOWER, ()), decoded))
        if expect_partitions:  # v6 has no top-level error: every requested partition carries it
            codes = {p.error_code for t in body.responses for p in t.partitions}
            assert codes == {errors.NOT_LEADER_OR_FOLLOWER.code}
        else:
            assert body.error_code == errors.NOT_LEADER_OR_FOLLOWER.code and body.responses == ()


def test_incremental_session_is_unknown() -> None:
    decoded = fetch.decode_request(fetch_request(12, session_epoch=3), cluster_image())
    assert decoded.error == errors.BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
    body = wire(fetch.encode_response(None, decoded))
    assert body.error_code == decoded.error.code and body.session_id == 0
    # a new session (epoch 0) is declined by answering session id 0, not refused
    decoded = fetch.decode_request(fetch_request(12, session_epoch=0), cluster_image())
    assert decoded.error is errors.NONE


@pytest.mark.parametrize("version", [4, 12, 13, 15, 17])
def test_follower_client_side_round_trip(version: int) -> None:
    image = cluster_image()
    request = FetchRequest(7, BrokerId(2), 500, 1, 10_000_000, (
        FetchRequestPartition(ORDERS_0, Offset(10), LeaderEpoch(4), LeaderEpoch(3), Offset(0), 1 << 20),),
        replica_epoch=BrokerEpoch(42))
    body = wire(fetch.encode_request(request, version, image))
    assert fetch.replica_id(body) == 2
    # the leader decodes what the follower sent; its broker epoch travels from v15 (KIP-903's ReplicaState)
    leader_view = fetch.decode_request(DecodedRequest(1, version, 7, "follower", body), image)
    assert leader_view.request.partitions[0].topic_partition == ORDERS_0
    assert leader_view.request.partitions[0].fetch_offset == 10
    assert leader_view.request.replica_epoch == (42 if version >= 15 else -1)

    cls = response_class(1, version)
    partition = build(nested(cls, "PartitionData"), partition_index=0, error_code=ErrorCode.none, high_watermark=11,
                      last_stable_offset=11, log_start_offset=0, aborted_transactions=(), records=BATCH,
                      diverging_epoch=build(nested(cls, "EpochEndOffset"), epoch=3, end_offset=8)
                      if version >= 12 else None)
    topic = build(nested(cls, "FetchableTopicResponse"), topic="orders", topic_id=uuid.UUID(TOPIC_ID),
                  partitions=(partition,))
    response = wire(build(cls, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
                          responses=(topic,)))
    internal = fetch.decode_response(response, request, image)
    assert internal.error is errors.NONE
    data = internal.partitions[0]
    assert (data.topic_partition, data.high_watermark, data.records) == (ORDERS_0, 11, BATCH)
    if version >= 12:
        assert data.diverging_epoch == EpochEndOffset(LeaderEpoch(3), Offset(8))


def test_zero_topic_id_names_no_topic() -> None:
    partition = request_entity(1, 13, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=100)
    topic = request_entity(1, 13, "FetchTopic", topic_id=uuid.UUID(int=0), partitions=(partition,))
    request = client_request(1, 13, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, session_id=0,
                             session_epoch=-1, topics=(topic,), forgotten_topics_data=())
    decoded = fetch.decode_request(request, cluster_image())
    assert decoded.request.partitions == () and [r.error for r in decoded.rejected] == [errors.UNKNOWN_TOPIC_ID]


@pytest.mark.parametrize("version", [11, 12, 16])
def test_fenced_epoch_names_the_current_leader(version: int) -> None:
    image = cluster_image()
    decoded = fetch.decode_request(fetch_request(version), image)
    response = ConsumerFetchResponse(42, (ConsumerFetchPartition(ORDERS_0, errors.FENCED_LEADER_EPOCH, Offset(-1),
                                                                 Offset(-1), b""),))
    body = wire(fetch.encode_response(response, decoded, image))
    refused = body.responses[0].partitions[0]
    leader = (refused.current_leader.leader_id, refused.current_leader.leader_epoch) if version >= 12 else None
    assert leader == ((1, 4) if version >= 16 else (-1, -1) if version >= 12 else None)  # Kafka: v16+ only
    if version >= 16:
        assert [(e.node_id, e.port, e.rack) for e in body.node_endpoints] == [(1, 9091, "rack-a")]


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_aborted_transactions_and_refused_offsets_as_kafka(version: int, isolation_level: int) -> None:
    """Kafka fills aborted transactions only for READ_COMMITTED; a partition the core refused has no offsets
    (Kafka's failed log read: -1 and null), whatever the core knew; one the translator refused is Kafka's
    `partitionResponse(error)` (an empty list)."""
    decoded = fetch.decode_request(fetch_request(version, isolation_level=isolation_level), cluster_image())
    assert decoded.request.isolation_level == isolation_level
    empty = () if isolation_level == 1 else None
    ok = ConsumerFetchPartition(ORDERS_0, errors.NONE, Offset(11), Offset(0), BATCH)
    body = wire(fetch.encode_response(ConsumerFetchResponse(42, (ok,)), decoded))  # the plain writer
    assert body.responses[0].partitions[0].aborted_transactions == empty

    refused = ConsumerFetchPartition(TopicPartition("orders", 1), errors.OFFSET_OUT_OF_RANGE, Offset(11), Offset(3),
                                     b"")
    body = wire(fetch.encode_response(ConsumerFetchResponse(42, (ok, refused)), decoded))  # through kio
    p0, p1 = body.responses[0].partitions
    assert p0.aborted_transactions == empty and (p0.high_watermark, p0.last_stable_offset) == (11, 11)
    assert (p1.error_code, p1.high_watermark, p1.last_stable_offset) == (errors.OFFSET_OUT_OF_RANGE.code, -1, -1)
    assert p1.aborted_transactions is None and field_or(p1, "log_start_offset", -1) == -1
    if version >= 13:  # the unknown topic id, refused by the translator
        assert body.responses[1].partitions[0].aborted_transactions == ()


def test_a_followers_refused_partition_keeps_the_leaders_offsets() -> None:
    """insync's fetcher restarts from the leader's offsets on OFFSET_OUT_OF_RANGE."""
    decoded = fetch.decode_request(fetch_request(15, replica=2), cluster_image())
    response = FetchResponse(42, errors.NONE, (FetchPartitionData(ORDERS_0, errors.OFFSET_OUT_OF_RANGE, Offset(11),
                                                                  Offset(3), Offset(12)),))
    refused = wire(fetch.encode_response(response, decoded)).responses[0].partitions[0]
    assert (refused.high_watermark, refused.log_start_offset, refused.aborted_transactions) == (11, 3, None)


@pytest.mark.parametrize("version", [4, 10, 11, 12, 17])
def test_a_consumer_fetch_with_client_metadata_may_read_a_follower(version: int) -> None:
    """Kafka's FetchParams: a consumer's fetch is leader-only unless it carries client metadata (v11+, KIP-392)."""
    decoded = fetch.decode_request(fetch_request(version), cluster_image())
    assert decoded.request.rack_id == ("" if version >= 11 else None)
    assert fetch.consumer_request(decoded.request).leader_only == (version < 11)


@pytest.mark.parametrize("version", [7, 12, 13, 15, 17])
def test_a_followers_fetch_session_travels_both_ways(version: int) -> None:
    """An incremental fetch that lists nothing and forgets a partition; the leader's answer names a partition of
    the session that the request did not list, by the image's name and id (KIP-227)."""
    image = cluster_image()
    request = FetchRequest(7, BrokerId(2), 500, 1, 10_000_000, (), session_id=9, session_epoch=4,
                           forgotten=(TopicPartition("orders", 1),))
    body = wire(fetch.encode_request(request, version, image))
    leader_view = fetch.decode_request(DecodedRequest(1, version, 7, "follower", body), image)
    assert leader_view.error is errors.NONE
    assert (leader_view.request.session_id, leader_view.request.session_epoch, leader_view.request.forgotten,
            leader_view.request.partitions) == (9, 4, (TopicPartition("orders", 1),), ())
    answer = FetchResponse(7, errors.NONE, (FetchPartitionData(ORDERS_0, errors.NONE, Offset(11), Offset(0),
                                                               records=BATCH),), session_id=9)
    response = wire(fetch.encode_response(answer, leader_view, image))
    assert response.session_id == 9
    internal = fetch.decode_response(response, request, image)
    assert internal.session_id == 9
    assert [(p.topic_partition, p.high_watermark, p.records) for p in internal.partitions] == [(ORDERS_0, 11, BATCH)]
