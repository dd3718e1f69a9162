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
from pyspark.sql import Column, DataFrame, Observation, SparkSession
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


def _observing(df: DataFrame, name: str, metrics: dict[str, Column]) -> tuple[DataFrame, Observation]:
    """`df` with `metrics` (aggregates) observed when an action runs it: the summary's counts come from the writes
    of the tables they count, not from actions of their own (each costs a Spark job or several)."""
    assert metrics
    observation = Observation(name)
    return df.observe(observation, *(value.alias(key) for key, value in metrics.items())), observation


def _counts(observation: Observation) -> dict[str, int]:
    """An observation's values as ints; a sum over no row is 0."""
    return {key: int(value or 0) for key, value in observation.get.items()}


def _count_if(condition: Column) -> Column:
    return F.sum(condition.cast("long"))


def _write_parsed(spark: SparkSession, parsed: DataFrame, out_dir: str) -> tuple[DataFrame, DataFrame, dict[str, Any]]:
    """Write events and malformed lines in one pass over the text (one parquet write, partitioned by table),
    then move each partition to its table's directory. The event files therefore also carry the always-null
    `reason` and `text` columns; reading them back selects the table's own columns. Ignored Kafka lines (most
    of a real server.log) are not written. The same write observes the counts of each kind of line, the events'
    first and last times and the denials (the third value)."""
    staging = os.path.join(out_dir, PARSED_STAGING)
    reason = F.col("reason")
    is_ignored = F.coalesce(reason == logparse.IGNORED, F.lit(False))
    event = reason.isNull()
    observed, counted = _observing(parsed, "parsed", {
        "ignored_lines": _count_if(is_ignored), "events": _count_if(event),
        "malformed_lines": _count_if(reason.isNotNull() & ~is_ignored),
        "denied_requests": _count_if(event & (F.col("type") == "denied")),
        "first_ms": F.min(F.when(event, F.col("ts_ms"))), "last_ms": F.max(F.when(event, F.col("ts_ms")))})
    table = F.when(reason.isNull(), F.lit("events")).otherwise(F.lit("malformed"))
    (observed.where(~is_ignored).withColumn("table", table).write.mode("overwrite").partitionBy("table")
     .parquet(staging))
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
    return frames[0], frames[1], counted.get


def build_tables(spark: SparkSession, inputs: Inputs, out_dir: str, options: health.AnalysisOptions) -> Tables:
    cached: list[DataFrame] = []
    events, malformed, seen = _write_parsed(spark, logparse.load(spark, inputs, options.log_timezone, cached),
                                            out_dir)
    for df in cached:
        df.unpersist()
    counted: dict[str, Any] = {key: int(seen[key] or 0)
                               for key in ("events", "ignored_lines", "malformed_lines", "denied_requests")}
    ends = health.log_ends(events).persist(StorageLevel.MEMORY_AND_DISK)  # one row per file, read twice
    steps = health.isr_steps(events)  # used twice, recomputed: caching it costs more than its window
    changes, observed = _observing(health.isr_changes(steps), "isr_changes", {
        "isr_shrinks": _count_if(F.size("removed") > 0), "isr_expands": _count_if(F.size("added") > 0)})
    changes = _materialise(spark, changes, out_dir, "isr_changes", "topic", "partition", "ts_ms")
    counted |= _counts(observed)
    counts = health.replica_counts(events).persist(StorageLevel.MEMORY_AND_DISK)
    states = health.state_rows(events, steps, counts)
    kind, outage = F.col("kind"), health.outage()
    spans, observed = _observing(health.intervals(states, ends), "intervals", {
        "urp_intervals": _count_if(outage & (kind == "under_replicated")),
        "under_min_isr_intervals": _count_if(outage & (kind == "under_min_isr")),
        "offline_intervals": _count_if(outage & (kind == "offline")),
        "open_at_end_of_log_intervals": _count_if(F.col("open_ended")),
        "shutdown_intervals": _count_if(~F.col("open_ended") & F.col("shutdown"))})
    spans = _materialise(spark, spans, out_dir, "intervals", "topic", "partition", "kind", "start")
    counted |= _counts(observed)
    outs = health.assign_episodes(health.removals(changes, events)).persist(StorageLevel.MEMORY_AND_DISK)
    flaps, observed = _observing(health.flapping(outs, options.flap_window_ms), "flapping_episodes",
                                 {"flapping_episodes": F.count(F.lit(1))})
    flaps = _materialise(spark, flaps, out_dir, "flapping_episodes", "removed_at", "topic", "partition", "replica")
    counted |= _counts(observed)
    episode_table, observed = _observing(health.episodes(outs, ends).coalesce(1), "episodes", {
        cause: _count_if(F.col("cause") == cause) for cause in health.CAUSES})
    episode_table = _materialise(spark, episode_table, out_dir, "episodes", "episode")
    by_cause = _counts(observed)  # an observation's values come back in no particular order
    counted["episodes_by_cause"] = {cause: by_cause[cause] for cause in health.CAUSES}
    brokers = _materialise(spark, health.per_broker(events, outs, episode_table, options.flap_window_ms)
                           .coalesce(1), out_dir, "per_broker", "broker")
    risk = _materialise(spark, health.data_at_risk(events, steps, spans, ends, counts).coalesce(1), out_dir, "data_at_risk",
                        "topic", "partition")
    # The partitions the events name (a topic and a partition both given), and those whose replica set they name.
    partitions = counts.agg(_count_if(F.col("partition").isNotNull()).alias("partitions"),
                            _count_if(F.col("replicas_known")).alias("replicas_known")).first()
    assert partitions is not None  # a global aggregate has one row
    counted["partitions"] = int(partitions["partitions"] or 0)
    outs.unpersist()
    ends.unpersist()
    counts.unpersist()
    return Tables(events, malformed, changes, spans, flaps, episode_table, brokers, risk, counted,
                  int(partitions["replicas_known"] or 0), seen["first_ms"], seen["last_ms"])


def summarise(tables: Tables) -> dict[str, Any]:
    """The headline counts of summary.json, in SUMMARY_KEYS order."""
    summary = {key: tables.counted[key] for key in SUMMARY_KEYS}
    assert tuple(summary) == SUMMARY_KEYS and set(summary["episodes_by_cause"]) == set(health.CAUSES)
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
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(html)
    return summary
