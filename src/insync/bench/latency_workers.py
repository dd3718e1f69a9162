"""The two processes of `insync bench latency`: a producer at a steady rate and a consumer tailing the partition.

Each runs in its own process (as an application's producer and consumer would), so neither's client library
takes the other's CPU time or GIL. Every record starts with `HEADER`: the wall-clock send time (the two processes
share no other clock), the run's marker (records of an earlier run in the same topic are skipped) and whether it
was sent in the measured window or in the warm-up before it. The rest is random bytes up to `record_bytes`.

The producer sends at `rate` records a second from a fixed schedule, so a stall shows in the latencies rather
than lowering the rate. Ack latency is from the send to the delivery callback; it keeps the client's own settings
except acks and linger, and counts the most measured records sent and not yet acknowledged, where a queue building
up between the producer and the ISR shows. The consumer (confluent-kafka, `fetch.wait.max.ms=100`, assigned to
the end of partition 0, no group) takes end-to-end latency as its receive time minus the send time in the record.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from insync.bench.clients import percentile

HEADER = struct.Struct(">d8s?")  # send time (time.time()), run marker, measured (not warm-up)
CLIENTS = ("confluent", "kafka-python", "aiokafka")
DELIVERY_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 15.0
WAIT_S_MAX = 0.05  # the producer's client gets control at least this often while it waits for the next record
# A shorter wait is slept, then polled without blocking: librdkafka truncates a poll's timeout to whole milliseconds,
# and at 2,000 records/s and more a producer spinning on poll(0) took a core from the servers it measured.
POLL_TIMEOUT_S_MIN = 0.001
DRAIN_TIMEOUT_S = 10.0  # how long the consumer waits for the last measured records once the producer is done
CONSUMER_FETCH_WAIT_MS = 100


@dataclass(frozen=True, slots=True)
class ProducerPlan:
    bootstrap: str
    topic: str
    client: str
    rate: float
    warmup_s: float
    seconds: float
    record_bytes: int
    acks: str
    linger_ms: int
    marker: bytes

    def __post_init__(self) -> None:
        assert self.client in CLIENTS and self.rate > 0 and self.seconds > 0 and self.warmup_s >= 0
        assert self.record_bytes >= HEADER.size and len(self.marker) == 8 and self.acks in ("0", "1", "all")
        assert self.linger_ms >= 0


@dataclass(frozen=True, slots=True)
class _Send:
    value: bytes
    sent_at: float
    measured: bool


def summary(latencies_ms: list[float]) -> dict[str, float | None]:
    latencies_ms.sort()
    return {"p50_ms": percentile(latencies_ms, 0.5), "p99_ms": percentile(latencies_ms, 0.99),
            "p999_ms": percentile(latencies_ms, 0.999), "max_ms": round(latencies_ms[-1], 2) if latencies_ms else None}


class _Tally:
    """The measured records' counts and ack latencies; delivery callbacks may run on the client's own thread
    (kafka-python), each counter having a single writer."""

    def __init__(self) -> None:
        self.sent = self.acked = self.failed = self.outstanding_max = 0
        self.acks_ms: list[float] = []

    def on_send(self, send: _Send) -> None:
        if send.measured:
            self.sent += 1
            self.outstanding_max = max(self.outstanding_max, self.sent - self.acked - self.failed)

    def on_delivery(self, send: _Send, ok: bool) -> None:
        if not send.measured:
            return
        if ok:
            self.acks_ms.append((time.time() - send.sent_at) * 1000)
            self.acked += 1
        else:
            self.failed += 1

    def result(self) -> dict[str, Any]:
        return {"sent": self.sent, "acked": self.acked, "errors": self.sent - self.acked,
                "outstanding_max": self.outstanding_max, **summary(self.acks_ms)}


def _schedule(plan: ProducerPlan, started: Any, ended: Any) -> Iterator[_Send | float]:
    """The records to send, each when it falls due, and between them the seconds to wait (at most WAIT_S_MAX).
    Sets `started` when the measured window opens and `ended` when it closes."""
    payload = os.urandom(plan.record_bytes)
    start = time.monotonic()
    measure_from = start + plan.warmup_s
    end = measure_from + plan.seconds
    sent = 0
    now = start
    while now < end:  # bounded by the clock: the generator ends `warmup_s + seconds` after it starts
        if now >= measure_from and not started.is_set():
            started.set()
        due_at = start + sent / plan.rate
        if now < due_at:
            yield min(due_at - now, WAIT_S_MAX)
        else:
            sent_at = time.time()
            measured = due_at >= measure_from
            yield _Send(HEADER.pack(sent_at, plan.marker, measured) + payload[HEADER.size:], sent_at, measured)
            sent += 1
        now = time.monotonic()
    started.set()
    ended.set()


def produce(plan: ProducerPlan, started: Any, ended: Any, results: Any) -> None:
    """Process body: send by the schedule with `plan.client`, then put the tally on `results`."""
    tally = _Tally()
    steps = _schedule(plan, started, ended)
    if plan.client == "confluent":
        _confluent(plan, tally, steps)
    elif plan.client == "kafka-python":
        _kafka_python(plan, tally, steps)
    else:
        asyncio.run(_aiokafka(plan, tally, steps))
    results.put(tally.result())


def _confluent(plan: ProducerPlan, tally: _Tally, steps: Iterator[_Send | float]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": plan.bootstrap, "acks": plan.acks, "linger.ms": plan.linger_ms})
    for step in steps:
        if isinstance(step, float):
            if step < POLL_TIMEOUT_S_MIN:
                time.sleep(step)  # librdkafka's poll takes whole milliseconds: poll(0.0005) would return at once
                step = 0.0
            producer.poll(step)  # serves delivery callbacks as they come, returns at the latest after `step`
            continue
        tally.on_send(step)
        try:
            producer.produce(plan.topic, value=step.value, partition=0,
                             on_delivery=partial(_confluent_done, tally, step))
        except BufferError:  # the client's queue is full (queue.buffering.max.messages): the record fails
            tally.on_delivery(step, ok=False)
        producer.poll(0)
    producer.flush(DELIVERY_TIMEOUT_S)


def _confluent_done(tally: _Tally, send: _Send, error: object, _message: object) -> None:
    tally.on_delivery(send, error is None)


def _acks_value(acks: str) -> str | int:
    return acks if acks == "all" else int(acks)


def _kafka_python(plan: ProducerPlan, tally: _Tally, steps: Iterator[_Send | float]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=plan.bootstrap, acks=_acks_value(plan.acks), linger_ms=plan.linger_ms)
    try:
        for step in steps:
            if isinstance(step, float):
                time.sleep(step)  # kafka-python's own I/O thread sends and runs the callbacks meanwhile
                continue
            tally.on_send(step)
            future = producer.send(plan.topic, value=step.value, partition=0)
            future.add_callback(partial(_kafka_python_done, tally, step, True))
            future.add_errback(partial(_kafka_python_done, tally, step, False))
        producer.flush(DELIVERY_TIMEOUT_S)
    finally:
        producer.close(DELIVERY_TIMEOUT_S)


def _kafka_python_done(tally: _Tally, send: _Send, ok: bool, _metadata_or_error: object) -> None:
    tally.on_delivery(send, ok)


async def _aiokafka(plan: ProducerPlan, tally: _Tally, steps: Iterator[_Send | float]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=plan.bootstrap, acks=_acks_value(plan.acks),
                                linger_ms=plan.linger_ms)
    await producer.start()
    try:
        for step in steps:
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            tally.on_send(step)
            future = await producer.send(plan.topic, value=step.value, partition=0)
            future.add_done_callback(partial(_aiokafka_done, tally, step))
        await asyncio.wait_for(producer.flush(), DELIVERY_TIMEOUT_S)
    finally:
        await producer.stop()


def _aiokafka_done(tally: _Tally, send: _Send, future: asyncio.Future[Any]) -> None:
    tally.on_delivery(send, not future.cancelled() and future.exception() is None)


def consume(bootstrap: str, topic: str, marker: bytes, signals: Any, expected: Any, results: Any,
            run_s_max: float) -> None:
    """Process body: tail partition 0 of `topic` from its end; set `signals.ready` once positioned there. After
    `signals.stop`, read until `expected.value` measured records arrived or DRAIN_TIMEOUT_S passed (and never
    past `run_s_max`), then put the tally on `results`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "insync-bench-latency",
                         "enable.auto.commit": False, "fetch.wait.max.ms": CONSUMER_FETCH_WAIT_MS})
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + run_s_max
    try:
        # From the partition's end as it is now (ListOffsets latest), so the consumer is in place before
        # the producer starts.
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=READY_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, end)])
        signals.ready.set()
        while time.monotonic() < deadline:
            if signals.stop.is_set():
                deadline = min(deadline, time.monotonic() + DRAIN_TIMEOUT_S)
                if len(latencies) >= expected.value:
                    break
            # poll, not consume(n, timeout): librdkafka's consume waits for n records or the whole timeout,
            # which would add up to the timeout to every latency.
            message = consumer.poll(0.1)
            if message is None:
                continue
            value = message.value()
            if message.error() is not None or value is None or len(value) < HEADER.size:
                errors += message.error() is not None
                continue
            sent_at, run, measured = HEADER.unpack_from(value)
            if run == marker and measured:
                latencies.append((time.time() - sent_at) * 1000)
    finally:
        consumer.close()
    results.put({"read": len(latencies), "errors": errors, **summary(latencies)})
