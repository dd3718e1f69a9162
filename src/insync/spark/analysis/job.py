"""`insync analyze` as one Spark job: parse, write each table as parquet, summarise, render the report.

Each table is written and read back before the next uses it, so Spark never recomputes the parsing: the text is
read and parsed once, into events and malformed lines together, and everything after reads parquet. Outputs in
`out_dir`: `events/`, `malformed/`, `isr_changes/`, `intervals/`, `flapping_episodes/`, `episodes/`,
`per_broker/`, `data_at_risk/` (parquet; the event files also hold two always-null columns, `reason` and `text`, see
`_write_parsed`), `summary.json` (exactly SUMMARY_KEYS) and `report.html`. The summary's interval counts are
outages only: intervals open at the end of the log or begun by a controlled shutdown are counted apart. Caching a
window's result costs more than recomputing it, while caching the removals (read three times) pays.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from insync.spark.analysis import health, logparse, report
from insync.spark.analysis.inputs import Inputs
from insync.spark.analysis.tables import Tables

PARSED_STAGING = "_parsed"
SUMMARY_KEYS = ("events", "malformed_lines", "ignored_lines", "isr_shrinks", "isr_expands", "flapping_episodes",
                "urp_intervals", "under_min_isr_intervals", "offline_intervals", "open_at_end_of_log_intervals",
                "shutdown_intervals", "episodes_by_cause", "partitions", "denied_requests")


def _materialise(spark: SparkSession, df: DataFrame, out_dir: str, name: str, *order: str) -> DataFrame:
    """Write `df` as parquet (sorted within each file by `order`) and read it back."""
    path = os.path.join(out_dir, name)
    (df.sortWithinPartitions(*order) if order else df).write.mode("overwrite").parquet(path)
    return spark.read.parquet(path)


def _write_parsed(spark: SparkSession, parsed: DataFrame, out_dir: str) -> tuple[DataFrame, DataFrame, int]:
    """Write events and malformed lines in one pass over the text (one parquet write, partitioned by table),
    then move each partition to its table's directory. The event files therefore also carry the always-null
    `reason` and `text` columns; reading them back selects the table's own columns. Ignored Kafka lines (most
    of a real server.log) are not written: an observation counts them during the same write (the third value)."""
    staging = os.path.join(out_dir, PARSED_STAGING)
    is_ignored = F.coalesce(F.col("reason") == logparse.IGNORED, F.lit(False))
    counted = Observation("ignored")
    table = F.when(F.col("reason").isNull(), F.lit("events")).otherwise(F.lit("malformed"))
    (parsed.observe(counted, F.sum(is_ignored.cast("long")).alias("ignored")).where(~is_ignored)
     .withColumn("table", table).write.mode("overwrite").partitionBy("table").parquet(staging))
    ignored = int(counted.get["ignored"] or 0)
    frames = []
    for name, columns in (("events", logparse.EVENT_COLUMNS), ("malformed", logparse.MALFORMED_COLUMNS)):
        target, written = os.path.join(out_dir, name), os.path.join(staging, f"table={name}")
        shutil.rmtree(target, ignore_errors=True)
        if os.path.isdir(written):
            os.replace(written, target)
        else:  # no line of this table: an empty table, with its schema
            parsed.select(*columns).limit(0).write.parquet(target)
        frames.append(spark.read.parquet(target).select(*columns))
    shutil.rmtree(staging)
    return frames[0], frames[1], ignored


def build_tables(spark: SparkSession, inputs: Inputs, out_dir: str, options: health.AnalysisOptions) -> Tables:
    cached: list[DataFrame] = []
    events, malformed, ignored = _write_parsed(spark, logparse.load(spark, inputs, options.log_timezone, cached),
                                               out_dir)
    for df in cached:
        df.unpersist()
    bounds = events.agg(F.min("ts_ms"), F.max("ts_ms")).first()
    assert bounds is not None
    first_ms, last_ms = bounds[0], bounds[1]
    ends = health.log_ends(events).persist(StorageLevel.MEMORY_AND_DISK)  # one row per file, read twice
    steps = health.isr_steps(events)  # used twice, recomputed: caching it costs more than its window
    changes = _materialise(spark, health.isr_changes(steps), out_dir, "isr_changes", "topic", "partition", "ts_ms")
    counts = health.replica_counts(events).persist(StorageLevel.MEMORY_AND_DISK)
    states = health.state_rows(events, steps, counts)
    spans = _materialise(spark, health.intervals(states, ends), out_dir, "intervals",
                         "topic", "partition", "kind", "start")
    outs = health.assign_episodes(health.removals(changes, events)).persist(StorageLevel.MEMORY_AND_DISK)
    flaps = _materialise(spark, health.flapping(outs, options.flap_window_ms), out_dir, "flapping_episodes",
                         "removed_at", "topic", "partition", "replica")
    episode_table = _materialise(spark, health.episodes(outs, ends).coalesce(1), out_dir, "episodes",
                                 "episode")
    brokers = _materialise(spark, health.per_broker(events, outs, episode_table, options.flap_window_ms)
                           .coalesce(1), out_dir, "per_broker", "broker")
    risk = _materialise(spark, health.data_at_risk(events, steps, spans, ends, counts).coalesce(1), out_dir, "data_at_risk",
                        "topic", "partition")
    outs.unpersist()
    ends.unpersist()
    return Tables(events, malformed, ignored, changes, spans, flaps, episode_table, brokers, risk, counts, first_ms,
                  last_ms)


def summarise(tables: Tables) -> dict[str, Any]:
    """The headline counts of summary.json, in SUMMARY_KEYS order."""
    spans = tables.intervals
    kinds = {row["kind"]: row["count"] for row in spans.where(health.outage()).groupBy("kind").count().collect()}
    aside = spans.agg(F.sum(F.col("open_ended").cast("int")).alias("open"),
                      F.sum((~F.col("open_ended") & F.col("shutdown")).cast("int")).alias("shutdown")).first()
    causes = {row["cause"]: row["count"] for row in tables.episodes.groupBy("cause").count().collect()}
    changes = tables.isr_changes.agg(F.sum((F.size("removed") > 0).cast("int")).alias("shrinks"),
                                     F.sum((F.size("added") > 0).cast("int")).alias("expands")).first()
    seen = tables.events.agg(F.count("*").alias("events"),
                             F.count_distinct("topic", "partition").alias("partitions"),
                             F.sum((F.col("type") == "denied").cast("long")).alias("denied")).first()
    assert changes is not None and seen is not None and aside is not None
    summary: dict[str, Any] = {
        "events": int(seen["events"]),
        "malformed_lines": tables.malformed.count(),
        "ignored_lines": tables.ignored_lines,
        "isr_shrinks": int(changes["shrinks"] or 0),
        "isr_expands": int(changes["expands"] or 0),
        "flapping_episodes": tables.flapping_episodes.count(),
        "urp_intervals": int(kinds.get("under_replicated", 0)),
        "under_min_isr_intervals": int(kinds.get("under_min_isr", 0)),
        "offline_intervals": int(kinds.get("offline", 0)),
        "open_at_end_of_log_intervals": int(aside["open"] or 0),
        "shutdown_intervals": int(aside["shutdown"] or 0),
        "episodes_by_cause": {cause: int(causes.get(cause, 0)) for cause in health.CAUSES},
        "partitions": int(seen["partitions"]),
        "denied_requests": int(seen["denied"] or 0),  # the authorizer's refusals
    }
    assert tuple(summary) == SUMMARY_KEYS
    return summary


def run(spark: SparkSession, inputs: Inputs, out_dir: str, options: health.AnalysisOptions) -> dict[str, Any]:
    """Run the whole analysis into `out_dir`; returns the summary written to summary.json."""
    os.makedirs(out_dir, exist_ok=True)
    tables = build_tables(spark, inputs, out_dir, options)
    summary = summarise(tables)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    html = report.render(report.collect(tables, summary, inputs, options))
    tables.replica_counts.unpersist()
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(html)
    return summary
