"""DescribeProducers (v0) <-> `broker.producers`.

Topics by name, each with the partitions asked; every partition asked is answered, in the order asked, with an
error message where the core gave one.
"""

from __future__ import annotations

from typing import Any

from insync.broker.producers import DescribeProducersRequest, DescribeProducersResponse, PartitionProducers
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, nested, response_class
from insync.types import TopicPartition
from insync.wire.entities import Decoded, group
from insync.wire.versions import DESCRIBE_PRODUCERS


def decode_request(request: DecodedRequest) -> Decoded[DescribeProducersRequest]:
    body = request.body
    version = check_body(body, DESCRIBE_PRODUCERS)
    partitions = tuple(TopicPartition(t.name, int(p)) for t in body.topics for p in t.partition_indexes)
    return Decoded(version, DescribeProducersRequest(request.correlation_id, partitions))


def encode_response(response: DescribeProducersResponse, decoded: Decoded[DescribeProducersRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(DESCRIBE_PRODUCERS, decoded.version)
    items = [(r.topic_partition.topic, _partition_response(cls, r)) for r in response.results]
    items.extend((str(r.topic.name), build(nested(cls, "PartitionResponse"), partition_index=r.partition,
                                           error_code=code(r.error), error_message=None, active_producers=()))
                 for r in decoded.rejected)  # refused unauthorized (authorization)
    topic_cls = nested(cls, "TopicResponse")
    topics = tuple(build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in group(items))
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


def _partition_response(cls: type, result: PartitionProducers) -> Any:
    producer_cls = nested(cls, "ProducerState")
    producers = tuple(build(producer_cls, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                            last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                            coordinator_epoch=p.coordinator_epoch,
                            current_txn_start_offset=p.current_txn_start_offset)
                      for p in result.producers)
    return build(nested(cls, "PartitionResponse"), partition_index=result.topic_partition.partition,
                 error_code=code(result.error), error_message=result.message, active_producers=producers)
