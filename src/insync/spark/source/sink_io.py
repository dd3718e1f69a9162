"""The sink of the `insync` Spark data source: each task produces its rows with confluent-kafka.

`write_batches` produces with `acks=all` and the idempotent producer: no duplicates from the producer's own
retries, but a retried Spark task writes its rows again (at-least-once). Whatever happens, the task's producer is
shut before it returns or raises (`_shut`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer


def producer_config(client_conf: Mapping[str, str]) -> dict[str, object]:
    """acks=all and the idempotent producer: a write is acknowledged once in the ISR, producer retries dedupe."""
    conf: dict[str, object] = {"linger.ms": 5, "compression.type": "none"}
    conf.update(client_conf)
    conf.update({"acks": "all", "enable.idempotence": True})
    return conf


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which optional columns a sink DataFrame has (value is required), checked on the driver."""

    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"cannot write a {type(value).__name__} as Kafka bytes")


class _Deliveries:
    """Counts delivery reports; keeps the first failure for the error message."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = f"{message.topic()}[{message.partition()}]: {error}"


def write_batches(batches: Iterator[pa.RecordBatch], client_conf: Mapping[str, str], topic: str | None,
                  columns: SinkColumns, flush_timeout_s: float) -> int:
    """Produce every row of `batches`; return how many were acknowledged. Raises if any write failed."""
    assert topic is not None or columns.has_topic, "the driver checked that a topic is known"
    producer = Producer(producer_config(client_conf))
    try:
        return _write_all(producer, batches, topic, columns, flush_timeout_s)
    finally:
        _shut(producer)


def _shut(producer: Producer) -> None:
    """Drop what a failed write left queued and stop the client's threads now. A failed task's traceback keeps the
    producer alive in the reused Python worker, where librdkafka would go on reconnecting (and logging every
    attempt) to a cluster that may be gone. The records dropped are the failed task's, which a retry writes."""
    producer.purge()
    producer.flush(0)  # serves the purged records' delivery reports
    close = getattr(producer, "close", None)  # confluent-kafka 2.13+; before, the producer goes when collected
    if close is not None:
        close()


def _write_all(producer: Producer, batches: Iterator[pa.RecordBatch], topic: str | None, columns: SinkColumns,
               flush_timeout_s: float) -> int:
    deliveries = _Deliveries()
    sent = 0
    for batch in batches:
        data = batch.to_pydict()
        rows = batch.num_rows
        values = data["value"]
        keys = data["key"] if columns.has_key else [None] * rows
        topics = [topic] * rows if topic is not None else data["topic"]
        partitions = data["partition"] if columns.has_partition else [None] * rows
        headers = data["headers"] if columns.has_headers else [None] * rows
        for value, key, row_topic, partition, row_headers in zip(values, keys, topics, partitions, headers,
                                                                 strict=True):
            if row_topic is None:
                raise ValueError("a row has a null topic and the sink has no topic option")
            record = _Record(row_topic, _as_bytes(value), _as_bytes(key),
                             -1 if partition is None else int(partition),
                             [(h["key"], _as_bytes(h["value"])) for h in row_headers] if row_headers else None)
            _produce(producer, record, deliveries, flush_timeout_s)
            sent += 1
        producer.poll(0)
    remaining = producer.flush(flush_timeout_s)
    if remaining or deliveries.failed:
        raise RuntimeError(
            f"insync sink: {deliveries.failed} of {sent} records failed and {remaining} were not acknowledged "
            f"within {flush_timeout_s} s (first error: {deliveries.first_error}). The stream sink is "
            "at-least-once: records of this task that were written stay written, and a retry writes them again.")
    assert deliveries.delivered == sent, (deliveries.delivered, sent)
    return sent


@dataclass(frozen=True, slots=True)
class _Record:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int  # -1: the producer's partitioner picks
    headers: list[tuple[str, str | bytes | None]] | None


def _produce(producer: Producer, record: _Record, deliveries: _Deliveries, timeout_s: float) -> None:
    """produce(), waiting for queue space (librdkafka's local queue is bounded) for at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            producer.produce(record.topic, record.value, record.key, partition=record.partition,
                             on_delivery=deliveries, headers=record.headers)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise
            producer.poll(0.05)
