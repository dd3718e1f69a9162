"""DescribeLogDirs (v1-v4) and AlterReplicaLogDirs (v1-v2) <-> `broker.log_dirs`.

Both name topics by name. DescribeLogDirs asks for every log with a null topic list, else for the partitions
listed; v3 adds a request-level error code (always NONE: insync has no authorizer), v4 each dir's volume size
and usable bytes. AlterReplicaLogDirs lists destination paths, each with the partitions to move there; like
Kafka's `AlterReplicaLogDirsRequest.partitionDirs`, a partition listed under two paths goes to the last one and
is answered once. Neither version step changes anything but the encoding.
"""

from __future__ import annotations

from typing import Any

from insync.broker.log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LogDirDescription,
)
from insync.errors import NONE
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, nested, response_class
from insync.types import TopicPartition
from insync.wire.entities import Decoded, group
from insync.wire.versions import ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS

# DescribeLogDirs -----------------------------------------------------------------------------------------


def decode_describe_log_dirs(request: DecodedRequest) -> Decoded[DescribeLogDirsRequest]:
    body = request.body
    version = check_body(body, DESCRIBE_LOG_DIRS)
    partitions = None if body.topics is None else frozenset(
        TopicPartition(t.topic, int(p)) for t in body.topics for p in t.partitions)
    return Decoded(version, DescribeLogDirsRequest(request.correlation_id, partitions))


def encode_describe_log_dirs(response: DescribeLogDirsResponse, decoded: Decoded[DescribeLogDirsRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(DESCRIBE_LOG_DIRS, decoded.version)
    results = tuple(_log_dir_result(cls, log_dir) for log_dir in response.log_dirs)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(NONE), results=results)


def _log_dir_result(cls: type, log_dir: LogDirDescription) -> Any:
    partition_cls, topic_cls = nested(cls, "DescribeLogDirsPartition"), nested(cls, "DescribeLogDirsTopic")
    items = [(p.topic_partition.topic,
              build(partition_cls, partition_index=p.topic_partition.partition, partition_size=p.size_bytes,
                    offset_lag=p.offset_lag, is_future_key=p.is_future))
             for p in log_dir.partitions]
    topics = tuple(build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in group(items))
    return build(nested(cls, "DescribeLogDirsResult"), error_code=code(log_dir.error), log_dir=log_dir.path,
                 topics=topics, total_bytes=log_dir.total_bytes, usable_bytes=log_dir.usable_bytes)


# AlterReplicaLogDirs -------------------------------------------------------------------------------------


def decode_alter_replica_log_dirs(request: DecodedRequest) -> Decoded[AlterReplicaLogDirsRequest]:
    body = request.body
    version = check_body(body, ALTER_REPLICA_LOG_DIRS)
    destinations: dict[TopicPartition, str] = {}
    for log_dir in body.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                destinations[TopicPartition(topic.name, int(partition))] = log_dir.path
    return Decoded(version, AlterReplicaLogDirsRequest(request.correlation_id, tuple(destinations.items())))


def encode_alter_replica_log_dirs(response: AlterReplicaLogDirsResponse,
                                  decoded: Decoded[AlterReplicaLogDirsRequest]) -> Any:
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    cls = response_class(ALTER_REPLICA_LOG_DIRS, decoded.version)
    partition_cls, topic_cls = nested(cls, "AlterReplicaLogDirPartitionResult"), nested(cls, "AlterReplicaLogDirTopicResult")
    items = [(tp.topic, build(partition_cls, partition_index=tp.partition, error_code=code(error)))
             for tp, error in response.results]
    results = tuple(build(topic_cls, topic_name=name, partitions=tuple(parts)) for name, parts in group(items))
    return build(cls, throttle_time=NO_THROTTLE, results=results)
