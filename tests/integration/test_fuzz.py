"""Hundreds of mutated and truncated requests at a live broker; afterwards it still serves produce and fetch.

Seed requests are real ones (ApiVersions, Metadata, DescribeTopicPartitions, Produce with a valid batch, Fetch,
ListOffsets, CreateTopics) in several versions; each is mutated (bytes flipped, truncated, length prefix lied about,
garbage appended) and sent on its own connection. The broker may answer or close the connection, as Kafka
does; it must never stop serving, and nothing half-applied may show up in the topic.
"""

from __future__ import annotations

import random
import socket
import struct

import pytest
from kio.index import load_request_schema

from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.protocol.codec import encode_request
from insync.protocol.kio import build, nested
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(180)

MUTANTS = 400
SEED = 20261122


def seeds() -> list[bytes]:
    out = []
    for version in (0, 3, 4):
        schema = load_request_schema(18, version)
        body = schema(client_software_name="f", client_software_version="1") if version >= 3 else schema()
        out.append(encode_request(body, 1))
    for version in (1, 9, 12):
        cls = load_request_schema(3, version)
        topic = build(nested(cls, "MetadataRequestTopic"), name="fuzz", topic_id=None)
        out.append(encode_request(build(cls, topics=(topic,), allow_auto_topic_creation=False,
                                        include_cluster_authorized_operations=False,
                                        include_topic_authorized_operations=False), 2))
    cls = load_request_schema(75, 0)
    cursor = build(nested(cls, "Cursor"), topic_name="fuzz", partition_index=0)
    out.append(encode_request(build(cls, topics=(build(nested(cls, "TopicRequest"), name="fuzz"),),
                                    response_partition_limit=1, cursor=cursor), 4))
    for version in (3, 9):
        cls = load_request_schema(0, version)
        data = build(nested(cls, "PartitionProduceData"), index=0,
                     records=build_batch([(b"k", b"fuzz-seed")]))
        topic = build(nested(cls, "TopicProduceData"), name="fuzz", partition_data=(data,))
        out.append(encode_request(build(cls, transactional_id=None, acks=1, timeout=_ms(1000),
                                        topic_data=(topic,)), 3))
    return out


def _ms(value: int) -> object:
    import datetime

    return datetime.timedelta(milliseconds=value)


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(5)
    if kind == 0:  # flip bytes in the body
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, len(data))] = rng.randrange(256)
    elif kind == 1:  # truncate, keeping the length prefix honest
        cut = rng.randrange(8, len(data))
        data = bytearray(struct.pack(">i", cut - 4)) + data[4:cut]
    elif kind == 2:  # the length prefix lies
        data[:4] = struct.pack(">i", rng.choice([0, 3, len(data) + 100, 2**31 - 1, -5]))
    elif kind == 3:  # garbage appended inside the frame
        extra = rng.randbytes(rng.randint(1, 64))
        data = bytearray(struct.pack(">i", len(data) - 4 + len(extra))) + data[4:] + extra
    else:  # pure noise
        data = bytearray(rng.randbytes(rng.randint(1, 200)))
    return bytes(data)


def send(address: tuple[str, int], payload: bytes) -> None:
    with socket.create_connection(address, timeout=5) as sock:
        sock.settimeout(2)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # closed on us, as Kafka does for malformed requests


def test_broker_survives_mutated_requests(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    ensure_topic(insync_cluster.bootstrap, "fuzz", 1, 3, {})
    rng = random.Random(SEED)
    base = seeds()
    target = insync_cluster.brokers[0]
    for _ in range(MUTANTS):
        send(("127.0.0.1", target.port), mutate(rng, rng.choice(base)))

    producer = Producer({"bootstrap.servers": target.address, "acks": "all"})
    producer.produce("fuzz", value=b"after-the-storm")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": target.address, "group.id": "fuzz", "enable.auto.commit": False})
    consumer.assign([TopicPartition("fuzz", 0, OFFSET_BEGINNING)])
    values = []
    for _ in range(40):
        values += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
        if b"after-the-storm" in values:
            break
    consumer.close()
    assert b"after-the-storm" in values
    # Mutated produce requests either landed whole (a valid batch) or not at all.
    assert all(v in (b"fuzz-seed", b"after-the-storm") for v in values), values[:5]
