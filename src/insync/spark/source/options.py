"""The `insync` format's options: checked and parsed on the driver, every mistake an `OptionError` naming the option.

Source and sink take Spark's Kafka source's options (and `kafka.*` client settings); `reader` is insync's own:
`tasks` (the default) reads each micro-batch's ranges in Spark tasks, `driver` reads on the driver
(`driver_reader`), for small topics that must keep flowing while a leader does not answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from insync.spark.source import client_security, kafka_io
from insync.spark.source.kafka_io import Subscription
from insync.spark.source.sink_io import SinkColumns
from insync.types import TopicPartition


class OptionError(ValueError):
    """A missing, unknown, malformed or contradictory option; the message names it."""


SOURCE_OPTIONS = ("kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets",
                  "endingOffsets", "startingTimestamp", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss",
                  "includeHeaders", "kafkaConsumer.pollTimeoutMs", "reader")
# Options Spark itself passes to sinks (writeStream's checkpoint, save(path)); they mean nothing to Kafka.
SINK_OPTIONS = ("kafka.bootstrap.servers", "topic", "checkpointLocation", "path")
# Client settings the source and sink fix because their guarantees depend on them.
SOURCE_RESERVED = ("auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof")
SINK_RESERVED = ("acks", "request.required.acks", "enable.idempotence")
POLL_TIMEOUT_MS_DEFAULT = 120_000  # Spark's default for kafkaConsumer.pollTimeoutMs (spark.network.timeout)
SINK_FLUSH_TIMEOUT_S = 120.0
KAFKA_PREFIX = "kafka."
READERS = ("tasks", "driver")  # the `reader` option: where a stream's records are read (see the module doc)


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
    driver_reader: bool = False  # reader=driver: micro-batches read on the driver (`driver_reader`)


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
        for name, batch_only in (("endingOffsets", True), ("maxOffsetsPerTrigger", False), ("reader", False)):
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
        poll_timeout_ms=_int(given, "kafkaConsumer.pollTimeoutMs", 1) or POLL_TIMEOUT_MS_DEFAULT,
        driver_reader=_driver_reader(given))


def _driver_reader(given: Mapping[str, str]) -> bool:
    """reader=driver: what it cannot honour is an error, not silently ignored."""
    reader = given.get("reader", READERS[0]).strip().lower()
    if reader not in READERS:
        raise OptionError(f"option reader must be one of {list(READERS)}, got {given['reader']!r}")
    if reader == "driver":
        # The driver reads at most one fetch per partition per micro-batch, in one place: Spark's simple stream
        # reader takes no read limit, and there are no tasks to split a range into.
        for name in ("maxOffsetsPerTrigger", "minPartitions"):
            if name in given:
                raise OptionError(f"option {name} does not apply to reader=driver (it reads at most "
                                  "kafka.max.partition.fetch.bytes per partition per micro-batch, on the driver)")
    return reader == "driver"


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
