"""`insync analyze` as one Spark job: parse, write each table as parquet, summarise, render the report.

Each table is written and read back before the next uses it, so Spark never recomputes the parsing: the event
table is materialised once, and everything after it reads parquet. Outputs in `out_dir`:
`events/`, `malformed/`, `isr_changes/`, `intervals/`, `flapping_episodes/`, `episodes/`, `per_broker/` (parquet),
`summary.json` (exactly SUMMARY_KEYS) and `report.html`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from insync.spark import analysis, logparse, report
from insync.spark.inputs import Inputs

SUMMARY_KEYS = ("events", "malformed_lines", "isr_shrinks", "isr_expands", "flapping_episodes", "urp_intervals",
                "under_min_isr_intervals", "offline_intervals", "episodes_by_cause", "partitions")


@dataclass(frozen=True, slots=True)
class Tables:
    events: DataFrame
    malformed: DataFrame
    isr_changes: DataFrame
    intervals: DataFrame
    flapping_episodes: DataFrame
    episodes: DataFrame
    per_broker: DataFrame
    replica_counts: DataFrame
    first_ms: int | None  # the first and last event times (None when there is no event)
    last_ms: int | None


def _materialise(spark: SparkSession, df: DataFrame, out_dir: str, name: str, *order: str) -> DataFrame:
    """Write `df` as parquet (sorted within each file by `order`) and read it back."""
    path = os.path.join(out_dir, name)
    (df.sortWithinPartitions(*order) if order else df).write.mode("overwrite").parquet(path)
    return spark.read.parquet(path)


def build_tables(spark: SparkSession, inputs: Inputs, out_dir: str, options: analysis.AnalysisOptions) -> Tables:
    # Parsing yields events and malformed lines together: keep it while both are written, so the text is read
    # and parsed once.
    parsed = logparse.load(spark, inputs, options.log_timezone).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        events = _materialise(spark, logparse.events_of(parsed), out_dir, "events")
        malformed = _materialise(spark, logparse.malformed_of(parsed).coalesce(1), out_dir, "malformed",
                                 "source", "file", "line")
    finally:
        parsed.unpersist()
    bounds = events.agg(F.min("ts_ms"), F.max("ts_ms")).first()
    assert bounds is not None
    first_ms, last_ms = bounds[0], bounds[1]
    horizon_ms = int(last_ms) if last_ms is not None else 0  # where intervals still open at the end stop
    steps = analysis.isr_steps(events).persist(StorageLevel.MEMORY_AND_DISK)
    changes = _materialise(spark, analysis.isr_changes(steps), out_dir, "isr_changes", "topic", "partition", "ts_ms")
    counts = analysis.replica_counts(events).persist(StorageLevel.MEMORY_AND_DISK)
    states = analysis.state_rows(events, steps, counts)
    spans = _materialise(spark, analysis.intervals(states, horizon_ms), out_dir, "intervals",
                         "topic", "partition", "kind", "start")
    steps.unpersist()
    outs = analysis.assign_episodes(analysis.removals(changes)).persist(StorageLevel.MEMORY_AND_DISK)
    flaps = _materialise(spark, analysis.flapping(outs, options.flap_window_ms), out_dir, "flapping_episodes",
                         "removed_at", "topic", "partition", "replica")
    episode_table = _materialise(spark, analysis.episodes(outs, horizon_ms).coalesce(1), out_dir, "episodes",
                                 "episode")
    brokers = _materialise(spark, analysis.per_broker(events, outs, episode_table, options.flap_window_ms)
                           .coalesce(1), out_dir, "per_broker", "broker")
    outs.unpersist()
    return Tables(events, malformed, changes, spans, flaps, episode_table, brokers, counts, first_ms, last_ms)


def summarise(tables: Tables) -> dict[str, Any]:
    """The headline counts of summary.json, in SUMMARY_KEYS order."""
    kinds = {row["kind"]: row["count"] for row in tables.intervals.groupBy("kind").count().collect()}
    causes = {row["cause"]: row["count"] for row in tables.episodes.groupBy("cause").count().collect()}
    changes = tables.isr_changes.agg(F.sum((F.size("removed") > 0).cast("int")).alias("shrinks"),
                                     F.sum((F.size("added") > 0).cast("int")).alias("expands")).first()
    seen = tables.events.agg(F.count("*").alias("events"),
                             F.count_distinct("topic", "partition").alias("partitions")).first()
    assert changes is not None and seen is not None
    summary: dict[str, Any] = {
        "events": int(seen["events"]),
        "malformed_lines": tables.malformed.count(),
        "isr_shrinks": int(changes["shrinks"] or 0),
        "isr_expands": int(changes["expands"] or 0),
        "flapping_episodes": tables.flapping_episodes.count(),
        "urp_intervals": int(kinds.get("under_replicated", 0)),
        "under_min_isr_intervals": int(kinds.get("under_min_isr", 0)),
        "offline_intervals": int(kinds.get("offline", 0)),
        "episodes_by_cause": {cause: int(causes.get(cause, 0)) for cause in analysis.CAUSES},
        "partitions": int(seen["partitions"]),
    }
    assert tuple(summary) == SUMMARY_KEYS
    return summary


def run(spark: SparkSession, inputs: Inputs, out_dir: str, options: analysis.AnalysisOptions) -> dict[str, Any]:
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
