"""Client benchmarks over the Kafka protocol: produce, consume and end-to-end latency (confluent-kafka).

They speak only the Kafka protocol, so the same run measures insync and any other Kafka-compatible broker
(`insync bench compare` runs insync and Tansu in one session). Each returns a `BenchResult` with msgs/s, MB/s and,
where it applies, p50/p99 latency in ms:
- `produce`: `count` records of `size` bytes as fast as the producer allows (or at `rate`), latency from
  `produce()` to the delivery report;
- `consume`: read `count` records from the earliest offset with `assign` (no group);
- `e2e`: a producer at `rate` msg/s and a consumer in one loop; latency from send to receipt, taken from the
  send time carried in each value.
"""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import asdict, dataclass
from typing import Any

from insync import command_config

DELIVERY_TIMEOUT_S = 60.0
IDLE_TIMEOUT_S = 15.0
CONSUME_BATCH_MAX = 10_000
_SENT_AT = struct.Struct(">d")


@dataclass(frozen=True, slots=True)
class BenchResult:
    mode: str
    messages: int
    message_bytes: int
    seconds: float
    msgs_per_s: float
    mb_per_s: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return round(sorted_values[index], 2)


def _result(mode: str, count: int, size: int, seconds: float, latencies_ms: list[float],
            errors: int) -> BenchResult:
    latencies_ms.sort()
    seconds = max(seconds, 1e-9)
    return BenchResult(mode, count, size, round(seconds, 3), round(count / seconds, 1),
                       round(count * size / seconds / 1e6, 2), percentile(latencies_ms, 0.5),
                       percentile(latencies_ms, 0.99), errors)


def _producer(bootstrap: str, acks: str, extra: dict[str, Any] | None = None) -> Any:
    from confluent_kafka import Producer

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                              "batch.size": 1_000_000, "enable.idempotence": acks in ("all", "-1"),
                              "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
    config.update(extra or {})
    return Producer(command_config.confluent(config))


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str = "all",
            rate: float | None = None) -> BenchResult:
    assert count > 0 and size >= _SENT_AT.size
    producer = _producer(bootstrap, acks)
    payload = os.urandom(size)
    latencies: list[float] = []
    errors = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
            return
        latencies.append((time.perf_counter() - _SENT_AT.unpack_from(msg.value())[0]) * 1000)

    start = time.perf_counter()
    for i in range(count):
        _pace(start, i, rate)
        value = _SENT_AT.pack(time.perf_counter()) + payload[_SENT_AT.size:]
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(DELIVERY_TIMEOUT_S)
    return _result("produce", count, size, time.perf_counter() - start, latencies, errors + remaining)


def _pace(start: float, index: int, rate: float | None) -> None:
    if rate is None:
        return
    delay = start + index / rate - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def _consumer(bootstrap: str, topic: str) -> Any:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(command_config.confluent({
        "bootstrap.servers": bootstrap, "group.id": "insync-bench", "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760}))
    partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    return consumer


def consume(bootstrap: str, topic: str, count: int) -> BenchResult:
    consumer = _consumer(bootstrap, topic)
    received = size = errors = 0
    start = time.perf_counter()
    idle_deadline = start + IDLE_TIMEOUT_S
    try:
        while received < count and time.perf_counter() < idle_deadline:
            # Never more than asked: a batch past `count` would time records that are not counted.
            for message in consumer.consume(num_messages=min(CONSUME_BATCH_MAX, count - received), timeout=0.5):
                if message.error() is not None:
                    errors += 1
                    continue
                received += 1
                size = len(message.value() or b"")
                idle_deadline = time.perf_counter() + IDLE_TIMEOUT_S
    finally:
        consumer.close()
    return _result("consume", received, size, time.perf_counter() - start, [], errors + count - received)


def e2e(bootstrap: str, topic: str, count: int, size: int, rate: float, acks: str = "all") -> BenchResult:
    """Producer at `rate` and consumer in one loop: latency from send to receipt."""
    assert rate > 0
    consumer = _consumer(bootstrap, topic)
    producer = _producer(bootstrap, acks, {"linger.ms": 1})
    payload = os.urandom(size)
    marker = os.urandom(8)  # tells this run's records from older ones in the topic
    latencies: list[float] = []
    start = time.perf_counter()
    sent = 0
    deadline = start + count / rate + DELIVERY_TIMEOUT_S
    try:
        while len(latencies) < count and time.perf_counter() < deadline:
            while sent < count and time.perf_counter() >= start + sent / rate:
                value = _SENT_AT.pack(time.perf_counter()) + marker + payload[_SENT_AT.size + 8:]
                producer.produce(topic, value=value)
                sent += 1
            producer.poll(0)
            for message in consumer.consume(num_messages=1000, timeout=0.001):
                value = message.value()
                if message.error() is None and value and value[_SENT_AT.size:_SENT_AT.size + 8] == marker:
                    latencies.append((time.perf_counter() - _SENT_AT.unpack_from(value)[0]) * 1000)
        producer.flush(DELIVERY_TIMEOUT_S)
    finally:
        consumer.close()
    return _result("e2e", len(latencies), size, time.perf_counter() - start, latencies, count - len(latencies))
