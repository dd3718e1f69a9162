from __future__ import annotations

import datetime

import pytest
from apis_helpers import client_request, request_entity, wire

from insync import errors
from insync.broker.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    DeleteRecordsResponse,
    DeleteRecordsResult,
    ListOffsetsResponse,
    ListOffsetsResult,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochResult,
)
from insync.types import BrokerId, LeaderEpoch, Offset, TopicPartition
from insync.wire import offsets

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.mark.parametrize("version", [1, 2, 4, 5, 6, 11])
def test_list_offsets_round_trip(version: int) -> None:
    partitions = (request_entity(2, version, "ListOffsetsPartition", partition_index=0, timestamp=EARLIEST_TIMESTAMP,
                                 current_leader_epoch=4),
                  request_entity(2, version, "ListOffsetsPartition", partition_index=1, timestamp=LATEST_TIMESTAMP,
                                 current_leader_epoch=4))
    topic = request_entity(2, version, "ListOffsetsTopic", name="orders", partitions=partitions)
    request = client_request(2, version, replica_id=-1, isolation_level=1, topics=(topic,),
                             timeout=datetime.timedelta(seconds=1))
    decoded = offsets.decode_list_offsets(request)
    internal = decoded.request
    assert internal.replica_id == -1 and internal.isolation_level == (1 if version >= 2 else 0)
    assert [(p.topic_partition, p.timestamp) for p in internal.partitions] == [(ORDERS_0, -2), (ORDERS_1, -1)]
    assert internal.partitions[0].current_leader_epoch == (4 if version >= 4 else -1)

    response = ListOffsetsResponse(42, (ListOffsetsResult(ORDERS_0, errors.NONE, -1, Offset(0), LeaderEpoch(4)),
                                        ListOffsetsResult(ORDERS_1, errors.FENCED_LEADER_EPOCH)))
    body = wire(offsets.encode_list_offsets(response, decoded))
    (topic_result,) = body.topics
    p0, p1 = topic_result.partitions
    assert (topic_result.name, p0.partition_index, p0.error_code, p0.offset) == ("orders", 0, 0, 0)
    assert (p1.error_code, p1.offset) == (errors.FENCED_LEADER_EPOCH.code, -1)
    if version >= 4:
        assert p0.leader_epoch == 4


def test_list_offsets_duplicate_partition_is_invalid() -> None:
    partition = request_entity(2, 7, "ListOffsetsPartition", partition_index=0, timestamp=-1)
    topic = request_entity(2, 7, "ListOffsetsTopic", name="orders", partitions=(partition, partition))
    decoded = offsets.decode_list_offsets(client_request(2, 7, replica_id=-1, isolation_level=0, topics=(topic,)))
    assert decoded.request.partitions == ()
    body = wire(offsets.encode_list_offsets(ListOffsetsResponse(42, ()), decoded))
    assert [p.error_code for p in body.topics[0].partitions] == [errors.INVALID_REQUEST.code]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_round_trip(version: int) -> None:
    partition = request_entity(23, version, "OffsetForLeaderPartition", partition=0, current_leader_epoch=5,
                               leader_epoch=3)
    topic = request_entity(23, version, "OffsetForLeaderTopic", topic="orders", partitions=(partition,))
    decoded = offsets.decode_offset_for_leader_epoch(client_request(23, version, replica_id=-1, topics=(topic,)))
    (asked,) = decoded.request.partitions
    assert (asked.topic_partition, asked.current_leader_epoch, asked.leader_epoch) == (ORDERS_0, 5, 3)
    assert decoded.request.replica_id == BrokerId(-1)  # v2 reads as a consumer: answered by the leader only
    response = OffsetForLeaderEpochResponse(42, (OffsetForLeaderEpochResult(ORDERS_0, errors.NONE, LeaderEpoch(3),
                                                                            Offset(120)),))
    body = wire(offsets.encode_offset_for_leader_epoch(response, decoded))
    result = body.topics[0].partitions[0]
    assert (body.topics[0].topic, result.partition, result.leader_epoch, result.end_offset) == ("orders", 0, 3, 120)


@pytest.mark.parametrize("version", [0, 2])
def test_delete_records_round_trip(version: int) -> None:
    partition = request_entity(21, version, "DeleteRecordsPartition", partition_index=1, offset=-1)
    topic = request_entity(21, version, "DeleteRecordsTopic", name="orders", partitions=(partition,))
    decoded = offsets.decode_delete_records(client_request(21, version, topics=(topic,),
                                                           timeout=datetime.timedelta(seconds=3)))
    assert decoded.request.partitions == ((ORDERS_1, -1),) and decoded.request.timeout_ms == 3000
    response = DeleteRecordsResponse(42, (DeleteRecordsResult(ORDERS_1, errors.NONE, Offset(77)),))
    body = wire(offsets.encode_delete_records(response, decoded))
    result = body.topics[0].partitions[0]
    assert (body.topics[0].name, result.partition_index, result.low_watermark, result.error_code) == (
        "orders", 1, 77, 0)
