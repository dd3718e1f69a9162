"""What the monitor needs of the `insync` source, on a live broker: the driver's listing gives each partition's
leader, a task goes to the leader it is given and falls back to asking the bootstrap servers when that one does
not answer, and a partition without offsets is an error naming it where the query cannot go on without it.
The driver reader (`reader=driver`, the monitor's) goes on reading the other partitions while one partition's
leader is paused, takes that partition up where it was once the leader answers, and a replay of each micro-batch
from its offsets (Spark's after a restart) reads exactly the records the micro-batch had."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from insync import errors
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, script
from insync.chaos.cluster import ClusterSpec, free_ports
from insync.chaos.script import Step
from insync.spark.source import fetch_client, kafka_io
from insync.spark.source.driver_reader import DriverStreamReader
from insync.spark.source.fetch_client import PartitionFetcher
from insync.spark.source.kafka_io import Metadata, OffsetsUnanswered, Subscription
from insync.spark.source.offsets import OffsetsJson
from insync.spark.source.options import parse_source_options
from insync.types import TopicPartition

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def topic(insync_cluster: ClusterSpec) -> str:
    name = f"monitor-source-{uuid.uuid4().hex[:8]}"
    ensure_topic(insync_cluster.bootstrap, name, 1, 1, {})
    producer = Producer({"bootstrap.servers": insync_cluster.bootstrap})
    producer.produce(name, b"one", partition=0)
    assert producer.flush(10) == 0
    return name


def test_the_listing_gives_each_partitions_leader_and_a_task_given_it_reads_without_a_lookup(
        insync_cluster: ClusterSpec, topic: str) -> None:
    with Metadata({"bootstrap.servers": insync_cluster.bootstrap}) as md:
        tps = md.partitions(Subscription(topics=(topic,)))
        assert md.latest_answered(tps) == ({TopicPartition(topic, 0): 1}, {})
    leader = md.leaders[TopicPartition(topic, 0)]
    assert f"{leader[0]}:{leader[1]}" in insync_cluster.bootstrap.split(",")
    # No bootstrap server answers this fetcher: only the leader it was given can.
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    with PartitionFetcher(dead, topic, 0, partition_max_bytes=1 << 20, max_wait_ms=100, timeout_s=2,
                          leader=leader) as fetcher:
        assert fetcher.fetch(0).error is errors.NONE


def test_a_leader_that_does_not_answer_is_given_up_for_a_lookup(insync_cluster: ClusterSpec, topic: str) -> None:
    gone = ("127.0.0.1", free_ports(1)[0])
    with PartitionFetcher(insync_cluster.bootstrap, topic, 0, partition_max_bytes=1 << 20, max_wait_ms=100,
                          timeout_s=2, leader=gone) as fetcher:
        assert fetcher.fetch(0).error is fetch_client.NETWORK_EXCEPTION
        result = fetcher.fetch(0)
        assert result.error is errors.NONE and result.high_watermark == 1


def test_offsets_a_query_cannot_go_on_without_are_an_error_naming_the_partition() -> None:
    tp, other = TopicPartition("events", 2), TopicPartition("events", 0)
    assert kafka_io._answered({other: 5}, {}) == {other: 5}
    with pytest.raises(OffsetsUnanswered, match=r"no offsets for events-2: its leader did not answer"):
        kafka_io._answered({other: 5}, {tp: "its leader did not answer ListOffsets within 3 s"})
    with pytest.raises(OffsetsUnanswered, match=r"\(and 1 more partitions\)"):
        kafka_io._answered({}, {tp: "x", other: "y"})


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:
    """Three brokers whose sessions outlast the test's pause: the paused leader stays the leader."""
    spec = cluster.up(str(tmp_path_factory.mktemp("driver-reader")), 3, 0,
                      ["broker.session.timeout.ms=60000", "insync.events.topic.enable=false"])
    try:
        yield spec
    finally:
        cluster.down(ClusterSpec.load(spec.directory), 10.0)


def _rows(batches: Iterator[pa.RecordBatch]) -> list[tuple[int, int, bytes]]:
    return sorted((r["partition"], r["offset"], r["value"]) for b in batches for r in b.to_pylist())


def _read_until(reader: DriverStreamReader, start: OffsetsJson, done: object, reads: list[tuple[OffsetsJson, OffsetsJson,
                list[tuple[int, int, bytes]]]]) -> OffsetsJson:
    """Micro-batches from `start` until `done(end)`; each one's (start, end, rows) in `reads`. Bounded: 40 reads."""
    for _ in range(40):
        batches, end = reader.read(start)
        reads.append((start, end, _rows(batches)))
        if done(end):  # type: ignore[operator]
            return end
        start = end
        time.sleep(0.25)
    raise AssertionError(f"not reached within 40 reads: {start}")


def test_the_driver_reader_reads_around_a_paused_leader_and_a_replay_reads_the_same_records(
        own_cluster: ClusterSpec) -> None:
    topic = f"driver-reader-{uuid.uuid4().hex[:8]}"
    ensure_topic(own_cluster.bootstrap, topic, 3, 1, {})
    leaders = {r.partition: r.leader for r in describe_rows(own_cluster.bootstrap, [topic])}
    paused = 0
    others = [p for p in leaders if leaders[p] != leaders[paused]]
    assert others, leaders
    producer = Producer({"bootstrap.servers": own_cluster.bootstrap, "acks": 1, "log_level": 0})

    def produce(partitions: list[int], value: bytes) -> None:
        for p in partitions:
            producer.produce(topic, value, partition=p)
        assert producer.flush(15) == 0

    produce(list(leaders), b"before")
    options = parse_source_options({"kafka.bootstrap.servers": own_cluster.bootstrap, "subscribe": topic,
                                    "startingOffsets": "earliest", "reader": "driver",
                                    "kafka.socket.timeout.ms": "2000"}, streaming=True)
    reader = DriverStreamReader(options)
    reads: list[tuple[OffsetsJson, OffsetsJson, list[tuple[int, int, bytes]]]] = []
    end = _read_until(reader, reader.initialOffset(), lambda e: e[topic] == {"0": 1, "1": 1, "2": 1}, reads)
    spec = script.apply(own_cluster, Step(0, "pause", leaders[paused]))
    try:
        produce(others, b"during")
        end = _read_until(reader, end, lambda e: all(e[topic][str(p)] == 2 for p in others), reads)
        assert end[topic][str(paused)] == 1  # its leader does not answer: it stays where it was
    finally:
        spec = script.apply(spec, Step(0, "resume", leaders[paused]))
    produce([paused], b"after")
    end = _read_until(reader, end, lambda e: e[topic][str(paused)] == 2, reads)
    read = [row for _, _, rows in reads for row in rows]
    assert sorted(read) == sorted([(p, 0, b"before") for p in leaders] + [(p, 1, b"during") for p in others]
                                  + [(paused, 1, b"after")])
    replay = DriverStreamReader(options)  # as in a task after a restart: nothing but the offsets
    for first, last, rows in reads:
        assert _rows(replay.readBetweenOffsets(first, last)) == rows, (first, last)
