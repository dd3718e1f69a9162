"""`format("insync")`: Kafka topics as a Spark source and sink, built on `pyspark.sql.datasource` (Spark 4.2+).

Register it once per session, then use it as Spark's Kafka source:

    from insync.spark.source.datasource import InsyncDataSource
    spark.dataSource.register(InsyncDataSource)
    df = (spark.read.format("insync").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Options, schema and offsets JSON are those of Spark's Kafka source. Offsets are
`{"topic": {"partition": next_offset}}` with topics and partitions in sorted order, so equal positions are equal
JSON strings (Spark compares them that way to see whether anything is new). Planning runs on the driver
(`plan_batch`, `InsyncStreamReader`); each Spark task reads one `OffsetRange` through `kafka_io.RangeFetch`,
from the partition's leader, up to the high watermark the driver saw: committed data only. A leader that does not
answer the driver's ListOffsets within `kafka.socket.timeout.ms` holds up only its own partitions: they stay where
they were for that micro-batch and are read in a later one (`planning.Unanswered`, which logs the skips).

Data loss (offsets behind the log start, or a log end that went back below offsets already planned or read)
fails the query under `failOnDataLoss=true` (the default) with the topic, partition and offsets in the message;
under false it is logged with a count of what was skipped, and reading goes on from what still exists.

The sink (`df.write.format("insync")`, `writeStream`) takes a `value` column and optional `key`, `topic`,
`partition` and `headers` (the `topic` option overrides the column) and produces with acks=all and the
idempotent producer. The streaming sink is at-least-once: a retried micro-batch is written again.

Readers and input partitions hold only options and offsets (they are pickled to the workers); Kafka clients are
opened inside each call and closed before it returns. Options prefixed `kafka.` go as they are to the driver's
metadata client (librdkafka), except the few whose values the guarantees above depend on and those only the tasks
use; the tasks' reader (`kafka_io.RangeFetch`) honours `kafka.bootstrap.servers`, `kafka.max.partition.fetch.bytes`,
`kafka.fetch.wait.max.ms`, `kafka.socket.timeout.ms` and `kafka.check.crcs` (default true: each batch's CRC32C is
verified, as Kafka's consumer does). `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*` take Spark's Kafka
source's (Java) settings or librdkafka's (`client_security`): source, tasks and sink then use TLS and SASL.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException
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
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from insync.spark.source import client_security, kafka_io, planning, worker_gc
from insync.spark.source.kafka_io import (
    DataLoss,
    Metadata,
    OffsetRange,
    OffsetsUnanswered,
    SinkColumns,
    Subscription,
)
from insync.spark.source.planning import rate_limit, split_ranges
from insync.types import TopicPartition

log = logging.getLogger(__name__)

OffsetsJson = dict[str, dict[str, int]]

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"


class OptionError(ValueError):
    """A missing, unknown, malformed or contradictory option; the message names it."""


SOURCE_OPTIONS = ("kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets",
                  "endingOffsets", "startingTimestamp", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss",
                  "includeHeaders", "kafkaConsumer.pollTimeoutMs")
# Options Spark itself passes to sinks (writeStream's checkpoint, save(path)); they mean nothing to Kafka.
SINK_OPTIONS = ("kafka.bootstrap.servers", "topic", "checkpointLocation", "path")
# Client settings the source and sink fix because their guarantees depend on them.
SOURCE_RESERVED = ("auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof",
                   "isolation.level")
SINK_RESERVED = ("acks", "request.required.acks", "enable.idempotence")
POLL_TIMEOUT_MS_DEFAULT = 120_000  # Spark's default for kafkaConsumer.pollTimeoutMs (spark.network.timeout)
SINK_FLUSH_TIMEOUT_S = 120.0
KAFKA_PREFIX = "kafka."


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client_conf: Mapping[str, str]  # the kafka.* options without the prefix
    subscription: Subscription
    starting_offsets: str | dict[TopicPartition, int]  # "earliest", "latest" or specific offsets
    starting_timestamp_ms: int | None
    ending_offsets: str | dict[TopicPartition, int]  # "latest" or specific offsets
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client_conf: Mapping[str, str]
    topic: str | None
    columns: SinkColumns
    flush_timeout_s: float


def _known(options: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """Options by canonical name (Spark hands them over lower-cased); unknown ones are an error."""
    canonical = {name.lower(): name for name in names}
    unknown = sorted(k for k in options if k.lower() not in canonical and not k.lower().startswith(KAFKA_PREFIX))
    if unknown:
        raise OptionError(f"unknown option(s) {unknown} for format insync; known: {', '.join(names)} and kafka.*")
    return {canonical.get(k.lower(), k.lower()): v for k, v in options.items()}


def _client_conf(given: Mapping[str, str], reserved: tuple[str, ...]) -> dict[str, str]:
    """The kafka.* options without the prefix, the Java client's security settings in librdkafka's names
    (`client_security`)."""
    conf = {k[len(KAFKA_PREFIX):]: v for k, v in given.items() if k.startswith(KAFKA_PREFIX)}
    fixed = sorted(KAFKA_PREFIX + k for k in conf if k in reserved)
    if fixed:
        raise OptionError(f"option(s) {fixed} cannot be set: the insync format fixes them")
    if not conf.get("bootstrap.servers"):
        raise OptionError("missing option kafka.bootstrap.servers (the brokers to connect to, host:port,...)")
    try:
        return client_security.librdkafka_names(conf)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def _json(given: Mapping[str, str], name: str) -> object:
    try:
        return json.loads(given[name])
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {given[name]!r} ({exc})") from exc


def _int(given: Mapping[str, str], name: str, minimum: int) -> int | None:
    if name not in given:
        return None
    try:
        value = int(given[name])
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {given[name]!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _bool(given: Mapping[str, str], name: str, default: bool) -> bool:
    text = given.get(name, str(default)).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {given[name]!r}")
    return text == "true"


def _subscription(given: Mapping[str, str]) -> Subscription:
    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if name in given]
    if len(chosen) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign is needed; "
                          f"got {chosen or 'none'}")
    name = chosen[0]
    if name == "subscribe":
        topics = tuple(t.strip() for t in given[name].split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(given[name])
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regular expression: {exc}") from exc
        return Subscription(pattern=given[name])
    parsed = _json(given, name)
    if not isinstance(parsed, dict) or not parsed or not all(
            isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps) for ps in parsed.values()):
        raise OptionError(f'option assign must be JSON like {{"topic": [0, 1]}}, got {given[name]!r}')
    return Subscription(assigned=tuple(sorted({TopicPartition(t, p) for t, ps in parsed.items() for p in ps})))


def _offsets(given: Mapping[str, str], name: str, words: tuple[str, ...],
             allowed: tuple[int, ...]) -> str | dict[TopicPartition, int]:
    """`earliest`/`latest` (those in `words`) or JSON {"topic": {"partition": offset}} (-2 earliest, -1 latest)."""
    text = given[name].strip()
    if text in words:
        return text
    if not text.startswith("{"):
        raise OptionError(f"option {name} must be one of {list(words)} or JSON offsets, got {text!r}")
    parsed = _json(given, name)
    try:
        assert isinstance(parsed, dict)
        offsets = {TopicPartition(t, int(p)): o for t, ps in parsed.items() for p, o in ps.items()}
        assert all(isinstance(o, int) and (o >= 0 or o in allowed) for o in offsets.values())
    except (AssertionError, AttributeError, ValueError):
        raise OptionError(f'option {name} must be JSON like {{"topic": {{"0": 23}}}} with offsets >= 0'
                          f"{' or ' + str(list(allowed)) if allowed else ''}, got {text!r}") from None
    return offsets


def parse_source_options(options: Mapping[str, str], streaming: bool | None) -> SourceOptions:
    """Check and parse reader options. `streaming` None: checks that do not depend on the query kind."""
    given = _known(options, SOURCE_OPTIONS)
    client_conf = _client_conf(given, SOURCE_RESERVED)
    try:
        kafka_io.check_reader_options(client_conf)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    subscription = _subscription(given)
    if "startingOffsets" in given and "startingTimestamp" in given:
        raise OptionError("options startingOffsets and startingTimestamp contradict each other: set one")
    if streaming is not None:
        for name, batch_only in (("endingOffsets", True), ("maxOffsetsPerTrigger", False)):
            if name in given and batch_only == streaming:
                kind = "batch (spark.read)" if batch_only else "streaming (spark.readStream)"
                raise OptionError(f"option {name} applies to {kind} queries only")
    # Spark's rule: a batch query starts at earliest and ends at latest by default; a stream starts at latest.
    starting: str | dict[TopicPartition, int] = "latest" if streaming else "earliest"
    if "startingOffsets" in given:
        starting = _offsets(given, "startingOffsets", ("earliest", "latest") if streaming is not False else
                            ("earliest",), (-2, -1) if streaming is not False else (-2,))
    ending: str | dict[TopicPartition, int] = "latest"
    if "endingOffsets" in given:
        ending = _offsets(given, "endingOffsets", ("latest",), (-1,))
    return SourceOptions(
        client_conf=client_conf, subscription=subscription, starting_offsets=starting,
        starting_timestamp_ms=_int(given, "startingTimestamp", 0), ending_offsets=ending,
        max_offsets_per_trigger=_int(given, "maxOffsetsPerTrigger", 1), min_partitions=_int(given, "minPartitions", 1),
        fail_on_data_loss=_bool(given, "failOnDataLoss", True), include_headers=_bool(given, "includeHeaders", False),
        poll_timeout_ms=_int(given, "kafkaConsumer.pollTimeoutMs", 1) or POLL_TIMEOUT_MS_DEFAULT)


HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
SINK_COLUMN_TYPES = {"value": (StringType(), BinaryType()), "key": (StringType(), BinaryType()),
                     "topic": (StringType(),), "partition": (IntegerType(),), "headers": (HEADERS_TYPE,)}


def _sink_columns(schema: StructType) -> SinkColumns:
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError(f"the insync sink needs a 'value' column (string or binary); columns: {list(types)}")
    for name, allowed in SINK_COLUMN_TYPES.items():
        if name in types and not any(_same_type(types[name], t) for t in allowed):
            raise OptionError(f"column {name!r} has type {types[name].simpleString()}; the insync sink takes "
                              f"{' or '.join(t.simpleString() for t in allowed)}")
    return SinkColumns(has_key="key" in types, has_topic="topic" in types, has_partition="partition" in types,
                       has_headers="headers" in types)


def _same_type(a: object, b: object) -> bool:
    """Type equality ignoring nullability (a DataFrame's array elements are often non-nullable)."""
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return [f.name for f in a.fields] == [f.name for f in b.fields] and all(
            _same_type(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True))
    return a == b


def parse_sink_options(options: Mapping[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    given = _known(options, SINK_OPTIONS)
    if overwrite:
        raise OptionError("the insync sink only appends: Kafka topics cannot be overwritten (use mode 'append')")
    client_conf = _client_conf(given, SINK_RESERVED)
    columns = _sink_columns(schema)
    topic = given.get("topic") or None
    if topic is None and not columns.has_topic:
        raise OptionError("missing option topic (or a 'topic' column): where should the records go?")
    return SinkOptions(client_conf, topic, columns, SINK_FLUSH_TIMEOUT_S)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Spark's Kafka offsets JSON in canonical order: topics by name, partitions by number."""
    result: OffsetsJson = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What a task needs besides its range: everything travels in the input partition (pickled)."""

    client_conf: tuple[tuple[str, str], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int

    @classmethod
    def of(cls, options: SourceOptions) -> ReadSettings:
        return cls(tuple(sorted(options.client_conf.items())), options.include_headers,
                   options.fail_on_data_loss, options.poll_timeout_ms)


class RangePartition(InputPartition):
    """One Spark task: an offset range of one partition, and how to read it."""

    def __init__(self, offset_range: OffsetRange, settings: ReadSettings, leader: tuple[str, int] | None) -> None:
        super().__init__(offset_range)
        self.range = offset_range
        self.settings = settings
        self.leader = leader  # as the driver last saw it


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The body of every read task (batch and streaming)."""
    if not isinstance(partition, RangePartition):
        return  # Spark asks for one placeholder partition when a plan has none
    s = partition.settings
    fetch = kafka_io.RangeFetch(partition.range, dict(s.client_conf), include_headers=s.include_headers,
                                fail_on_data_loss=s.fail_on_data_loss, poll_timeout_ms=s.poll_timeout_ms,
                                leader=partition.leader)
    yield from fetch.batches()
    worker_gc.settle_after_task()  # pyspark's collection after each task then skips the imported modules
    if fetch.losses:
        log.warning("insync source: %s read %d records and skipped %d lost offsets", partition.range,
                    fetch.rows, sum(loss.skipped for loss in fetch.losses))


def _start_offsets(md: Metadata, tps: list[TopicPartition], options: SourceOptions,
                   streaming: bool) -> dict[TopicPartition, int]:
    if options.starting_timestamp_ms is not None:
        return md.for_timestamp(tps, options.starting_timestamp_ms)
    spec = options.starting_offsets
    if spec == "earliest":
        return md.earliest(tps)
    if spec == "latest":
        assert streaming, "options.py rejects startingOffsets=latest for batch queries"
        return md.latest(tps)
    assert isinstance(spec, dict)
    return _specific_offsets(md, tps, spec, "startingOffsets")


def _specific_offsets(md: Metadata, tps: list[TopicPartition], spec: Mapping[TopicPartition, int],
                      option: str) -> dict[TopicPartition, int]:
    """Resolve a JSON offsets option: it must name exactly the subscribed partitions; -2 earliest, -1 latest."""
    missing = sorted(set(tps) - set(spec))
    extra = sorted(set(spec) - set(tps))
    if missing or extra:
        raise ValueError(f"{option} must give an offset for every subscribed partition and no others: "
                         f"missing {[str(tp) for tp in missing]}, not subscribed {[str(tp) for tp in extra]}")
    earliest = md.earliest([tp for tp, o in spec.items() if o == -2])
    latest = md.latest([tp for tp, o in spec.items() if o == -1])
    return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in spec.items()}


def plan_batch(options: SourceOptions) -> list[OffsetRange]:
    """The ranges a batch query reads: from the starting to the ending offsets, each at most the high watermark."""
    with Metadata(options.client_conf) as md:
        tps = md.partitions(options.subscription)
        starts = _start_offsets(md, tps, options, streaming=False)
        high = md.latest(tps)
        ending = options.ending_offsets
        ends = high if isinstance(ending, str) else _specific_offsets(md, tps, ending, "endingOffsets")
    ranges = []
    for tp in tps:
        if ends[tp] > high[tp]:
            raise ValueError(f"endingOffsets {ends[tp]} for {tp} is beyond its high watermark {high[tp]}: "
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
            return offsets_to_json(_start_offsets(md, tps, self.options, streaming=True))

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
    written = kafka_io.write_batches(batches, options.client_conf, options.topic, options.columns,
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
        return InsyncStreamReader(parse_source_options(self.options, streaming=True))

    @worker_gc.settles
    def writer(self, schema: StructType, overwrite: bool) -> InsyncWriter:
        return InsyncWriter(parse_sink_options(self.options, schema, overwrite))

    @worker_gc.settles
    def streamWriter(self, schema: StructType, overwrite: bool) -> InsyncStreamWriter:
        return InsyncStreamWriter(parse_sink_options(self.options, schema, overwrite))


__all__ = ["InsyncDataSource", "OffsetRange", "SinkColumns", "Subscription", "offsets_to_json", "plan_batch"]
