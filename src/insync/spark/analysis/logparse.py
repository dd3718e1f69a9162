"""Reading insync `events.jsonl` and Kafka `server.log` / `state-change.log` / `controller.log` files into one
event table, with the malformed lines aside.

Everything is DataFrame expressions (no Python UDFs), so parsing scales with the cluster. `read_lines` numbers
lines from `monotonically_increasing_id()` plus a per-split count, since Spark gives no line numbers. insync
lines are parsed with `from_json` against a schema from `events.EVENT_FIELDS` and validated as `events.Event`
does. Kafka lines are matched against the wordings of every version from 0.10 to 4.x (KINDS; REFERENCE 10): a
cheap test says what a line announces, then one `regexp_replace` of its full pattern both validates it and
rearranges the captured groups into fixed SLOTS, so a line costs a few regular expressions, not one per field.
log4j timestamps are read in `log_timezone` (UTC unless told). A line is malformed when it cannot be what it
claims; well-formed Kafka lines about other things are kept with the reason IGNORED, so they are counted, and
stack-trace lines and other programs' output are dropped. Every event row has EVENT_COLUMNS; ISR lists are
sorted (Kafka prints them unsorted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from insync.events import BROKER_LEVEL, EVENT_FIELDS, SCHEMA_VERSIONS_READ, EventType, LeaderChangeReason
from insync.limits import ANALYSIS_MALFORMED_TEXT_CHARS_MAX
from insync.spark.analysis.inputs import Inputs
from insync.spark.analysis.kafka_lines import (
    APPEND_ERROR_PHRASE,
    BODY_RX,
    BROKER_SHUTDOWN,
    BROKER_STARTED,
    CONTEXT_RX,
    CTX_BROKER_RX,
    ISR_CHANGE_REFUSED,
    ISR_UPDATE,
    KINDS,
    LOG4J_FORMAT,
    LOG4J_RX,
    PARTITION_CONTEXT_RX,
    SEP,
    SLOTS,
    LineKind,
)

TS_MS_MAX = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: later instants overflow Spark's timestamp

REMOVED_TYPE = T.ArrayType(T.StructType([
    T.StructField("broker", T.IntegerType()), T.StructField("leo", T.LongType()),
    T.StructField("last_caught_up_ms", T.LongType()), T.StructField("last_fetch_ms", T.LongType()),
    T.StructField("reason", T.StringType()), T.StructField("fetch_pending", T.BooleanType()),
    T.StructField("fetch_pending_since_ms", T.LongType())]))
INT_LIST = T.ArrayType(T.IntegerType())


def removed_entry(broker: Column, leo: Column | None = None, last_caught_up_ms: Column | None = None) -> Column:
    """A REMOVED_TYPE entry with what a log without insync's details gives: the broker, perhaps its end offset and
    last caught-up time (Kafka 2.2+'s shrink line), nothing else."""
    def null(sql_type: str) -> Column:
        return F.lit(None).cast(sql_type)

    return F.struct(broker.alias("broker"), (null("long") if leo is None else leo).alias("leo"),
                    (null("long") if last_caught_up_ms is None else last_caught_up_ms).alias("last_caught_up_ms"),
                    null("long").alias("last_fetch_ms"), null("string").alias("reason"),
                    null("boolean").alias("fetch_pending"), null("long").alias("fetch_pending_since_ms"))

# The normalised event table, in column order.
EVENT_SCHEMA = T.StructType([
    T.StructField("ts", T.TimestampType()), T.StructField("ts_ms", T.LongType()),
    T.StructField("source", T.StringType()), T.StructField("file", T.StringType()),
    T.StructField("line", T.LongType()), T.StructField("broker", T.IntegerType()),
    T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
    T.StructField("type", T.StringType()), T.StructField("leader", T.IntegerType()),
    T.StructField("leader_epoch", T.IntegerType()), T.StructField("isr_before", INT_LIST),
    T.StructField("isr_after", INT_LIST), T.StructField("replicas", INT_LIST),
    T.StructField("removed", REMOVED_TYPE), T.StructField("added", INT_LIST),
    T.StructField("hw", T.LongType()), T.StructField("leo", T.LongType()),
    T.StructField("under_min_isr", T.BooleanType()), T.StructField("min_isr", T.IntegerType()),
    T.StructField("detail", T.StringType()), T.StructField("records", T.LongType()),
    T.StructField("topic_id", T.StringType()), T.StructField("partition_epoch", T.IntegerType()),
    T.StructField("broker_id", T.IntegerType())])
# `records`: how many records or requests an event is about (produce_rejected's count, one per Kafka rejection
# line; unclean_recovery's records_lost). `topic_id`: a KRaft line's topic id; a line naming only the id takes the
# topic name another line gives with it (`Leader t-0 with topic id Some(id) ...`), else the id as its topic.
# `partition_epoch`: Kafka's partition epoch (ZooKeeper's zkVersion) of the state a line states, which orders what
# brokers learn at different times. `broker_id`: the broker a broker-level event is about (fenced, unfenced, shut
# down, started), not the one that logged it.
EVENT_COLUMNS = tuple(f.name for f in EVENT_SCHEMA.fields)
MALFORMED_COLUMNS = ("source", "file", "line", "reason", "text")
# What parsing yields: every line that is an event, ignored or malformed; `reason` is null for an event, IGNORED
# for an ignored Kafka line, and says why otherwise (with `text` kept). One pass over the text produces all three.
PARSED_COLUMNS = (*EVENT_COLUMNS, "reason", "text")
IGNORED = "ignored"


# ---------------------------------------------------------------------------------------------------------------
# Lines


def read_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """(text, file, line) for every line of `files`; line numbers start at 1."""
    assert files
    raw = spark.read.text(list(files)).select(
        F.col("value").alias("text"), F.col("_metadata.file_path").alias("path"),
        F.col("_metadata.file_block_start").alias("block_start"), F.monotonically_increasing_id().alias("row_id"))
    blocks = raw.groupBy("path", "block_start").agg(F.min("row_id").alias("row0"), F.count("*").alias("n"))
    earlier = Window.partitionBy("path").orderBy("block_start").rowsBetween(Window.unboundedPreceding, -1)
    # The file name is derived once per split here, not once per line.
    blocks = blocks.select("path", "block_start", "row0", F.regexp_replace("path", "^file:", "").alias("file"),
                           F.coalesce(F.sum("n").over(earlier), F.lit(0)).alias("lines_before"))
    return raw.join(F.broadcast(blocks), ["path", "block_start"]).select(
        "text", "file", (F.col("lines_before") + F.col("row_id") - F.col("row0") + 1).alias("line"))


def _malformed_text() -> Column:
    return F.when(F.col("reason").isNotNull() & (F.col("reason") != IGNORED), F.substring("text", 1, ANALYSIS_MALFORMED_TEXT_CHARS_MAX)).alias("text")


def _sorted_ids(csv: Column) -> Column:
    """'3,1,2' -> [1,2,3]; '' -> []. Kafka prints ISR lists unsorted."""
    ids = F.array_compact(F.split(F.replace(csv, F.lit(" "), F.lit("")), ",").try_cast(INT_LIST))
    return F.array_sort(ids)


# ---------------------------------------------------------------------------------------------------------------
# insync events.jsonl

_ARRAY_TYPES: dict[str, T.DataType] = {
    "isr_before": INT_LIST, "isr_after": INT_LIST, "isr": INT_LIST, "removed": REMOVED_TYPE,
    "added": T.ArrayType(T.StructType([T.StructField("broker", T.IntegerType()),
                                       T.StructField("leo", T.LongType())])),
}
_JSON_TYPES: dict[str, T.DataType] = {"integer": T.LongType(), "string": T.StringType()}
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}


# from_json's cost grows with its schema: Spark builds and checks every field of it for each line. So every line is
# parsed for the fields the analysis reads and those its frequent types require; the fields only rarer types require
# (broker registration, truncation, denials...) are parsed again from those lines alone, to check they are there.
_BASE_FIELDS: dict[str, T.DataType] = {"v": T.LongType(), "ts_ms": T.LongType(), "broker": T.LongType(),
                                       "type": T.StringType(), "topic": T.StringType(), "partition": T.LongType(),
                                       "replicas": INT_LIST}
ANALYSED_FIELDS = frozenset({"leader_epoch", "isr_before", "isr_after", "isr", "removed", "added", "hw", "leo",
                             "leader", "leader_after", "reason", "error", "count", "records_lost"})
FREQUENT_TYPES = frozenset({EventType.ISR_SHRINK, EventType.ISR_EXPAND, EventType.ISR_KEPT_PENDING_READ,
                            EventType.LEADER_CHANGE, EventType.PARTITION_FAILED, EventType.PARTITION_UNFAILED,
                            EventType.PRODUCE_REJECTED})


def _field_types() -> dict[str, T.DataType]:
    """Every field EVENT_FIELDS requires, with the type it is parsed as."""
    fields: dict[str, T.DataType] = {}
    for required in EVENT_FIELDS.values():
        for name, json_type in required.items():
            # An array field no analysis reads is kept as its JSON text: only its presence is checked.
            data_type = _ARRAY_TYPES.get(name, T.StringType()) if json_type == "array" else _JSON_TYPES[json_type]
            assert fields.get(name, data_type) == data_type, f"{name} has two types in EVENT_FIELDS"
            fields[name] = data_type
    return fields


def _schema(fields: dict[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in fields.items()]
                        + [T.StructField("_corrupt_record", T.StringType())])


def _json_schemas() -> tuple[T.StructType, T.StructType, frozenset[str]]:
    """The schema every line is parsed with, the schema of the fields only rarer types require, and those types."""
    every = _field_types()
    main = set(ANALYSED_FIELDS).union(*(EVENT_FIELDS[t] for t in FREQUENT_TYPES))
    assert main <= set(every), main - set(every)
    rare = {name: data_type for name, data_type in every.items() if name not in main}
    rare_types = frozenset(str(t) for t, required in EVENT_FIELDS.items() if set(required) & set(rare))
    return (_schema(_BASE_FIELDS | {n: t for n, t in every.items() if n in main}), _schema(rare), rare_types)


JSON_SCHEMA, RARE_JSON_SCHEMA, RARE_TYPES = _json_schemas()


def _insync_invalid_reason() -> Column:
    """Why a parsed line is not a valid event (null when it is), checked in the order Event checks. `j` is the line
    parsed with JSON_SCHEMA, `r` with RARE_JSON_SCHEMA (null unless its type is one of RARE_TYPES)."""
    j, r = F.col("j"), F.col("r")
    type_ = j["type"]
    corrupt = j["_corrupt_record"].isNotNull() | r["_corrupt_record"].isNotNull()
    reason = (F.when(corrupt, F.lit("not a JSON object of the event schema"))
              .when(j["v"].isNull() | ~j["v"].isin(*SCHEMA_VERSIONS_READ),
                    F.lit(f"schema version is not one of {', '.join(map(str, SCHEMA_VERSIONS_READ))}"))
              .when(j["ts_ms"].isNull() | (j["ts_ms"] < 0) | (j["ts_ms"] > TS_MS_MAX),
                    F.lit("missing or invalid ts_ms"))
              .when(j["broker"].isNull(), F.lit("missing broker"))
              .when(~type_.isin([str(t) for t in EventType]) | type_.isNull(), F.lit("unknown event type"))
              .when(~type_.isin([str(t) for t in BROKER_LEVEL])
                    & (j["topic"].isNull() | j["partition"].isNull() | (j["partition"] < 0)),
                    F.lit("missing topic or partition")))
    rare_names = set(RARE_JSON_SCHEMA.fieldNames())
    for event_type, required in EVENT_FIELDS.items():
        if not required:
            continue
        missing = F.lit(False)
        for name in required:
            missing = missing | (r if name in rare_names else j)[name].isNull()
        reason = reason.when((type_ == str(event_type)) & missing,
                             F.lit(f"{event_type} lacks one of {', '.join(required)}"))
    return reason


def _insync_leader() -> Column:
    j = F.col("j")
    return (F.when(j["type"].isin("isr_shrink", "isr_expand", "isr_kept_pending_read"), j["broker"])
            .when(j["type"] == "leader_change", j["leader_after"])
            .otherwise(j["leader"])).try_cast("int")


def parse_insync(lines: DataFrame) -> DataFrame:
    """events.jsonl lines as PARSED_COLUMNS rows; blank lines are neither events nor malformed."""
    parsed = (lines.where(F.trim("text") != "")
              .withColumn("j", F.from_json("text", JSON_SCHEMA, _JSON_OPTIONS))
              .withColumn("r", F.when(F.col("j.type").isin(*RARE_TYPES),
                                      F.from_json("text", RARE_JSON_SCHEMA, _JSON_OPTIONS)))
              .withColumn("reason", _insync_invalid_reason()))
    j = F.col("j")
    return parsed.select(
        F.timestamp_millis(j["ts_ms"]).alias("ts"), j["ts_ms"].alias("ts_ms"), F.lit("insync").alias("source"),
        "file", "line", j["broker"].try_cast("int").alias("broker"), j["topic"].alias("topic"),
        j["partition"].try_cast("int").alias("partition"), j["type"].alias("type"), _insync_leader().alias("leader"),
        j["leader_epoch"].try_cast("int").alias("leader_epoch"), F.array_sort(j["isr_before"]).alias("isr_before"),
        F.array_sort(F.coalesce(j["isr_after"], j["isr"])).alias("isr_after"),
        F.array_sort(j["replicas"]).alias("replicas"), j["removed"].alias("removed"),
        F.array_sort(F.transform(j["added"], lambda a: a["broker"])).alias("added"),
        j["hw"].alias("hw"), j["leo"].alias("leo"), F.lit(None).cast("boolean").alias("under_min_isr"),
        F.lit(None).cast("int").alias("min_isr"), F.coalesce(j["reason"], j["error"]).alias("detail"),
        F.coalesce(j["count"], j["records_lost"]).alias("records"), F.lit(None).cast("string").alias("topic_id"),
        F.lit(None).cast("int").alias("partition_epoch"), F.col("r")["broker_id"].try_cast("int").alias("broker_id"),
        "reason", _malformed_text())




def _by_kind(value: Callable[[int, LineKind], Column]) -> Column:
    """A CASE over the line's kind index: only the branch of the line's own kind is evaluated."""
    out = F.when(F.lit(False), F.lit(None))
    for index, kind in enumerate(KINDS):
        out = out.when(F.col("kind") == index, value(index, kind))
    return out


def _kafka_lines(lines: DataFrame, log_timezone: str) -> DataFrame:
    """Kafka lines split into timestamp, message and body (`prefixed`: the line has a log4j prefix)."""
    # One rewrite both tests and splits a line: a line log4j's pattern matches comes out shorter (its brackets and
    # level go), one it does not match comes out unchanged.
    prefixed = F.col("split") != F.col("text")
    parts = F.split("split", SEP, 2)
    local_ts = F.try_to_timestamp(F.get(parts, 0), F.lit(LOG4J_FORMAT))
    ts = local_ts if log_timezone == "UTC" else F.to_utc_timestamp(local_ts, log_timezone)
    msg = F.get(parts, 1)
    body = F.when(prefixed, F.regexp_replace(msg, BODY_RX, "$1")).otherwise(F.col("text"))
    return (lines.withColumn("split", F.regexp_replace("text", LOG4J_RX, f"$1{SEP}$3"))
            .select("text", "file", "line", prefixed.alias("prefixed"), F.when(prefixed, ts).alias("ts"),
                    F.when(prefixed, msg).alias("msg"), body.alias("body")))


def _with_kind(k: DataFrame) -> DataFrame:
    """`kind`: the index in KINDS of what a line announces (or null)."""
    kind = F.when(F.lit(False), F.lit(None).cast("int"))
    for index, line_kind in enumerate(KINDS):
        kind = kind.when(line_kind.claims(F.col("body"), F.col("msg")), F.lit(index))
    return k.withColumn("kind", kind)


def _with_context(k: DataFrame) -> DataFrame:
    """`context`: what the message says before its body (`Partition t-0 broker=1`, before 1.0 `Partition [t,0] on
    broker 1`), and `ctx_broker`, the broker it names."""
    # CONTEXT_RX's whole match is `[context] ` or `<old context>: `: one match, then the brackets cut off.
    said = F.col("said")
    context = F.when(said.startswith("["), F.substring(said, 2, F.length(said) - 3)).otherwise(
        F.substring(said, 1, F.length(said) - 2))
    return (k.withColumn("said", F.regexp_extract(F.coalesce("msg", F.lit("")), CONTEXT_RX, 0))
            .withColumn("context", context)
            .select(*(c for c in k.columns), "context", F.regexp_extract("context", CTX_BROKER_RX, 1)
            .try_cast("int").alias("ctx_broker")))


def _slot(name: str) -> Column:
    value = F.get(F.col("groups"), SLOTS.index(name))
    return F.when(value != "", value)


def _out_of_sync() -> Column:
    """A shrink line's out-of-sync replicas as Kafka printed them (2.2+): their ids, end offsets and caught-up times,
    each a list in the line's order (empty before 2.2). A column of its own: in `_removed_from_shrink`'s lambda these
    expressions would run again for each removed replica."""
    printed = F.coalesce(_slot("out_of_sync"), F.lit(""))
    return F.when(F.col("type") == "isr_shrink", F.struct(
        F.regexp_extract_all(printed, F.lit(r"brokerId: (-?\d+)"), 1).alias("ids"),
        F.regexp_extract_all(printed, F.lit(r"endOffset: (-?\d+|unknown)"), 1).alias("leos"),
        F.regexp_extract_all(printed, F.lit(r"lastCaughtUpTimeMs: (-?\d+|unknown)"), 1).alias("caught_up")))


def _removed_from_shrink() -> Column:
    """The out-of-sync replicas of a shrink line, with the end offsets and caught-up times Kafka printed."""
    printed = F.col("out_of_sync")
    removed_ids = F.array_except(F.col("isr_before"), F.col("isr_after"))

    def entry(broker: Column) -> Column:
        # 0 when the line lists no out-of-sync replicas (before 2.2): no index, as element_at fails on 0
        found = F.array_position(printed["ids"], broker.cast("string")).cast("int")
        pos = F.when(found > 0, found)
        return removed_entry(broker, F.try_element_at(printed["leos"], pos).try_cast("long"),
                             F.try_element_at(printed["caught_up"], pos).try_cast("long"))

    return F.when(F.col("type") == "isr_shrink", F.transform(removed_ids, entry))


def _kafka_fields() -> list[Column]:
    typ = F.col("type")
    context = F.col("context")
    ctx_leader = F.regexp_extract(context, r"leaderId=(\d+)", 1)
    flag = _slot("commit_flag")
    # A broker's own shutdown or start is about itself; the controller's lines name the broker.
    broker = F.coalesce(_slot("broker").try_cast("int"), F.col("broker"))
    broker_id = F.coalesce(_slot("broker_id").try_cast("int"),
                           F.when(typ.isin(BROKER_SHUTDOWN, BROKER_STARTED), broker))
    under_min_isr = (F.when(F.col("body").contains("(under-min-isr)"), F.lit(True))
                     .when(flag == "  ", F.lit(False))
                     .when((typ == "leader_change") & F.col("body").contains("with partition epoch"), F.lit(False)))
    leader = (F.when(_slot("leader").isNotNull(), _slot("leader").try_cast("int"))  # a controller naming it
              .when(typ.isin("isr_shrink", "isr_expand", ISR_UPDATE, ISR_CHANGE_REFUSED, "leader_change"),
                    F.col("broker"))
              .when(typ == "partition_failed", F.when(ctx_leader != "", ctx_leader).try_cast("int")))
    return [
        F.col("ts"), F.unix_millis("ts").alias("ts_ms"), F.lit("kafka").alias("source"), F.col("file"),
        F.col("line"), broker.alias("broker"),
        F.coalesce(_slot("topic"), F.get("ctx_partition", 1)).alias("topic"),
        F.coalesce(_slot("partition"), F.get("ctx_partition", 0)).try_cast("int").alias("partition"),
        typ, leader.alias("leader"), _slot("leader_epoch").try_cast("int").alias("leader_epoch"),
        F.col("isr_before"), F.col("isr_after"),
        F.when(_slot("replicas").isNotNull(), _sorted_ids(_slot("replicas"))).alias("replicas"),
        _removed_from_shrink().alias("removed"),
        F.when(typ == "isr_expand", F.array_except("isr_after", "isr_before")).alias("added"),
        _slot("hw").try_cast("long").alias("hw"), _slot("leo").try_cast("long").alias("leo"),
        under_min_isr.alias("under_min_isr"), _slot("min_isr").try_cast("int").alias("min_isr"),
        F.when(typ == "produce_rejected", F.lit("NOT_ENOUGH_REPLICAS"))
        .when(_slot("detail").isin("loss", "election"), F.lit(str(LeaderChangeReason.UNCLEAN))).alias("detail"),
        F.when(typ == "produce_rejected", F.lit(1)).cast("long").alias("records"), _slot("topic_id").alias("topic_id"),
        _slot("partition_epoch").try_cast("int").alias("partition_epoch"), broker_id.alias("broker_id"),
    ]


def parse_kafka(lines: DataFrame, log_timezone: str = "UTC") -> DataFrame:
    """Kafka server.log / state-change.log lines as PARSED_COLUMNS rows (events, and malformed with a reason)."""
    k = _with_kind(_kafka_lines(lines, log_timezone))
    bad_prefix = F.col("text").startswith("[") & ~F.col("prefixed")
    # Only the min-ISR exception text is read from a line without a log4j prefix (a continuation line).
    min_isr_kind = [i for i, kind in enumerate(KINDS) if kind.name == "produce_rejected"][0]
    candidate = F.col("kind").isNotNull() & (F.col("prefixed") | (F.col("kind") == min_isr_kind))
    append_error = F.col("prefixed") & F.col("msg").contains(APPEND_ERROR_PHRASE)
    ignored = F.col("prefixed") & F.col("kind").isNull()  # append_error lines are among them
    k = _with_context(k.where(bad_prefix | candidate | ignored))
    # The timestamp and broker of a continuation line come from the line before it. Those lines are found again
    # from the text (a cheap substring test first), not from `k`: that would parse every line twice.
    errors = _kafka_lines(lines.where(F.col("text").contains(APPEND_ERROR_PHRASE)), log_timezone)
    previous = _with_context(errors.where(append_error)).select(
        "file", (F.col("line") + 1).alias("line"), F.col("ts").alias("prev_ts"), F.col("ctx_broker").alias("prev_broker"))
    # The columns are added a dependency level at a time (each `withColumns` sees the ones before): every
    # DataFrame step costs py4j calls and an analysis of the plan, which dominate building this one.
    names = F.array(*(F.lit(kind.name) for kind in KINDS))
    k = (k.join(F.broadcast(previous), ["file", "line"], "left").withColumns({
        "ts": F.coalesce("ts", "prev_ts"), "broker": F.coalesce("ctx_broker", "prev_broker"),
        # One regular expression both validates a line and rearranges its groups: the template puts SEP between
        # the slots, so a line its kind's pattern matched comes out with SEP in it, and one it did not comes out
        # unchanged (a body with SEP of its own is not trusted).
        "rewritten": _by_kind(lambda _, kind: F.regexp_replace("body", kind.pattern, kind.template())),
        "type": F.get(names, F.col("kind"))}))
    ok = F.coalesce(F.col("rewritten").contains(SEP) & ~F.col("body").contains(SEP), F.lit(False))
    reason = (F.when(bad_prefix, F.lit("unparseable log4j prefix"))
              .when(F.col("kind").isNull(), F.lit(IGNORED))
              .when(~ok, F.concat(F.lit("unrecognised "), F.col("type"), F.lit(" line")))
              .when(F.col("ts").isNull(), F.lit("no timestamp (continuation line without its log line)")))
    k = k.withColumn("reason", reason).withColumn("groups", F.when(F.col("reason").isNull(),
                                                                    F.split("rewritten", SEP)))
    # The partition the context names, [partition, topic] (the topic last: it may hold any character), or null.
    named = F.col("context").startswith("Partition ") & F.col("context").rlike(PARTITION_CONTEXT_RX)
    k = k.withColumns({
        "isr_before": F.when(F.col("type").isin("isr_shrink", "isr_expand"), _sorted_ids(_slot("isr_before"))),
        "isr_after": F.when(_slot("isr_after").isNotNull() | (F.col("type") == ISR_UPDATE),
                            _sorted_ids(F.coalesce(_slot("isr_after"), F.lit("")))),
        "ctx_partition": F.when(named, F.split(
            F.regexp_replace("context", PARTITION_CONTEXT_RX, f"$2$4{SEP}$1$3"), SEP, 2)),
        "out_of_sync": _out_of_sync()})
    return k.select(*_kafka_fields(), "reason", _malformed_text())


def _fill_file_broker(parsed: DataFrame) -> DataFrame:
    """Lines without a broker id (a fetcher line, say) take the broker the rest of their file names."""
    per_file = (parsed.where(F.col("broker").isNotNull()).groupBy("file", "broker").count()
                .withColumn("rank", F.row_number().over(Window.partitionBy("file").orderBy(F.desc("count"), "broker")))
                .where(F.col("rank") == 1).select("file", F.col("broker").alias("file_broker")))
    return (parsed.join(F.broadcast(per_file), "file", "left")
            .withColumn("broker", F.coalesce("broker", "file_broker")).select(*PARSED_COLUMNS))


def _named_topics(parsed: DataFrame) -> DataFrame:
    """A line naming its partition by topic id only (KRaft's controller) takes the topic name that another line gives
    with that id, else the id itself."""
    names = parsed.where(F.col("topic_id").isNotNull() & F.col("topic").isNotNull()).groupBy("topic_id").agg(
        F.min("topic").alias("named"))
    return (parsed.join(F.broadcast(names), "topic_id", "left")
            .withColumn("topic", F.when(F.col("reason").isNull(), F.coalesce("topic", "named", "topic_id"))
                        .otherwise(F.col("topic"))).select(*PARSED_COLUMNS))


def load(spark: SparkSession, inputs: Inputs, log_timezone: str = "UTC",
         cached: list[DataFrame] | None = None) -> DataFrame:
    """All inputs parsed into PARSED_COLUMNS: events have a null `reason`, malformed lines a reason and text.
    Given `cached`, the parsed Kafka lines are persisted and added to it (for the caller to unpersist once it has
    used the result): the file brokers and topic names are aggregates over them, so uncached, every Kafka line's
    regular expressions would run three times in one job."""
    assert inputs.event_logs or inputs.kafka_logs
    parts: list[DataFrame] = []
    if inputs.event_logs:
        parts.append(parse_insync(read_lines(spark, inputs.event_logs)).select(*PARSED_COLUMNS))
    if inputs.kafka_logs:
        kafka = parse_kafka(read_lines(spark, inputs.kafka_logs), log_timezone)
        if cached is not None:
            kafka = kafka.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(kafka)
        parts.append(_named_topics(_fill_file_broker(kafka)))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def events_of(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("reason").isNull()).select(*EVENT_COLUMNS)


def malformed_of(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("reason").isNotNull() & (F.col("reason") != IGNORED)).select(*MALFORMED_COLUMNS)


def ignored_of(parsed: DataFrame) -> DataFrame:
    """The well-formed Kafka lines that announce none of KINDS (a fetcher stopping, a segment rolled, a refused
    AlterPartition): neither events nor malformed."""
    return parsed.where(F.col("reason") == IGNORED).select("source", "file", "line")
