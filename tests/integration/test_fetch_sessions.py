"""Followers fetch in incremental fetch sessions (KIP-227) on real processes: each leader keeps one session per
follower broker holding every partition it follows there (Kafka's FetchSessionCache gauges on the metrics
endpoint), acks=all writes complete through them, and a follower killed and restarted opens a new session that
replaces its old one, with nothing acknowledged lost, and no change that a leader's session visits missed."""

from __future__ import annotations

import re
import signal
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import running
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.waiting import wait_until

TOPIC = "sessions"
PARTITIONS = 12
RECORDS = 600
GAUGE = re.compile(r"^(NumIncrementalFetchSessions|NumIncrementalFetchPartitionsCached) (\S+)$", re.MULTILINE)
MISSED = re.compile(r"^IncrementalFetchMissedChanges (\S+)$", re.MULTILINE)


def gauges(spec: cluster.ClusterSpec, node_id: int) -> dict[str, int]:
    port = spec.node(node_id).metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {name: int(float(value)) for name, value in GAUGE.findall(text)}


def missed_changes(spec: cluster.ClusterSpec) -> list[int]:
    """Per broker, the changed partitions only a session's full walk found: each a change no mark named."""
    texts = [urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=5).read().decode()
             for b in spec.brokers]
    return [int(float(MISSED.findall(text)[0])) for text in texts]


def followed_from(spec: cluster.ClusterSpec) -> dict[int, tuple[int, int]]:
    """For each broker, how many brokers follow partitions from it and how many partition replicas they follow (the
    test's topic is the only one until its consumer reads)."""
    followers: dict[int, set[int]] = {b.node_id: set() for b in spec.brokers}
    replicas = {b.node_id: 0 for b in spec.brokers}
    for row in describe_rows(spec.bootstrap, [TOPIC]):
        if row.leader in followers:
            followers[row.leader].update(r for r in row.replicas if r != row.leader)
            replicas[row.leader] += len(row.replicas) - 1
    return {node_id: (len(followers[node_id]), replicas[node_id]) for node_id in followers}


def sessions_hold_every_followed_partition(spec: cluster.ClusterSpec) -> bool:
    return all(gauges(spec, node_id) == {"NumIncrementalFetchSessions": sessions,
                                         "NumIncrementalFetchPartitionsCached": cached}
               for node_id, (sessions, cached) in followed_from(spec).items())


def produce(bootstrap: str, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, want: int) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sessions-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: set[bytes] = set()
    try:
        def enough() -> bool:
            seen.update(m.value() or b"" for m in consumer.consume(1000, 0.5) if m.error() is None)
            return len(seen) >= want

        wait_until(enough, 60, f"{want} records read back")
    finally:
        consumer.close()
    return seen


def test_followers_fetch_in_sessions_and_a_restarted_follower_replaces_its_own(tmp_path: Path) -> None:
    with running(tmp_path / "cluster", 3) as spec:
        ensure_topic(spec.bootstrap, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        produce(spec.bootstrap, 0)
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 30, "full ISRs")
        wait_until(lambda: sessions_hold_every_followed_partition(spec), 30,
                   lambda: f"one session per follower on each leader: {[gauges(spec, b.node_id) for b in spec.brokers]}")
        victim = spec.brokers[-1].node_id
        killed = cluster.stop_node(cluster.ClusterSpec.load(spec.directory), victim, sig=signal.SIGKILL)
        produce(spec.bootstrap, RECORDS)  # acks=all at min ISR 2 while the follower is gone
        restarted = cluster.start_node(killed, victim)
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(restarted.bootstrap, [TOPIC])), 60,
                   f"broker {victim} back in every ISR")
        wait_until(lambda: sessions_hold_every_followed_partition(restarted), 30,
                   lambda: f"the restarted follower's sessions replace its old ones: "
                           f"{[gauges(restarted, b.node_id) for b in restarted.brokers]}")
        assert read_all(restarted.bootstrap, 2 * RECORDS) == {b"%d" % i for i in range(2 * RECORDS)}
        # Leaders visit only what changed: the writes, the kill, the ISR's shrink and expansion were all marked.
        assert missed_changes(restarted) == [0] * len(restarted.brokers)
