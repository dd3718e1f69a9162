"""Steady-state throughput: produce and consume for a fixed time after a warm-up.

`clients.produce`/`clients.consume` time a run from its first call, connecting and fetching metadata included.
These measure only a window that starts after `warmup_s` of the same traffic and lasts `seconds`, and take the
servers' CPU over that window alone (`cpu_s`, sampled at its two ends).
- produce: one confluent-kafka producer sends as fast as it can; what counts is what the brokers acknowledged
  inside the window (records handed over minus `len(producer)`, at each end). Delivery reports come only for
  errors, so the client spends no Python time per acknowledged record, the same for every target.
- consume: one consumer (`assign`, no group) reads from the earliest offset and starts each partition over at
  its end (`enable.partition.eof`), so a small topic still gives a steady window. Once librdkafka's unread
  records reach `queued.max.messages.kbytes` it stops fetching the partition for `fetch.queue.backoff.ms`
  (1,000 ms by default, see librdkafka#2879), so a cluster that fills the queue faster than the application
  drains it sits idle for most of each second; `compare` reports the default and a lower backoff.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from insync.bench import clients

WARMUP_S = 3.0
SECONDS_MIN = 10.0
POLL_EVERY = 1_000  # records handed to the producer between two poll(0) calls
# The producer's queue: room for every request librdkafka may have in flight (5 per broker, up to 1 MB each) and
# as much again waiting, not a gigabyte that takes the warm-up to fill and the client's CPU to allocate.
QUEUE_KBYTES = 64 * 1024
FULL_QUEUE_WAIT_S = 0.001
CONSUME_BATCH = 10_000
CONSUME_TIMEOUT_S = 0.1
# A fetch at a partition's end waits at the broker up to this long, and a seek waits for it: at librdkafka's
# default (500 ms) every start-over would pause the partition for half a second. Seeking to the log start offset
# read once (not to OFFSET_BEGINNING) saves a ListOffsets round trip per start-over.
EOF_FETCH_WAIT_MS = 10
STALL_S = 15.0  # a window with no progress for this long ends the run with an error


@dataclass(frozen=True, slots=True)
class SteadyResult:
    mode: str
    warmup_s: float
    seconds: float
    messages: int
    message_bytes: int
    msgs_per_s: float
    mb_per_s: float
    server_cpu_ms_per_mb: float | None
    errors: int


CpuSampler = Callable[[], float | None]


def _result(mode: str, warmup_s: float, seconds: float, messages: int, size: int, cpu: tuple[float | None,
            float | None], errors: int) -> SteadyResult:
    megabytes = messages * size / 1e6
    start, end = cpu
    cpu_ms = None if start is None or end is None or megabytes <= 0 else round((end - start) * 1000 / megabytes, 2)
    return SteadyResult(mode, warmup_s, round(seconds, 3), messages, size, round(messages / seconds, 1),
                        round(megabytes / seconds, 2), cpu_ms, errors)


def produce(bootstrap: str, topic: str, size: int, acks: str, cpu_s: CpuSampler, warmup_s: float = WARMUP_S,
            seconds: float = SECONDS_MIN) -> SteadyResult:
    assert size > 0 and warmup_s >= 0 and seconds > 0
    failed = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = clients._producer(bootstrap, acks, {"delivery.report.only.error": True, "on_delivery": report,
                                                   "queue.buffering.max.kbytes": QUEUE_KBYTES})
    payload = os.urandom(size)
    sent = 0
    begin = time.perf_counter()
    next_mark = begin + warmup_s  # the window's start, then its end: `seconds` after the start was taken
    marks: list[tuple[float, int, float | None]] = []  # (time, records acknowledged so far, server CPU s)
    try:
        while len(marks) < 2:
            for _ in range(POLL_EVERY):
                try:
                    producer.produce(topic, value=payload)
                    sent += 1
                except BufferError:
                    producer.poll(FULL_QUEUE_WAIT_S)
                    break
            producer.poll(0)
            now = time.perf_counter()
            if now >= next_mark:
                marks.append((now, sent - len(producer) - failed, cpu_s()))
                next_mark = now + seconds
    finally:
        producer.flush(clients.DELIVERY_TIMEOUT_S)
    (t0, acked0, cpu0), (t1, acked1, cpu1) = marks
    return _result("produce", warmup_s, t1 - t0, acked1 - acked0, size, (cpu0, cpu1), failed)


def consume(bootstrap: str, topic: str, cpu_s: CpuSampler, warmup_s: float = WARMUP_S,
            seconds: float = SECONDS_MIN, fetch_queue_backoff_ms: int | None = None) -> SteadyResult:
    """`fetch_queue_backoff_ms`: librdkafka's `fetch.queue.backoff.ms` (None: its default, 1000 ms)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    assert warmup_s >= 0 and seconds > 0 and (fetch_queue_backoff_ms is None or fetch_queue_backoff_ms >= 0)
    config = {"bootstrap.servers": bootstrap, "group.id": "insync-bench-steady", "enable.auto.commit": False,
              "enable.partition.eof": True, "fetch.wait.max.ms": EOF_FETCH_WAIT_MS}
    if fetch_queue_backoff_ms is not None:
        config["fetch.queue.backoff.ms"] = fetch_queue_backoff_ms
    consumer = Consumer(config)
    partitions = sorted(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
    starts = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[0] for p in partitions}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    received = size = errors = 0
    begin = time.perf_counter()
    next_mark = begin + warmup_s  # the window's start, then its end: `seconds` after the start was taken
    marks: list[tuple[float, int, float | None]] = []
    progress_at = begin
    try:
        while len(marks) < 2 and time.perf_counter() - progress_at < STALL_S:
            for message in consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_TIMEOUT_S):
                error = message.error()
                if error is None:
                    received += 1
                    size = len(message.value() or b"")
                elif error.code() == KafkaError._PARTITION_EOF:
                    # Read again from the start: the window measures reading, not how big the topic is.
                    partition = message.partition()
                    assert partition is not None, "an end-of-partition event names its partition"
                    consumer.seek(TopicPartition(topic, partition, starts[partition]))
                else:
                    errors += 1
                progress_at = time.perf_counter()
            now = time.perf_counter()
            if now >= next_mark:
                marks.append((now, received, cpu_s()))
                next_mark = now + seconds
    finally:
        consumer.close()
    if len(marks) < 2:
        return _result("consume", warmup_s, time.perf_counter() - begin, 0, size, (None, None), errors + 1)
    (t0, count0, cpu0), (t1, count1, cpu1) = marks
    return _result("consume", warmup_s, t1 - t0, count1 - count0, size, (cpu0, cpu1), errors)
