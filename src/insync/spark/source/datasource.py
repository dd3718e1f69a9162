"""`format("insync")`: Kafka topics as a Spark source and sink, built on `pyspark.sql.datasource` (Spark 4.2+).

Register it once per session (`spark.dataSource.register(InsyncDataSource)`), then use it as Spark's Kafka
source: same options, schema and offsets JSON, `{"topic": {"partition": next_offset}}` sorted so equal positions
are equal strings (Spark compares them so). Planning runs on the driver; each task reads one `OffsetRange` from
the leader up to the high watermark the driver saw (committed data only; under `kafka.isolation.level`
read_committed the last stable offset, aborted transactions left out). A leader that does not answer the
driver's ListOffsets holds up only its own partitions (`planning.Unanswered`); `.option("reader", "driver")`
reads on the driver (`driver_reader`), so a leader that stops after planning cannot hold a batch up. Data loss
fails the query under `failOnDataLoss=true` (the default), else is logged, counted and skipped. The sink takes
`value` and optional `key`, `topic`, `partition`, `headers` (acks=all, idempotent; the streaming sink is
at-least-once). Readers hold only options and offsets (pickled to the workers); clients are opened and closed
inside each call. `kafka.*` options go to the driver's librdkafka client but those the guarantees depend on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from insync.spark.source import kafka_io, planning, sink_io, worker_gc
from insync.spark.source.driver_reader import DriverStreamReader
from insync.spark.source.kafka_io import (
    DataLoss,
    Metadata,
    OffsetRange,
    OffsetsUnanswered,
    Subscription,
)
from insync.spark.source.offsets import (
    OffsetsJson,
    offsets_from_json,
    offsets_to_json,
    specific_offsets,
    start_offsets,
)
from insync.spark.source.options import (
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from insync.spark.source.planning import rate_limit, split_ranges
from insync.spark.source.sink_io import SinkColumns
from insync.spark.source.tasks import RangePartition, ReadSettings, read_partition
from insync.types import TopicPartition

log = logging.getLogger(__name__)

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"


def plan_batch(options: SourceOptions) -> list[OffsetRange]:
    """The ranges a batch query reads: from the starting to the ending offsets, each at most the latest offset
    (the high watermark, or under read_committed the last stable offset)."""
    with Metadata(options.client_conf) as md:
        tps = md.partitions(options.subscription)
        starts = start_offsets(md, tps, options, streaming=False)
        high = md.latest(tps)
        ending = options.ending_offsets
        ends = high if isinstance(ending, str) else specific_offsets(md, tps, ending, "endingOffsets")
    ranges = []
    for tp in tps:
        if ends[tp] > high[tp]:
            latest = "last stable offset" if kafka_io.reads_committed(options.client_conf) else "high watermark"
            raise ValueError(f"endingOffsets {ends[tp]} for {tp} is beyond its {latest} {high[tp]}: "
                             "only committed records can be read")
        if starts[tp] > ends[tp]:
            raise ValueError(f"startingOffsets {starts[tp]} for {tp} is after its ending offset {ends[tp]}")
        ranges.append(OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]))
    return split_ranges(ranges, options.min_partitions)


class InsyncBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    @worker_gc.settles
    def partitions(self) -> list[InputPartition]:
        settings = ReadSettings.of(self.options)
        return [RangePartition(r, settings, None) for r in plan_batch(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


class InsyncStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offset ranges. Spark keeps the offsets in its checkpoint; nothing is committed to Kafka.

    With Trigger.AvailableNow the high watermarks seen by `prepareForTriggerAvailableNow` are the target: the
    query reads up to them (in several batches under `maxOffsetsPerTrigger`) and then stops.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.target: dict[TopicPartition, int] | None = None
        # Losses seen while planning, skipped under failOnDataLoss=false (tasks log and count their own).
        self.data_losses = 0
        self.skipped_offsets = 0
        self.unanswered = planning.Unanswered(options.poll_timeout_ms)
        self.leaders: dict[TopicPartition, tuple[str, int]] = {}  # from the last planning, for the tasks

    def initialOffset(self) -> OffsetsJson:
        with Metadata(self.options.client_conf) as md:
            tps = md.partitions(self.options.subscription)
            return offsets_to_json(start_offsets(md, tps, self.options, streaming=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        with Metadata(self.options.client_conf) as md:
            self.target = md.latest(md.partitions(self.options.subscription))

    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        begin = offsets_from_json(start)
        planned = self._latest(begin)
        if planned is None:
            return start
        latest, begin_all = planned
        latest = self._check_losses(begin, latest)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin_all, latest, limit.max_rows)
        else:
            assert isinstance(limit, ReadAllAvailable), f"unsupported read limit {limit!r}"
            end = latest
        # An unchanged position must come back as `start` itself, or Spark plans empty batches forever.
        return start if end == begin else offsets_to_json(end)

    def _latest(self, begin: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int],
                                                                 dict[TopicPartition, int]] | None:
        """Where this micro-batch may read up to, and where each partition starts (new ones at their log start).
        Partitions whose leader did not answer stay where they are (`planning.Unanswered`); None: no broker
        answered twice (the second time with a new client: the first may have asked a paused broker), nothing is
        planned. AvailableNow's target needs no broker."""
        for attempt in range(2):  # bounded: two tries
            try:
                with Metadata(self.options.client_conf) as md:
                    latest, failed = ((self.target, None) if self.target is not None else
                                      md.latest_answered(md.partitions(self.options.subscription)))
                    starts = begin | md.earliest([tp for tp in latest if tp not in begin])
            except (KafkaException, OffsetsUnanswered) as exc:
                if self.target is not None:
                    raise
                if attempt == 1:
                    self.unanswered.nothing(str(exc), time.monotonic())
                continue
            if failed is not None:
                latest, self.leaders = self.unanswered.hold(begin, latest, failed), md.leaders
            return latest, starts
        return None

    def _check_losses(self, begin: Mapping[TopicPartition, int],
                      latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Partitions that disappeared or whose end went back below our position: report, then follow the log."""
        result = dict(latest)
        for tp, position in begin.items():
            if tp not in latest:
                if self.target is None:  # AvailableNow's target ignores partitions that appear later, not gone
                    loss = DataLoss(tp.topic, tp.partition, position, None, "are gone (the partition was deleted)")
                    self._report(loss)
                else:
                    result[tp] = position
            elif latest[tp] < position:
                reason = (f"went back: the high watermark is {latest[tp]} but this query had read up to "
                          f"{position} (truncation, or the topic was re-created); continuing from {latest[tp]}")
                self._report(DataLoss(tp.topic, tp.partition, position, None, reason))
        return result

    def _report(self, loss: DataLoss) -> None:
        self.skipped_offsets = kafka_io.report_data_loss(loss, self.options.fail_on_data_loss, self.skipped_offsets)
        self.data_losses += 1

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            with Metadata(self.options.client_conf) as md:
                begin = begin | md.earliest(new)
        # A range whose end is below its start went back; latestOffset reported it and the next one starts there.
        ranges = [OffsetRange(tp.topic, tp.partition, begin[tp], e) for tp, e in sorted(stop.items())
                  if begin[tp] <= e]
        settings = ReadSettings.of(self.options)
        return [RangePartition(r, settings, self.leaders.get(TopicPartition(r.topic, r.partition)))
                for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: OffsetsJson) -> None:
        """Spark's checkpoint holds the position; like Spark's Kafka source, nothing is committed to Kafka."""


@dataclass(frozen=True)
class SinkCommit(WriterCommitMessage):
    records: int


def _write(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    written = sink_io.write_batches(batches, options.client_conf, options.topic, options.columns,
                                     options.flush_timeout_s)
    worker_gc.settle_after_task()
    return SinkCommit(written)


def _written(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, SinkCommit))


class InsyncWriter(DataSourceArrowWriter):
    """Batch sink: every row becomes one record, produced with acks=all by the idempotent producer."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _write(self.options, iterator)

    @worker_gc.settles
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("insync sink: wrote %d records", _written(messages))

    @worker_gc.settles
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("insync sink: write failed; %d records of finished tasks are already in Kafka and stay there",
                    _written(messages))


class InsyncStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink, AT-LEAST-ONCE: a micro-batch that fails after some of its records were acknowledged is
    written again in full when Spark retries it, so those records appear twice. Kafka has no way to withdraw a
    record outside transactions; the idempotent producer only removes duplicates of its own retries."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _write(self.options, iterator)

    @worker_gc.settles
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("insync sink: micro-batch %d wrote %d records (at-least-once)", batchId, _written(messages))

    @worker_gc.settles
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("insync sink: micro-batch %d failed; %d records already written stay in Kafka and the retry "
                    "writes them again (at-least-once)", batchId, _written(messages))


class InsyncDataSource(DataSource):
    """The `insync` format: `spark.dataSource.register(InsyncDataSource)`, then `format("insync")`."""

    @classmethod
    def name(cls) -> str:
        return "insync"

    @worker_gc.settles
    def schema(self) -> str:
        # Spark asks for the schema at load(), for reads only: check every option there, not at the first action.
        include_headers = parse_source_options(self.options, streaming=None).include_headers
        return SCHEMA_DDL + (HEADERS_DDL if include_headers else "")

    @worker_gc.settles
    def reader(self, schema: StructType) -> InsyncBatchReader:
        return InsyncBatchReader(parse_source_options(self.options, streaming=False))

    @worker_gc.settles
    def streamReader(self, schema: StructType) -> InsyncStreamReader:
        options = parse_source_options(self.options, streaming=True)
        if options.driver_reader:
            # pyspark then asks for `simpleStreamReader`: its micro-batches are read on the driver.
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "reader"})
        return InsyncStreamReader(options)

    @worker_gc.settles
    def simpleStreamReader(self, schema: StructType) -> DriverStreamReader:
        return DriverStreamReader(parse_source_options(self.options, streaming=True))

    @worker_gc.settles
    def writer(self, schema: StructType, overwrite: bool) -> InsyncWriter:
        return InsyncWriter(parse_sink_options(self.options, schema, overwrite))

    @worker_gc.settles
    def streamWriter(self, schema: StructType, overwrite: bool) -> InsyncStreamWriter:
        return InsyncStreamWriter(parse_sink_options(self.options, schema, overwrite))


__all__ = ["InsyncDataSource", "OffsetRange", "SinkColumns", "Subscription", "offsets_to_json", "plan_batch"]
