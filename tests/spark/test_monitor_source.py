"""What the monitor needs of the `insync` source, on a live broker: the driver's listing gives each partition's
leader, a task goes to the leader it is given and falls back to asking the bootstrap servers when that one does
not answer, and a partition without offsets is an error naming it where the query cannot go on without it."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from insync import errors
from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec, free_ports
from insync.spark.source import fetch_client, kafka_io
from insync.spark.source.fetch_client import PartitionFetcher
from insync.spark.source.kafka_io import Metadata, OffsetsUnanswered, Subscription
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
