"""The Kafka side of the `insync` Spark data source: metadata and offsets on the driver, reads and writes in tasks.

Everything here talks to brokers through confluent-kafka (librdkafka), so it works against any Kafka-protocol
broker. The driver uses an `AdminClient` (`Metadata`): topic listing for `subscribe`/`subscribePattern`, and
ListOffsets for earliest (log start), latest (the high watermark: committed data only) and timestamps.

A task reads exactly one `OffsetRange` `[start, end)` of one partition (`RangeFetch`): a consumer `assign`ed at
`start` (no group, no commits) collects records into Arrow record batches whose schema matches Spark's Kafka
source exactly. Offsets missing inside the range are normal (compaction, transaction markers); data loss is
when the range is no longer there: `start` is behind the log start (retention, DeleteRecords), or the log end
went back below `end` (truncation after a leader change). Loss is reported as `DataLoss`; with
`failOnDataLoss` the task raises `DataLossError`, otherwise it logs, counts and skips to what still exists.

The sink (`write_batches`) produces rows with `acks=all` and the idempotent producer: no duplicates from the
producer's own retries, but a retried Spark task writes its rows again (at-least-once).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, IsolationLevel, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]  # public, not in stubs

from insync import limits
from insync.types import TopicPartition

log = logging.getLogger(__name__)

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
ADMIN_TIMEOUT_S = 30.0  # one metadata or ListOffsets round on the driver
WATERMARK_CHECK_INTERVAL_S = 1.0  # how often a task with nothing to read asks where the log starts and ends
POLL_INTERVAL_S = 0.5


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The exact Arrow schema of the batches a task yields (Spark rejects large_binary, int32 offsets, ...)."""
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
              ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(HEADER_TYPE)))
    return pa.schema(fields)


class DataLossError(Exception):
    """Offsets a query needs are gone (retention, DeleteRecords, truncation) and failOnDataLoss is true."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets `[start, end)` of one partition: the unit of work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.end, self

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Offsets `[start, end)` of a partition that a query wanted and can no longer read (`end` None: unknown)."""

    topic: str
    partition: int
    start: int
    end: int | None
    reason: str

    @property
    def skipped(self) -> int:
        return 0 if self.end is None else max(0, self.end - self.start)

    def message(self) -> str:
        span = f"[{self.start}, {self.end})" if self.end is not None else f"from {self.start}"
        return f"data loss in topic {self.topic!r} partition {self.partition}: offsets {span} {self.reason}"


def report_data_loss(loss: DataLoss, fail_on_data_loss: bool, skipped_so_far: int = 0) -> int:
    """Raise for `failOnDataLoss=true`, else log the loss and return the new count of skipped offsets."""
    if fail_on_data_loss:
        raise DataLossError(f"{loss.message()}. Set failOnDataLoss=false to skip lost offsets and go on.")
    total = skipped_so_far + loss.skipped
    skipped = f"{loss.skipped} offsets" if loss.end is not None else "an unknown number of offsets"
    log.warning("insync source: %s; skipped %s (failOnDataLoss=false), %d offsets in all", loss.message(),
                skipped, total)
    return total


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a query reads: exactly one of `subscribe`, `subscribePattern` or `assign`."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        kinds = sum((bool(self.topics), self.pattern is not None, bool(self.assigned)))
        assert kinds == 1, self


class Metadata:
    """Driver-side queries through one AdminClient, closed with the `with` block (readers must stay picklable)."""

    def __init__(self, client_conf: Mapping[str, str]) -> None:
        assert "bootstrap.servers" in client_conf, client_conf
        self._admin = AdminClient(dict(client_conf))

    def __enter__(self) -> Metadata:
        return self

    def __exit__(self, *exc: object) -> None:
        del self._admin  # AdminClient has no close(); dropping it stops its threads

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription covers now, sorted; topics that do not exist contribute none."""
        if subscription.assigned:
            return sorted(subscription.assigned)
        topics = self._admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        if subscription.pattern is not None:
            regex = re.compile(subscription.pattern)
            # Kafka's pattern subscription matches whole names and leaves internal topics out.
            names = [t for t in topics if regex.fullmatch(t) and not t.startswith("__")]
        else:
            names = [t for t in subscription.topics if t in topics]
        found = [TopicPartition(t, p) for t in names if topics[t].error is None for p in topics[t].partitions]
        assert len(found) <= limits.SPARK_SOURCE_PARTITIONS_MAX, f"{len(found)} partitions"
        return sorted(found)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return self._list_offsets(tps, "earliest")

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition: the end of committed data, what consumers may read."""
        return self._list_offsets(tps, "latest")

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> dict[TopicPartition, int]:
        """The first offset whose timestamp is >= `timestamp_ms`; the high watermark where no record is that new."""
        wanted = list(tps)
        found = self._list_offsets(wanted, timestamp_ms)
        missing = [tp for tp, offset in found.items() if offset < 0]
        return found | self.latest(missing) if missing else found

    def _list_offsets(self, tps: Iterable[TopicPartition], spec: str | int) -> dict[TopicPartition, int]:
        """ListOffsets for "earliest", "latest" or a timestamp (ms), batched per broker by the AdminClient."""
        make: Callable[[], OffsetSpec]
        if spec == "earliest":
            make = OffsetSpec.earliest
        elif spec == "latest":
            make = OffsetSpec.latest
        else:
            assert isinstance(spec, int) and spec >= 0, spec
            make = partial(OffsetSpec.for_timestamp, spec)
        request = {CkTopicPartition(tp.topic, tp.partition): make() for tp in tps}  # type: ignore[no-untyped-call]
        if not request:
            return {}
        futures = self._admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED,
                                           request_timeout=ADMIN_TIMEOUT_S)
        result: dict[TopicPartition, int] = {}
        for ck_tp, future in futures.items():
            tp = TopicPartition(ck_tp.topic, ck_tp.partition)
            try:
                result[tp] = future.result().offset
            except Exception as exc:
                raise RuntimeError(f"ListOffsets failed for {tp}: {exc}") from exc
        assert len(result) == len(request), (len(result), len(request))
        return result


def consumer_config(client_conf: Mapping[str, str]) -> dict[str, object]:
    """A consumer that reads assigned offsets as they are: no group offsets, no resets, no commits."""
    conf: dict[str, object] = {
        "group.id": "insync-spark-source",  # librdkafka wants one; assign() never joins the group
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # an out-of-range start is data loss to report, never a silent reset
        "enable.partition.eof": True,  # tells a task that everything below the high watermark was delivered
        "isolation.level": "read_uncommitted",  # "latest" is the high watermark, as in Spark's Kafka source
        # Large fetches: a task reads one partition, and per-fetch overhead dominates with small ones. The local
        # queue bounds what librdkafka prefetches (also past the range's end).
        "fetch.max.bytes": 32 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 64 * 1024,
        "fetch.wait.max.ms": 100,
    }
    conf.update(client_conf)
    return conf


@dataclass(slots=True)
class _Columns:
    """Columns of the Arrow batch being built, as Python lists (extended a consume() chunk at a time)."""

    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int | None] = field(default_factory=list)
    timestamps: list[tuple[int, int]] = field(default_factory=list)
    headers: list[object] = field(default_factory=list)
    value_bytes: int = 0

    def add(self, messages: list[Message], include_headers: bool) -> None:
        # map() over the unbound methods runs the loop in C: this is the per-record hot path.
        values = list(map(Message.value, messages))
        self.values += values
        self.keys += map(Message.key, messages)
        self.offsets += map(Message.offset, messages)
        self.timestamps += map(Message.timestamp, messages)
        if include_headers:
            self.headers += map(Message.headers, messages)
        self.value_bytes += sum(map(len, filter(None, values)))

    def full(self) -> bool:
        rows = len(self.offsets)
        return bool(rows >= limits.SPARK_SOURCE_BATCH_ROWS_MAX or self.value_bytes >= limits.SPARK_SOURCE_BATCH_BYTES_MAX)

    def to_batch(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        rows = len(self.offsets)
        assert rows > 0 and len(self.values) == rows and len(self.timestamps) == rows
        types, stamps_ms = zip(*self.timestamps, strict=True)
        ts_ms = pa.array(stamps_ms, pa.int64())
        # librdkafka numbers timestamp types from 0 = not available; Kafka (and Spark) from -1.
        ts_type = pc.subtract(pa.array(types, pa.int32()), pa.scalar(1, pa.int32()))
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), rows),
            pa.repeat(pa.scalar(partition, pa.int32()), rows),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(ts_ms, 1000).cast(pa.timestamp("us", tz="UTC")),
            ts_type,
        ]
        if len(schema) == 8:
            columns.append(pa.array(self.headers, pa.list_(HEADER_TYPE)))
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        assert batch.num_rows == rows
        return batch


class RangeFetch:
    """Reads one `OffsetRange` in a Spark task. `losses` lists what was skipped (failOnDataLoss=false)."""

    def __init__(self, offset_range: OffsetRange, client_conf: Mapping[str, str], *, include_headers: bool,
                 fail_on_data_loss: bool, poll_timeout_ms: int) -> None:
        assert poll_timeout_ms > 0, poll_timeout_ms
        self.range = offset_range
        self.client_conf = dict(client_conf)
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_ms = poll_timeout_ms
        self.losses: list[DataLoss] = []
        self.rows = 0

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.range.size == 0:
            return
        consumer = Consumer(consumer_config(self.client_conf))
        try:
            yield from self._read(consumer)
        finally:
            consumer.close()

    def _read(self, consumer: Consumer) -> Iterator[pa.RecordBatch]:
        r = self.range
        schema = arrow_schema(self.include_headers)
        ck_tp = CkTopicPartition(r.topic, r.partition, r.start)
        consumer.assign([ck_tp])
        next_offset = r.start
        columns = _Columns()
        progress_at = last_check_at = time.monotonic()
        while next_offset < r.end:
            messages = consumer.consume(limits.SPARK_SOURCE_CONSUME_MESSAGES_MAX, timeout=POLL_INTERVAL_S)
            now = time.monotonic()
            records, eof_offset, out_of_range = self._split(messages)
            if records:
                first, last = records[0].offset(), records[-1].offset()
                assert first is not None and last is not None and first >= next_offset, (first, next_offset)
                columns.add(records, self.include_headers)
                next_offset = last + 1
                progress_at = now
                if columns.full():
                    yield self._emit(columns, schema)
                    columns = _Columns()
            if eof_offset is not None and eof_offset >= r.end:
                break  # all records below the high watermark were delivered: the rest of the range are gaps
            idle = min(now - progress_at, now - last_check_at) >= WATERMARK_CHECK_INTERVAL_S
            if out_of_range or idle:
                last_check_at = now
                skip_to = self._check_watermarks(consumer, next_offset, stalled_s=now - progress_at)
                if skip_to is not None:
                    next_offset = skip_to
                    progress_at = now
                    if next_offset < r.end:
                        consumer.assign([CkTopicPartition(r.topic, r.partition, next_offset)])
        if columns.offsets:
            yield self._emit(columns, schema)

    def _emit(self, columns: _Columns, schema: pa.Schema) -> pa.RecordBatch:
        self.rows += len(columns.offsets)
        return columns.to_batch(self.range.topic, self.range.partition, schema)

    def _split(self, messages: list[Message]) -> tuple[list[Message], int | None, bool]:
        """(records inside the range, end-of-partition offset if reported, whether the fetch was out of range)."""
        eof_offset: int | None = None
        out_of_range = False
        if any(map(Message.error, messages)):  # KafkaError objects are truthy; in C, as this runs per record
            records = []
            for m in messages:
                error = m.error()
                if error is None:
                    records.append(m)
                elif error.code() == KafkaError._PARTITION_EOF:
                    eof_offset = m.offset()
                    assert eof_offset is not None
                elif error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    out_of_range = True
                elif error.fatal() or not error.retriable():
                    raise RuntimeError(f"reading {self.range}: {error}")
            messages = records
        end = self.range.end
        if messages and (messages[-1].offset() or 0) >= end:
            messages = [m for m in messages if (m.offset() or 0) < end]
        return messages, eof_offset, out_of_range

    def _check_watermarks(self, consumer: Consumer, next_offset: int, stalled_s: float) -> int | None:
        """Where to continue after data loss (None: keep waiting). Raises on loss under failOnDataLoss."""
        r = self.range
        low, high = consumer.get_watermark_offsets(CkTopicPartition(r.topic, r.partition),
                                                   timeout=ADMIN_TIMEOUT_S)
        if low is None or high is None:
            raise TimeoutError(f"no answer to ListOffsets for {r.topic}-{r.partition} within {ADMIN_TIMEOUT_S} s")
        loss = loss_when_stalled(r, next_offset, low, high, stalled_s * 1000 >= self.poll_timeout_ms)
        if loss is None:
            return None
        already = sum(x.skipped for x in self.losses)
        report_data_loss(loss, self.fail_on_data_loss, already)
        self.losses.append(loss)
        assert loss.end is not None and loss.end > next_offset, (loss, next_offset)
        return loss.end


def loss_when_stalled(r: OffsetRange, next_offset: int, low: int, high: int, timed_out: bool) -> DataLoss | None:
    """What a task receiving no records concludes from the partition's log start (`low`) and high watermark.

    Behind the log start: the offsets up to it are gone (retention, DeleteRecords) and it is certain at once.
    A high watermark below the range's end can be a new leader catching up, so it only counts as truncation
    once the task has waited `kafkaConsumer.pollTimeoutMs`; if the records are there and still do not come,
    that is a timeout, not data loss.
    """
    assert r.start <= next_offset < r.end, (r, next_offset)
    if next_offset < low:
        reason = f"were deleted (the log now starts at {low}: retention or DeleteRecords)"
        return DataLoss(r.topic, r.partition, next_offset, min(low, r.end), reason)
    if not timed_out:
        return None
    if high < r.end:
        reason = f"were truncated (the high watermark went back to {high})"
        return DataLoss(r.topic, r.partition, max(next_offset, high), r.end, reason)
    raise TimeoutError(f"no records from topic {r.topic!r} partition {r.partition} offsets "
                       f"[{next_offset}, {r.end}) within kafkaConsumer.pollTimeoutMs")


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
