"""Offsets, DeleteRecords, configs and cluster description over the wire, and the errors bad produce
requests get: unknown topic, a follower asked to lead, a corrupt batch, an oversized batch. Nothing partial is
ever appended."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest

from conftest import produce_raw
from insync import admin, admin_requests
from insync.admin import _brokers_behind, describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec, free_ports
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)


def test_offsets_delete_records_configs(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

    ensure_topic(insync_cluster.bootstrap, "admin", 1, 3, {"min.insync.replicas": "2", "retention.ms": "3600000"})
    producer = Producer({"bootstrap.servers": insync_cluster.bootstrap, "acks": "all"})
    before = int(time.time() * 1000)
    for i in range(100):
        producer.produce("admin", value=str(i).encode(), timestamp=before + i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "admin"})
    tp = TopicPartition("admin", 0)
    assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 100)
    found = consumer.offsets_for_times([TopicPartition("admin", 0, before + 42)], timeout=10)
    assert found[0].offset == 42

    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    result = admin.delete_records([TopicPartition("admin", 0, 50)])
    assert list(result.values())[0].result(timeout=10).low_watermark == 50
    assert consumer.get_watermark_offsets(tp, timeout=10) == (50, 100)
    consumer.close()

    configs = admin.describe_configs([ConfigResource("topic", "admin")])
    entries = list(configs.values())[0].result(timeout=10)
    assert entries["min.insync.replicas"].value == "2"
    assert entries["retention.ms"].value == "3600000"
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=10)
    assert sorted(node.id for node in cluster.nodes) == [1, 2, 3]


def test_ensure_topic_returns_once_every_broker_knows_the_leaders(insync_cluster: ClusterSpec,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata reaches brokers asynchronously: the wait asks each broker itself, not whichever the client picks."""
    ensure_topic(insync_cluster.bootstrap, "everywhere", 3, 3, {})
    for broker in insync_cluster.brokers:
        assert admin_requests.leaders_known(broker.address, "everywhere", 10) == 3, broker.node_id
    first = insync_cluster.brokers[0]
    assert admin_requests.leaders_known(first.address, "nowhere", 10) is None
    (closed,) = free_ports(1)
    brokers = [SimpleNamespace(id=b.node_id, host=b.host, port=b.port) for b in insync_cluster.brokers]
    assert _brokers_behind(brokers, "everywhere", 3, 5) == []
    assert _brokers_behind(brokers, "everywhere", 4, 5) == sorted(b.node_id for b in insync_cluster.brokers)
    assert _brokers_behind(brokers, "nowhere", 1, 5) == sorted(b.node_id for b in insync_cluster.brokers)
    assert _brokers_behind([*brokers, SimpleNamespace(id=9, host="127.0.0.1", port=closed)], "everywhere", 3, 5) \
        == [9]
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers: behind once 0.5 s pass
        mute = SimpleNamespace(id=7, host="127.0.0.1", port=silent.getsockname()[1])
        assert _brokers_behind([mute], "everywhere", 3, 0.5) == [7]
    # A broker that stays behind is named when the wait gives up.
    monkeypatch.setattr(admin, "_brokers_behind", lambda *_: [9])
    with pytest.raises(TimeoutError, match=r"not within 0.5 s: .*every partition in broker 9"):
        ensure_topic(insync_cluster.bootstrap, "everywhere", 3, 3, {}, deadline_s=0.5)


def test_bad_produce_requests_get_kafka_errors_and_append_nothing(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, "errs", 1, 3, {"max.message.bytes": "2000"})
    row = describe_rows(insync_cluster.bootstrap, ["errs"])[0]
    leader = insync_cluster.node(row.leader).address
    follower = insync_cluster.node(next(b for b in row.replicas if b != row.leader)).address
    good = build_batch([(b"k", b"v")])

    assert produce_raw(leader, "no-such-topic", good) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert produce_raw(follower, "errs", good) == 6  # NOT_LEADER_OR_FOLLOWER
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a record byte: inside the CRC
    assert produce_raw(leader, "errs", bytes(corrupt)) == 2  # CORRUPT_MESSAGE
    assert produce_raw(leader, "errs", build_batch([(b"k", b"x" * 5000)])) == 10  # MESSAGE_TOO_LARGE
    assert produce_raw(leader, "errs", good[:-7]) == 2  # truncated batch
    assert produce_raw(leader, "errs", good, acks=5) == 21  # INVALID_REQUIRED_ACKS

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "errs"})
    assert consumer.get_watermark_offsets(TopicPartition("errs", 0), timeout=10) == (0, 0)
    consumer.close()
    assert produce_raw(leader, "errs", good) == 0
