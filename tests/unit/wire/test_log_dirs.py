"""DescribeLogDirs (v1-v4), AlterReplicaLogDirs (v1-v2) and DescribeProducers (v0) translators, every version,
written to bytes and read back as a client would."""

from __future__ import annotations

import pytest
from apis_helpers import client_request, request_entity, wire

from insync import errors
from insync.broker.log_dirs import (
    AlterReplicaLogDirsResponse,
    DescribeLogDirsResponse,
    LogDirDescription,
    LogDirPartition,
)
from insync.broker.producers import ActiveProducer, DescribeProducersResponse, PartitionProducers
from insync.types import TopicPartition
from insync.wire import log_dirs, producers
from insync.wire.versions import BROKER_API_VERSIONS

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_the_ranges_are_kafka_4_0s() -> None:
    assert (BROKER_API_VERSIONS[34], BROKER_API_VERSIONS[35], BROKER_API_VERSIONS[61]) == ((1, 2), (1, 4), (0, 0))


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs_round_trip(version: int) -> None:
    every = log_dirs.decode_describe_log_dirs(client_request(35, version, topics=None))
    assert (every.version, every.request.partitions) == (version, None)
    topics = (request_entity(35, version, "DescribableLogDirTopic", topic="a", partitions=(0, 1)),
              request_entity(35, version, "DescribableLogDirTopic", topic="b", partitions=(0,)))
    decoded = log_dirs.decode_describe_log_dirs(client_request(35, version, topics=topics))
    assert decoded.request.partitions == frozenset({A0, A1, B0})

    found = LogDirDescription("/data/b1", errors.NONE, (LogDirPartition(A0, 100, 0, False),
                                                        LogDirPartition(A1, 50, 0, True),
                                                        LogDirPartition(B0, 7, -1, False)), 1000, 400)
    failed = LogDirDescription("/data/b1", errors.KAFKA_STORAGE_ERROR)
    body = wire(log_dirs.encode_describe_log_dirs(DescribeLogDirsResponse(42, (found, failed)), decoded))
    ok, bad = body.results
    assert (ok.error_code, ok.log_dir, bad.error_code, bad.topics) == (0, "/data/b1", 56, ())
    assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key) for p in t.partitions])
            for t in ok.topics] == [("a", [(0, 100, 0, False), (1, 50, 0, True)]), ("b", [(0, 7, -1, False)])]
    assert (getattr(body, "error_code", None) == 0) == (version >= 3)  # the request-level error code, v3+
    if version >= 4:
        assert (ok.total_bytes, ok.usable_bytes, bad.total_bytes) == (1000, 400, -1)
    else:
        assert not hasattr(ok, "total_bytes")


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_round_trip_where_the_last_path_wins(version: int) -> None:
    def log_dir(path: str, *topics: tuple[str, tuple[int, ...]]) -> object:
        return request_entity(34, version, "AlterReplicaLogDir", path=path, topics=tuple(
            request_entity(34, version, "AlterReplicaLogDirTopic", name=name, partitions=parts)
            for name, parts in topics))

    request = client_request(34, version, dirs=(log_dir("/one", ("a", (0, 1)), ("b", (0,))),
                                                 log_dir("/two", ("a", (1,)))))
    decoded = log_dirs.decode_alter_replica_log_dirs(request)
    assert decoded.request.destinations == ((A0, "/one"), (A1, "/two"), (B0, "/one"))
    results = ((A0, errors.NONE), (A1, errors.BY_NAME["LOG_DIR_NOT_FOUND"]),
               (B0, errors.BY_NAME["REPLICA_NOT_AVAILABLE"]))
    body = wire(log_dirs.encode_alter_replica_log_dirs(AlterReplicaLogDirsResponse(42, results), decoded))
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in body.results] == [
        ("a", [(0, 0), (1, 57)]), ("b", [(0, 9)])]


def test_describe_producers_round_trip() -> None:
    topics = (request_entity(61, 0, "TopicRequest", name="a", partition_indexes=(0, 1)),
              request_entity(61, 0, "TopicRequest", name="b", partition_indexes=(0,)))
    decoded = producers.decode_request(client_request(61, 0, topics=topics))
    assert decoded.request.partitions == (A0, A1, B0)
    results = (PartitionProducers(A0, errors.NONE, producers=(ActiveProducer(1000, 2, 9, 1_700_000_000_123),)),
               PartitionProducers(A1, errors.NOT_LEADER_OR_FOLLOWER),
               PartitionProducers(B0, errors.INVALID_TOPIC_EXCEPTION, "why"))
    body = wire(producers.encode_response(DescribeProducersResponse(42, results), decoded))
    a, b = body.topics
    assert (a.name, b.name) == ("a", "b")
    [producer] = a.partitions[0].active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.last_sequence, producer.last_timestamp,
            producer.coordinator_epoch, producer.current_txn_start_offset) == (1000, 2, 9, 1_700_000_000_123, -1, -1)
    assert [(p.partition_index, p.error_code, p.error_message) for p in (*a.partitions, *b.partitions)] == [
        (0, 0, None), (1, 6, None), (0, 17, "why")]
