"""Real, unmodified Kafka clients against a 3-broker insync cluster: metadata, a 3-partition RF-3 topic,
10,000 keyed messages with acks=all, read back with assign() from the earliest offset, every message checked
in order per partition."""

from __future__ import annotations

import asyncio
import subprocess
from collections import defaultdict

import pytest

from insync.admin import describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)

COUNT = 10_000
KEYS = 37


def messages(tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % KEYS}".encode(), f"{tag}-{i}".encode()) for i in range(COUNT)]


def check_read_back(tag: str, read: list[tuple[int, bytes | None, bytes | None]]) -> None:
    """Every message exactly once, and per key (so per partition) in the order it was sent."""
    values = [v.decode() for _, _, v in read if v is not None and v.startswith(tag.encode() + b"-")]
    assert sorted(values, key=lambda v: int(v.rsplit("-", 1)[1])) == [v.decode() for _, v in messages(tag)]
    by_key: dict[bytes | None, list[int]] = defaultdict(list)
    partitions_of_key: dict[bytes | None, set[int]] = defaultdict(set)
    for partition, key, value in read:
        assert value is not None
        by_key[key].append(int(value.rsplit(b"-", 1)[1]))
        partitions_of_key[key].add(partition)
    assert all(seq == sorted(seq) for seq in by_key.values())
    assert all(len(p) == 1 for p in partitions_of_key.values())


def new_topic(spec: ClusterSpec, name: str) -> None:
    ensure_topic(spec.bootstrap, name, 3, 3, {"min.insync.replicas": "2"})
    rows = describe_rows(spec.bootstrap, [name])
    assert [(len(r.replicas), len(r.isr)) for r in rows] == [(3, 3)] * 3


def test_confluent_kafka(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    new_topic(insync_cluster, "ck")
    producer = Producer({"bootstrap.servers": insync_cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    assert len(producer.list_topics(timeout=10).brokers) == 3
    failures: list[object] = []
    for key, value in messages("ck"):
        producer.produce("ck", key=key, value=value,
                         on_delivery=lambda err, _m: failures.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "ck",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck", p, OFFSET_BEGINNING) for p in range(3)])
    read: list[tuple[int, bytes | None, bytes | None]] = []
    for _ in range(200):
        for message in consumer.consume(num_messages=5000, timeout=0.5):
            assert message.error() is None, message.error()
            read.append((message.partition(), message.key(), message.value()))
        if len(read) >= COUNT:
            break
    consumer.close()
    check_read_back("ck", read)


def test_kafka_python_default_idempotent_producer(insync_cluster: ClusterSpec) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    new_topic(insync_cluster, "kp")
    servers = insync_cluster.bootstrap.split(",")
    producer = KafkaProducer(bootstrap_servers=servers)  # kafka-python 3: idempotent, acks=-1 by default
    futures = [producer.send("kp", key=key, value=value) for key, value in messages("kp")]
    producer.flush(60)
    assert all(f.get(timeout=10).offset >= 0 for f in futures)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, consumer_timeout_ms=5000)
    partitions = [TopicPartition("kp", p) for p in range(3)]
    assert consumer.partitions_for_topic("kp") == {0, 1, 2}
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    read = [(m.partition, m.key, m.value) for m in consumer]
    consumer.close()
    check_read_back("kp", read)


def test_aiokafka(insync_cluster: ClusterSpec) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    new_topic(insync_cluster, "aio")

    async def run() -> list[tuple[int, bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=insync_cluster.bootstrap, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            sent = [await producer.send("aio", key=k, value=v) for k, v in messages("aio")]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=insync_cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        read: list[tuple[int, bytes | None, bytes | None]] = []
        try:
            partitions = [TopicPartition("aio", p) for p in range(3)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            for _ in range(100):
                batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                read += [(m.partition, m.key, m.value) for ms in batches.values() for m in ms]
                if len(read) >= COUNT:
                    break
        finally:
            await consumer.stop()
        return read

    check_read_back("aio", asyncio.run(run()))


def test_kcat(insync_cluster: ClusterSpec, tmp_path: object) -> None:
    new_topic(insync_cluster, "kc")
    lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in messages("kc"))
    produced = subprocess.run(["kcat", "-b", insync_cluster.bootstrap, "-t", "kc", "-P", "-K:",
                               "-X", "acks=all", "-X", "enable.idempotence=true"],
                              input=lines.encode(), capture_output=True, timeout=90)
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    metadata = subprocess.run(["kcat", "-b", insync_cluster.bootstrap, "-L", "-t", "kc"], capture_output=True,
                              timeout=30, text=True)
    assert "3 brokers" in metadata.stdout and "3 partitions" in metadata.stdout
    consumed = subprocess.run(["kcat", "-b", insync_cluster.bootstrap, "-t", "kc", "-C", "-o", "beginning", "-e",
                               "-q", "-f", "%p\t%k\t%s\n"], capture_output=True, timeout=90)
    assert consumed.returncode == 0, consumed.stderr.decode()[-2000:]
    read = []
    for line in consumed.stdout.decode().splitlines():
        partition, key, value = line.split("\t")
        read.append((int(partition), key.encode(), value.encode()))
    check_read_back("kc", read)
