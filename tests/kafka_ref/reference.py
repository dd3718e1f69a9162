"""Helpers for the checks against real Apache Kafka (imported by the tests beside this file)."""

from __future__ import annotations

import time
from pathlib import Path

from insync.chaos import cluster
from insync.waiting import wait_until

Read = list[tuple[int, bytes | None, bytes | None]]  # (offset, key, value) as a consumer got them

# The releases the compatibility checks run: the line with ELR on by default, the newest 4.x, and the last
# ZooKeeper release, whose behaviour the seeds describe.
VERSIONS = ("4.1", "4", "3.9")


def start_kafka(directory: Path, version: str, brokers: int = 3, extra: list[str] | None = None
                ) -> cluster.ClusterSpec:
    return cluster.up(str(directory), brokers, 0, list(extra or []), engine=f"kafka:{version}")


def read_to_sentinel(bootstrap: str, topic: str, sentinel_key: bytes, isolation: str = "read_uncommitted",
                     timeout_s: float = 20) -> Read:
    """Partition 0 of `topic` from offset 0 up to the first record keyed `sentinel_key` (included), with
    confluent-kafka at `isolation.level`: how the tests beside Kafka read a log whose end they marked."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: Read = []

    def up_to_the_sentinel() -> bool:
        for message in consumer.consume(num_messages=1000, timeout=1):
            assert message.error() is None, message.error()
            found.append((message.offset(), message.key(), message.value()))
        return bool(found) and found[-1][1] == sentinel_key

    try:
        wait_until(up_to_the_sentinel, timeout_s, "the consumer to reach the sentinel")
    finally:
        consumer.close()
    return found
