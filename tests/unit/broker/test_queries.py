"""OffsetForLeaderEpoch, DeleteRecords and InitProducerId driven through `BrokerCore.handle`, as the server
and the simulator drive them: the core answers its source at once, one result per partition asked."""

from __future__ import annotations

from broker_harness import CORRELATION_ID, TP, Harness, answer, cluster_with_topic, follower

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    HIGH_WATERMARK_OFFSET,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    READ_UNCOMMITTED,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from insync.types import UNDEFINED_EPOCH, BrokerId, LeaderEpoch, Offset, TopicPartition


def epochs(h: Harness, core: BrokerCore, replica_id: int = CONSUMER_REPLICA_ID, tp: TopicPartition = TP
           ) -> tuple[errors.KafkaError, int, int]:
    """(error, epoch, end offset) `core` answers for the partition's current leader epoch."""
    epoch = LeaderEpoch(h.leader().partitions[TP].leader_epoch)
    asked = OffsetForLeaderEpochPartition(tp, UNDEFINED_EPOCH, epoch)
    request = OffsetForLeaderEpochRequest(CORRELATION_ID, BrokerId(replica_id), (asked,))
    [result] = answer(h, core, request, OffsetForLeaderEpochResponse).results
    return result.error, result.leader_epoch, result.end_offset


def delete(h: Harness, offset: int) -> tuple[errors.KafkaError, int]:
    request = DeleteRecordsRequest(CORRELATION_ID, 30_000, ((TP, Offset(offset)),))
    [result] = answer(h, h.leader(), request, DeleteRecordsResponse).results
    return result.error, result.low_watermark


def init_producer_id(h: Harness, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                     ) -> InitProducerIdResponse:
    request = InitProducerIdRequest(CORRELATION_ID, 60_000, producer_id, producer_epoch)
    return answer(h, h.leader(), request, InitProducerIdResponse)


def test_offset_for_leader_epoch_is_the_leaders_and_a_debugging_tool_reads_a_followers() -> None:
    h = cluster_with_topic()
    h.produce(-1, 1, records=4)
    h.run(600)
    epoch = h.leader().partitions[TP].leader_epoch
    assert epochs(h, h.leader()) == (errors.NONE, epoch, 4)
    assert epochs(h, follower(h))[0] is errors.NOT_LEADER_OR_FOLLOWER
    assert epochs(h, follower(h), DEBUGGING_REPLICA_ID) == (errors.NONE, epoch, 4)
    assert epochs(h, h.leader(), tp=TopicPartition("t", 7))[0] is errors.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_records_moves_the_log_start_never_past_the_high_watermark() -> None:
    h = cluster_with_topic()
    h.produce(-1, 1, records=5)
    h.run(600)
    assert delete(h, 2) == (errors.NONE, 2)
    assert delete(h, 6)[0] is errors.OFFSET_OUT_OF_RANGE
    assert delete(h, HIGH_WATERMARK_OFFSET) == (errors.NONE, 5)
    earliest = ListOffsetsRequest(CORRELATION_ID, CONSUMER_REPLICA_ID, READ_UNCOMMITTED,
                                  (ListOffsetsPartition(TP, EARLIEST_TIMESTAMP),))
    assert answer(h, h.leader(), earliest, ListOffsetsResponse).results[0].offset == 5


def test_init_producer_id_hands_out_a_new_id_at_epoch_0_whatever_an_idempotent_producer_sends() -> None:
    """As Kafka 4.1 answers a null transactional id (tests/kafka_ref/test_differential.py compares both)."""
    h = cluster_with_topic()
    first, second = init_producer_id(h), init_producer_id(h)
    assert (first.error, first.producer_epoch) == (errors.NONE, 0)
    assert second.producer_id != first.producer_id
    seen = {first.producer_id, second.producer_id}
    for epoch in (0, 5, 32766, 32767, -3):
        renewed = init_producer_id(h, first.producer_id, epoch)
        assert (renewed.error, renewed.producer_epoch) == (errors.NONE, 0), epoch
        assert renewed.producer_id not in seen
        seen.add(renewed.producer_id)
    assert init_producer_id(h, first.producer_id).error is errors.INVALID_REQUEST  # an id without an epoch
    assert init_producer_id(h, NO_PRODUCER_ID, 3).error is errors.INVALID_REQUEST  # an epoch without an id
