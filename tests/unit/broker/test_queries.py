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


def test_init_producer_id_hands_out_new_ids_and_bumps_an_existing_producers_epoch() -> None:
    h = cluster_with_topic()
    first, second = init_producer_id(h), init_producer_id(h)
    assert (first.error, first.producer_epoch) == (errors.NONE, 0)
    assert second.producer_id != first.producer_id
    bumped = init_producer_id(h, first.producer_id, 0)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (errors.NONE, first.producer_id, 1)
    assert init_producer_id(h, first.producer_id).error is errors.INVALID_PRODUCER_EPOCH
    last = init_producer_id(h, first.producer_id, 32765)
    assert (last.error, last.producer_id, last.producer_epoch) == (errors.NONE, first.producer_id, 32766)
    for exhausted in (32766, 32767):  # past Kafka's last epoch: a new producer id at epoch 0, never epoch 32768
        renewed = init_producer_id(h, first.producer_id, exhausted)
        assert renewed.error is errors.NONE and renewed.producer_id not in (first.producer_id, second.producer_id)
        assert renewed.producer_epoch == 0
