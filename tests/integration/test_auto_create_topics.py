"""Producers writing to a topic nobody created, as Kafka's default `auto.create.topics.enable=true` allows: the
Metadata request creates it through the controller (with `num.partitions`, and the replication factor `insync
cluster up` sets, min(3, brokers)) and the records arrive. Illegal names are INVALID_TOPIC_EXCEPTION; a broker
with the switch off, or a request that does not allow creation, gets UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from conftest import start
from insync import errors
from insync.admin import describe_rows
from insync.chaos.cluster import ClusterSpec, down
from insync.protocol.kio import build, nested, request_class
from insync.server.client import KafkaConnection
from insync.wire.versions import METADATA

pytestmark = pytest.mark.timeout(120)

# Shorter than librdkafka's topic.metadata.propagation.max.ms (30 s): a producer that had to wait that out for an
# unknown topic (what it did before auto-creation) fails its messages instead.
DELIVERY_TIMEOUT_MS = 20_000


def metadata_errors(address: str, names: tuple[str, ...], allow: bool) -> dict[str, int]:
    """Topic name -> error code of one Metadata v12 request to `address`."""
    cls = request_class(METADATA, 12)
    body = build(cls, topics=tuple(build(nested(cls, "MetadataRequestTopic"), name=n, topic_id=None) for n in names),
                 allow_auto_topic_creation=allow, include_topic_authorized_operations=False)
    host, port = address.split(":")

    async def ask() -> Any:
        connection = KafkaConnection(host, int(port))
        try:
            return await connection.request(body, 15)
        finally:
            await connection.close()

    return {t.name: int(t.error_code) for t in asyncio.run(ask()).topics}


def test_confluent_kafka_producer_creates_its_topic(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": insync_cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": DELIVERY_TIMEOUT_MS})
    failures: list[object] = []
    for i in range(10):
        producer.produce("auto-ck", value=str(i).encode(),
                         on_delivery=lambda err, _m: failures.append(err) if err else None)
    assert producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5) == 0 and not failures, failures
    rows = describe_rows(insync_cluster.bootstrap, ["auto-ck"])
    assert [(r.partition, len(r.replicas)) for r in rows] == [(0, 3)]  # num.partitions 1, RF min(3, brokers)


def test_kafka_python_producer_creates_its_topic(insync_cluster: ClusterSpec) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=insync_cluster.bootstrap.split(","), acks="all",
                             max_block_ms=DELIVERY_TIMEOUT_MS)
    try:
        assert producer.send("auto-kp", b"hello").get(timeout=DELIVERY_TIMEOUT_MS / 1000).offset == 0
    finally:
        producer.close(timeout=5)
    assert len(describe_rows(insync_cluster.bootstrap, ["auto-kp"])) == 1


def test_illegal_names_and_requests_not_allowing_creation(insync_cluster: ClusterSpec) -> None:
    address = insync_cluster.brokers[0].address
    answer = metadata_errors(address, ("auto-not-allowed", "bad/name"), allow=False)
    assert answer == {"auto-not-allowed": errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                      "bad/name": errors.INVALID_TOPIC_EXCEPTION.code}
    answer = metadata_errors(address, ("bad/name",), allow=True)
    assert answer == {"bad/name": errors.INVALID_TOPIC_EXCEPTION.code}
    assert metadata_errors(address, ("auto-not-allowed",), allow=False) == {
        "auto-not-allowed": errors.UNKNOWN_TOPIC_OR_PARTITION.code}  # the first request did not create it


def test_switched_off_broker_creates_nothing(tmp_path: Path) -> None:
    spec = start(tmp_path, brokers=1, extra=["auto.create.topics.enable=false"])
    try:
        address = spec.brokers[0].address
        for _ in range(2):  # the second answer shows the first created nothing
            assert metadata_errors(address, ("nobody-made-me",), allow=True) == {
                "nobody-made-me": errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    finally:
        down(ClusterSpec.load(spec.directory), 10.0)
