"""`__insync_events`: each node's events.jsonl lines, as records of the partition it leads by preference."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import produce_raw, start, wait_until
from insync.chaos import cluster
from insync.protocol.records import build_batch
from insync.types import EVENTS_TOPIC

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    started = start(tmp_path_factory.mktemp("events"), 3, ["insync.events.topic.enable=true"])
    try:
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(started.directory), 10.0)


def _records(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of the topic: node id -> [(partition, value)] in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(EVENTS_TOPIC, timeout=10).topics[EVENTS_TOPIC].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(EVENTS_TOPIC, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(EVENTS_TOPIC, p, 0) for p in partitions])
        seen: dict[int, list[tuple[int, bytes]]] = {}
        remaining = sum(ends.values())
        for _ in range(200):  # bounded: a poll returns at least one record while any is left
            if remaining <= 0:
                break
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                seen.setdefault(int(message.key()), []).append((message.partition(), message.value()))
                remaining -= 1
        return seen
    finally:
        consumer.close()


def _lines(spec: cluster.ClusterSpec, node_id: int) -> list[bytes]:
    return Path(spec.node(node_id).log_dir / "events.jsonl").read_bytes().splitlines()


def test_one_partition_per_broker_led_by_it_by_preference(spec: cluster.ClusterSpec) -> None:
    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    wait_until(lambda: EVENTS_TOPIC in admin.list_topics(timeout=5).topics, 20, f"{EVENTS_TOPIC} created")
    topic = admin.list_topics(timeout=5).topics[EVENTS_TOPIC]
    assert {p: m.replicas[0] for p, m in topic.partitions.items()} == {0: 1, 1: 2, 2: 3}
    assert all(len(m.replicas) == 3 for m in topic.partitions.values())


def test_every_nodes_events_are_in_the_topic_as_in_its_file(spec: cluster.ClusterSpec) -> None:
    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    admin.create_topics([NewTopic("ev", 1, 3)])["ev"].result(10)  # leader changes, from the controller
    wait_until(lambda: admin.list_topics("ev", timeout=5).topics["ev"].partitions[0].leader > 0, 10, "a leader")
    leader = admin.list_topics("ev", timeout=5).topics["ev"].partitions[0].leader
    for broker in (1, 2, 3):  # a produce to a follower: a produce_rejected event from each follower
        if broker != leader:
            assert produce_raw(spec.node(broker).address, "ev", build_batch([(b"k", b"v")])) != 0
    nodes = [n.node_id for n in spec.nodes]
    followers = {1, 2, 3} - {leader}
    wait_until(lambda: all(_lines(spec, b) for b in followers), 10, "the followers' produce_rejected events")

    def same() -> bool:
        records = _records(spec.bootstrap)
        return all([v for _, v in records.get(n, []) if b'"heartbeat"' not in v] == _lines(spec, n) for n in nodes)

    wait_until(same, 30, "every node's events.jsonl in the topic")
    records = _records(spec.bootstrap)
    assert {n: {p for p, _ in records[n]} for n in followers} == {n: {n - 1} for n in followers}
    changes = [json.loads(v) for _, v in records[spec.controller.node_id]]
    for node in nodes:  # and a heartbeat from every node, twice a second
        assert any(json.loads(v)["type"] == "heartbeat" for _, v in records[node]), node
    assert ("ev", 0) in {(e["topic"], e["partition"]) for e in changes if e["type"] == "leader_change"}
