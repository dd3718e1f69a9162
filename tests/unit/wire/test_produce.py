from __future__ import annotations

import uuid

import pytest
from apis_helpers import (
    BATCH,
    TOPIC_ID,
    UNKNOWN_ID,
    cluster_image,
    produce_request,
    wire,
)

from insync import errors
from insync.broker.messages import PartitionProduceResult, ProduceResponse
from insync.types import Offset, TopicPartition
from insync.wire import produce


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_produce_round_trip(version: int) -> None:
    request = produce_request(version)
    decoded = produce.decode_request(request, cluster_image())
    internal = decoded.request
    assert internal.acks == -1 and internal.timeout_ms == 1500 and internal.correlation_id == 42
    orders = [(tp, data) for tp, data in internal.partitions if tp.topic == "orders"]
    assert orders == [(TopicPartition("orders", 0), BATCH), (TopicPartition("orders", 1), BATCH)]
    # An unknown topic is answered without the core: by id (v13+) UNKNOWN_TOPIC_ID, by name
    # UNKNOWN_TOPIC_OR_PARTITION.
    assert len(internal.partitions) == 2
    expected_rejection = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
    assert [r.error for r in decoded.rejected] == [expected_rejection]

    results = [PartitionProduceResult(tp, errors.NONE, Offset(100 + tp.partition)) for tp, _ in orders]
    body = wire(produce.encode_response(ProduceResponse(42, tuple(results)), decoded))
    assert body.__version__ == version
    by_topic = {(t.topic_id if version >= 13 else t.name): t for t in body.responses}
    orders_key = uuid.UUID(TOPIC_ID) if version >= 13 else "orders"
    ghost_key = uuid.UUID(UNKNOWN_ID) if version >= 13 else "ghost"
    assert [(p.index, p.error_code, p.base_offset) for p in by_topic[orders_key].partition_responses] == [
        (0, 0, 100), (1, 0, 101)]
    expected = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
    assert [p.error_code for p in by_topic[ghost_key].partition_responses] == [expected.code]


def test_invalid_acks_rejects_every_partition() -> None:
    decoded = produce.decode_request(produce_request(9, acks=2), cluster_image())
    assert decoded.request.partitions == ()
    assert {r.error for r in decoded.rejected} == {errors.INVALID_REQUIRED_ACKS}
    body = wire(produce.encode_response(ProduceResponse(42, ()), decoded))
    codes = [p.error_code for t in body.responses for p in t.partition_responses]
    assert codes == [errors.INVALID_REQUIRED_ACKS.code] * 3


@pytest.mark.parametrize("version", [9, 10, 13])
def test_not_leader_names_the_current_leader(version: int) -> None:
    """KIP-951 (Produce v10+): the refused partition names the leader the image knows, and its endpoint."""
    image = cluster_image()
    decoded = produce.decode_request(produce_request(version), image)
    results = (PartitionProduceResult(TopicPartition("orders", 1), errors.NOT_LEADER_OR_FOLLOWER, Offset(-1)),)
    body = wire(produce.encode_response(ProduceResponse(42, results), decoded, image))
    refused = body.responses[0].partition_responses[0]
    if version >= 10:
        assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (2, 0)
        assert [(e.node_id, e.host, e.port) for e in body.node_endpoints] == [(2, "127.0.0.1", 9092)]
    else:
        assert not hasattr(refused, "current_leader")


@pytest.mark.parametrize("version", [3, 5, 9, 10, 13])
@pytest.mark.parametrize("error", [errors.NONE, errors.NOT_LEADER_OR_FOLLOWER])
def test_the_log_start_offset_is_the_cores(version: int, error: errors.KafkaError) -> None:
    """v5+: each partition carries the log start offset the core answered, in both writers (plain and kio)."""
    image = cluster_image()
    decoded = produce.decode_request(produce_request(version), image)
    results = (PartitionProduceResult(TopicPartition("orders", 0), error, Offset(7), Offset(5)),)
    body = wire(produce.encode_response(ProduceResponse(42, results), decoded, image))
    answered, rejected = (p for t in body.responses for p in t.partition_responses)
    assert answered.base_offset == 7 and rejected.base_offset == -1
    if version >= 5:  # the translator's own refusal has no log
        assert (answered.log_start_offset, rejected.log_start_offset) == (5, -1)


@pytest.mark.parametrize("version", [3, 8, 13])
def test_record_errors_and_the_error_message_as_kafka_answers_them(version: int) -> None:
    """KIP-467 (Produce v8+): INVALID_RECORD carries each record at fault (its index in the batch) and a message."""
    image = cluster_image()
    decoded = produce.decode_request(produce_request(version), image)
    why = "Compacted topic cannot accept message without key in topic partition orders-0"
    results = (PartitionProduceResult(TopicPartition("orders", 0), errors.BY_NAME["INVALID_RECORD"], Offset(-1),
                                      Offset(0), "One or more records have been rejected", ((3, why), (9, why))),)
    body = wire(produce.encode_response(ProduceResponse(42, results), decoded, image))
    refused = body.responses[0].partition_responses[0]
    assert refused.error_code == errors.BY_NAME["INVALID_RECORD"].code
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [(3, why), (9, why)]
        assert refused.error_message == "One or more records have been rejected"
    else:
        assert not hasattr(refused, "record_errors")
