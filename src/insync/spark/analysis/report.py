"""The HTML report: `collect` pulls small aggregates and the top rows from the tables (Spark), `render` turns them
into one self-contained page (pure Python: inline CSS and SVG, no scripts, no external files).

All times are shown in UTC with a `Z`. The recommendations are rules over the episode causes, each quoting the
episodes and counts it rests on; with no ISR churn there is nothing to recommend, and the report says so.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from insync.limits import ANALYSIS_REPORT_ROWS_MAX as TOP_ROWS
from insync.spark.analysis import health, svg
from insync.spark.analysis.inputs import Inputs
from insync.spark.analysis.tables import Tables

MALFORMED_EXAMPLES = 20
CHURN_BUCKETS = 60
GANTT_PARTITIONS = 25
OPEN_AT_END, OPEN_AT_END_COLUMN = "open at end of log", "open_at_end_of_log"
SHUTDOWN, SHUTDOWN_COLUMN = "controlled shutdown", "shutdown"
INTERNAL_PREFIX = "__"

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReportData:
    summary: dict[str, Any]
    inputs: Inputs
    options: health.AnalysisOptions
    first_ms: int | None
    last_ms: int | None
    bucket_ms: int
    churn: list[tuple[int, int, int]]  # (bucket start ms, shrinks, expands)
    interval_totals: list[Row]  # per kind: count, total duration, open-ended
    longest_intervals: list[Row]
    gantt_rows: list[tuple[str, str, int, int]]
    episodes: list[Row]
    flaps: list[Row]
    brokers: list[Row]
    data_at_risk: list[Row]
    malformed_by_reason: list[Row]
    malformed_examples: list[Row]
    partitions_with_replicas: int


def _rows(df: Any, limit: int) -> list[Row]:
    return [row.asDict() for row in df.limit(limit).collect()]


def _bucket_ms(first_ms: int, last_ms: int) -> int:
    """A round bucket width giving at most CHURN_BUCKETS buckets."""
    raw = max((last_ms - first_ms) / CHURN_BUCKETS, 1000)
    for width in (1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000, 21_600_000,
                  86_400_000):
        if width >= raw:
            return width
    return int(math.ceil(raw / 86_400_000) * 86_400_000)


def _totals_by_kind(spans: DataFrame) -> DataFrame:
    """Per kind, the outages (count, partitions, total and longest time) and, apart, how many were open at the end
    of the log or begun by a controlled shutdown."""
    counted = health.outage()
    duration = F.when(counted, F.col("duration_ms"))
    return spans.groupBy("kind").agg(
        F.sum(counted.cast("int")).alias("intervals"),
        F.countDistinct(F.when(counted, F.col("topic")), "partition").alias("partitions"),
        F.sum(duration).alias("total_ms"), F.max(duration).alias("max_ms"),
        F.sum((F.col("status") == OPEN_AT_END).cast("int")).alias(OPEN_AT_END_COLUMN),
        F.sum((F.col("status") == SHUTDOWN).cast("int")).alias(SHUTDOWN_COLUMN)).orderBy("kind")


def _split_internal(spans: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(shown, summarised): intervals of internal topics (`__consumer_offsets`, `__insync_*`: Kafka's internal
    topics all start with `__`) are summarised in one row, except those of an internal partition in trouble (an
    offline or under-min-ISR outage): an idle internal partition under-replicated with its brokers says nothing
    the user topics do not, and 50 `__consumer_offsets` partitions would fill the tables."""
    assert {"topic", "partition", "kind", "status"} <= set(spans.columns), spans.columns
    internal = F.col("topic").startswith(INTERNAL_PREFIX)
    in_trouble = (spans.where(internal & health.outage() & F.col("kind").isin("offline", "under_min_isr"))
                  .select("topic", "partition").distinct().withColumn("in_trouble", F.lit(True)))
    marked = spans.join(F.broadcast(in_trouble), ["topic", "partition"], "left").withColumn(
        "summarised", internal & F.col("in_trouble").isNull()).drop("in_trouble")
    return marked.where(~F.col("summarised")), marked.where("summarised")


def _internal_row(internal: DataFrame) -> Row | None:
    """The summarised internal intervals as one row of the intervals table (None when there are none): its
    duration is the longest of them, its status how many there were."""
    row = internal.agg(
        F.array_join(F.array_sort(F.collect_set("topic")), ", ").alias("topics"),
        F.countDistinct("topic", "partition").alias("partitions"), F.count("*").alias("intervals"),
        F.array_join(F.array_sort(F.collect_set("kind")), ", ").alias("kind"), F.min("start").alias("start"),
        F.max("end").alias("end"), F.max("duration_ms").alias("duration_ms")).first()
    assert row is not None  # a global aggregate has one row
    if not row["intervals"]:
        return None
    return {"topic": f'{row["topics"]} (internal)', "partition": f'{row["partitions"]} partitions',
            "kind": row["kind"], "start": row["start"], "end": row["end"], "duration_ms": row["duration_ms"],
            "status": f'{row["intervals"]} intervals in one row'}


def _gantt_rows(shown: DataFrame, internal: DataFrame, internal_row: Row | None) -> list[tuple[str, str, int, int]]:
    """Lanes of the most under-replicated partitions, then one lane for the summarised internal topics."""
    worst = (shown.where(F.col("kind") == "under_replicated").groupBy("topic", "partition")
             .agg(F.sum("duration_ms").alias("total")).orderBy(F.desc("total"), "topic", "partition")
             .limit(GANTT_PARTITIONS))
    rows = [(f'{r["topic"]}-{r["partition"]}', r["kind"], int(r["start_ms"]), int(r["end_ms"]))
            for r in shown.join(worst, ["topic", "partition"]).orderBy(F.desc("total"), "start_ms")
            .limit(svg.BARS_MAX).collect()]
    if internal_row is not None:
        # Internal partitions share their brokers' troubles: their intervals mostly coincide, drawn once each.
        lane = f'{internal_row["topic"]}: {internal_row["partition"]}'
        bars = internal.select("kind", "start_ms", "end_ms").distinct().orderBy("start_ms", "kind")
        rows += [(lane, r["kind"], int(r["start_ms"]), int(r["end_ms"]))
                 for r in bars.limit(svg.BARS_MAX - len(rows)).collect()]
    return rows


def collect(tables: Tables, summary: dict[str, Any], inputs: Inputs, options: health.AnalysisOptions) -> ReportData:
    """Everything the page shows, from the job's tables; only aggregates and top rows are collected."""
    first_ms, last_ms = tables.first_ms, tables.last_ms
    bucket_ms = _bucket_ms(first_ms, last_ms) if first_ms is not None and last_ms is not None else 1000
    origin = first_ms or 0
    bucket = F.floor((F.col("ts_ms") - origin) / bucket_ms)
    churn_rows = tables.isr_changes.groupBy(bucket.alias("b")).agg(
        F.sum((F.size("removed") > 0).cast("int")).alias("shrinks"),
        F.sum((F.size("added") > 0).cast("int")).alias("expands")).orderBy("b").collect()
    counted = {int(r["b"]): (int(r["shrinks"]), int(r["expands"])) for r in churn_rows}
    # Every bucket of the time range, empty ones too, so that the bars stand on a true time axis.
    buckets = range((last_ms - origin) // bucket_ms + 1) if last_ms is not None else range(0)
    churn = [(origin + b * bucket_ms, *counted.get(b, (0, 0))) for b in buckets]
    spans = tables.intervals.withColumn("status", F.when(F.col("open_ended"), F.lit(OPEN_AT_END))
                                        .when(F.col("shutdown"), F.lit(SHUTDOWN)).otherwise(F.lit("closed")))
    totals = _rows(_totals_by_kind(spans), 10)
    shown, internal = _split_internal(spans)
    internal_row = _internal_row(internal)
    longest = _rows(shown.orderBy(F.desc("duration_ms"), "topic", "partition"), TOP_ROWS)
    if internal_row is not None:  # in its place by duration, as its longest interval
        longest = sorted([*longest, internal_row], key=lambda r: -int(r["duration_ms"]))[:TOP_ROWS]
    malformed = tables.malformed
    return ReportData(
        summary=summary, inputs=inputs, options=options, first_ms=first_ms, last_ms=last_ms, bucket_ms=bucket_ms,
        churn=churn, interval_totals=totals,
        longest_intervals=longest, gantt_rows=_gantt_rows(shown, internal, internal_row),
        episodes=_rows(tables.episodes.orderBy("episode"), TOP_ROWS),
        flaps=_rows(tables.flapping_episodes.orderBy("removed_at", "topic", "partition"), TOP_ROWS),
        brokers=_rows(tables.per_broker.orderBy("broker"), svg.BARS_MAX),
        data_at_risk=_rows(tables.data_at_risk.orderBy(F.desc("unclean_elections"), F.desc("single_replica_isr_ms"),
                                                       F.desc("under_min_isr_ms"), "topic", "partition"), TOP_ROWS),
        # Ties broken by name: the aggregate's rows come in an order that differs with the shuffle's partitions.
        malformed_by_reason=_rows(malformed.groupBy("source", "reason").count()
                                  .orderBy(F.desc("count"), "source", "reason"), TOP_ROWS),
        malformed_examples=_rows(malformed.orderBy("source", "file", "line"), MALFORMED_EXAMPLES),
        partitions_with_replicas=tables.partitions_with_replicas,
    )


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def utc(ms: float | None) -> str:
    if ms is None:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _cell(value: Any) -> str:
    if isinstance(value, dt.datetime):
        # PySpark hands timestamps back as naive local times; timestamp() reads them back as such.
        return escape(utc(value.timestamp() * 1000))
    if isinstance(value, list):
        return escape(",".join(str(v) for v in value))
    return escape("-" if value is None else str(value))


def _table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    if not rows:
        return "<p class=none>None.</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _episodes_of(data: ReportData, cause: str) -> list[Row]:
    return [e for e in data.episodes if e["cause"] == cause]


def _example(episodes: list[Row]) -> str:
    first = episodes[0]
    return f'episode {first["episode"]} at {_cell(first["start"])}: {first["evidence"]}'


def _risk_recommendations(risk: list[Row]) -> list[tuple[str, str]]:
    """Data at risk first: acknowledged writes held by one replica, and unclean elections."""
    out: list[tuple[str, str]] = []
    single = [r for r in risk if r["single_replica_isr_ms"] > 0]
    if single:
        worst = max(single, key=lambda r: r["single_replica_isr_ms"])
        out.append(("acks=all writes were acknowledged by a single replica: set min.insync.replicas=2 (with a "
                    "replication factor of 3) so that every acknowledged write has two copies; producers are then "
                    "refused (NOT_ENOUGH_REPLICAS) instead while the ISR is one replica.",
                    f"{len(single)} partition(s) with a single-replica ISR outside min ISR; longest "
                    f'{worst["topic"]}-{worst["partition"]}, {worst["single_replica_isr_ms"] / 1000:.1f} s'))
    unclean = [r for r in risk if r["unclean_elections"] > 0]
    if unclean:
        lost = [r["records_given_up"] for r in unclean if r["records_given_up"] is not None]
        out.append(("Unclean leader elections gave up records: keep unclean.leader.election.enable=false (and ELR "
                    "on) unless availability matters more than acknowledged data.",
                    f'{sum(r["unclean_elections"] for r in unclean)} unclean election(s) over {len(unclean)} '
                    f"partition(s); records given up: {sum(lost) if lost else 'not known from these logs'}"))
    return out


def recommendations(data: ReportData) -> list[tuple[str, str]]:
    """(advice, evidence) pairs, one per cause or condition found."""
    causes = data.summary["episodes_by_cause"]
    out = _risk_recommendations(data.data_at_risk)
    by_messages = sum(int(b.get("removed_by_messages", 0)) for b in data.brokers)
    if causes.get("burst", 0) or by_messages:
        out.append(("Judge replica lag by time only: set replica.lag.max.messages=0 (off) and keep "
                    "replica.lag.time.max.ms (default 30000). Healthy followers removed by a large batch come back "
                    "on their next fetch; under time-based lag they are never removed (seed 001).",
                    f'{causes.get("burst", 0)} burst episode(s), {by_messages} removal(s) by message count, '
                    f'{data.summary["flapping_episodes"]} flap(s) within {data.options.flap_window_ms // 1000} s'
                    + (f"; e.g. {_example(_episodes_of(data, 'burst'))}" if _episodes_of(data, "burst") else "")))
    if causes.get("leader", 0):
        leaders = sorted({e["broker_at_fault"] for e in _episodes_of(data, "leader")})
        out.append(("Set follower.fetch.pending.reads.insync.enable=true (KIP-501): followers whose fetch the leader "
                    "is still serving stay in sync, so a slow leader read no longer empties the ISR. Then look at "
                    f"broker(s) {', '.join(map(str, leaders))}: disk and CPU during these episodes.",
                    f'{causes["leader"]} leader-side episode(s); e.g. {_example(_episodes_of(data, "leader"))}'))
    if causes.get("follower", 0):
        blamed = sorted({e["broker_at_fault"] for e in _episodes_of(data, "follower")})
        out.append((f"Look at broker(s) {', '.join(map(str, blamed))}: dropped from many partitions at once "
                    "(GC pause, network, disk, or the broker stopping). If pauses are expected, "
                    "replica.lag.time.max.ms must exceed the longest one.",
                    f'{causes["follower"]} follower-side episode(s); e.g. {_example(_episodes_of(data, "follower"))}'))
    if causes.get("failed", 0):
        failed = _episodes_of(data, "failed")
        blamed = sorted({e["broker_at_fault"] for e in failed})
        out.append((f"Look at the disks of broker(s) {', '.join(map(str, blamed))}: a replica marked its partition "
                    "failed (a storage error on append; see its server.log) and stopped replicating it. It comes "
                    "back after a restart, or reassign the partition away.",
                    f'{causes["failed"]} failed-partition episode(s); e.g. {_example(failed)}'))
    if causes.get("stuck", 0) or causes.get("slow", 0):
        out.append(("Stuck followers (no fetch within replica.lag.time.max.ms) point at liveness or the network; slow "
                    "ones (fetching, not catching up) at fetch capacity: num.replica.fetchers, "
                    "replica.fetch.max.bytes.",
                    f'{causes.get("stuck", 0)} stuck and {causes.get("slow", 0)} slow episode(s) by insync reasons'))
    for row in (r for r in data.interval_totals if r["intervals"]):
        if row["kind"] == "under_min_isr":
            out.append(("acks=all producers were refused (NOT_ENOUGH_REPLICAS) while the ISR was below "
                        "min.insync.replicas: fix the causes above rather than lowering min.insync.replicas.",
                        f'{row["intervals"]} interval(s) over {row["partitions"]} partition(s), '
                        f'{row["total_ms"] / 1000:.1f} s in total'))
        if row["kind"] == "offline":
            out.append(("Partitions went offline (no in-sync replica to lead). Keep "
                        "unclean.leader.election.enable=false unless losing acknowledged data is acceptable; "
                        "the ISR fixes above keep more replicas electable.",
                        f'{row["intervals"]} interval(s), {row["total_ms"] / 1000:.1f} s in total'))
    return out


def _notes(data: ReportData) -> list[str]:
    partitions = data.summary["partitions"]
    notes = [f"All times are UTC. Kafka log4j timestamps were read as {data.options.log_timezone}.",
             f"Under-replicated means an ISR smaller than the replica set: the replica set was named by the events "
             f"for {data.partitions_with_replicas} of {partitions} partition(s); for the others it is taken as the "
             f"largest ISR seen for the partition, so a replica that was out for the whole log is not counted.",
             f"Shrink episodes group removals less than {health.EPISODE_GAP_S} s apart, split by cause and by the "
             "broker at fault, checked in this order: failed (the replica marked the partition failed), leader (the "
             "followers' fetches were pending at the leader when removed; in logs that do not say, every follower "
             "of the leader's partitions removed while staying in sync with other leaders), follower (one broker "
             f"removed from at least {health.FOLLOWER_PARTITIONS_MIN} partitions); the other removals of a time "
             f"group are one episode: burst (every replica back within {health.BURST_OUT_MS_MAX / 1000:.0f} s, "
             "none stuck), insync reasons (stuck, slow), unknown.",
             f"A flapping episode is a replica removed and re-added within {data.options.flap_window_ms / 1000:.0f} s.",
             "Shutdown is not an outage: an interval still open when a broker's log ends (a clean stop, a controlled "
             f"shutdown, cluster down) or when the Kafka broker that stated it logs its shutdown is shown as "
             f"{OPEN_AT_END}, and one begun by a controlled shutdown moving "
             f"leadership as {SHUTDOWN}; neither counts as under-replicated, under-min-ISR or offline time, nor in "
             "the recommendations.",
             "Data at risk: a single-replica ISR outside min ISR means acks=all writes acknowledged by one copy "
             "(min ISR 1; in Kafka logs that never show the partition under min ISR, min ISR is taken as 1); under "
             "min ISR, writes were refused, not lost; an unclean election gives up what only the old ISR had.",
             f"Internal topics (names starting with {INTERNAL_PREFIX}) are summarised in one row of the intervals "
             "table and one lane of the chart, except a partition of theirs that was offline or under min ISR."]
    if data.inputs.kafka_logs:
        notes.append("Kafka server.log lines do not show a partition going offline (that is in the controller's "
                     "log): offline windows come from insync events only.")
    return notes


_CSS = ("body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
        "th{background:#f3f3f3}.none{color:#777}h2{border-bottom:1px solid #ddd;margin-top:1.6em}"
        ".kpi{display:inline-block;margin:0 1.5em .5em 0}.kpi b{font-size:1.4em;display:block}"
        "code{background:#f6f6f6}")

EPISODE_COLUMNS = ("episode", "start", "end", "duration_ms", "cause", "broker_at_fault", "evidence", "partitions",
                   "removals", "removed_brokers", "leaders", "max_out_ms", "not_back")
RISK_COLUMNS = ("topic", "partition", "single_replica_isr_ms", "under_min_isr_ms", "produce_refusals",
                "unclean_elections", "records_given_up")
INTERVAL_COLUMNS = ("topic", "partition", "kind", "start", "end", "duration_ms", "status")
FLAP_COLUMNS = ("topic", "partition", "replica", "leader", "removed_at", "readded_at", "out_ms", "reason")
BROKER_COLUMNS = ("broker", "times_removed", "partitions_removed_from", "times_leader_of_removal",
                  "partitions_led_with_removals", "follower_episodes", "leader_episodes", "flaps", "removed_stuck",
                  "removed_slow", "removed_by_messages", "partitions_failed", "events_reported")


def _kpis(summary: dict[str, Any]) -> str:
    shown = [(k, v) for k, v in summary.items() if k != "episodes_by_cause"]
    shown += [(f"{cause} episodes", n) for cause, n in summary["episodes_by_cause"].items()]
    return "".join(f'<span class=kpi><b>{escape(str(v))}</b>{escape(k)}</span>' for k, v in shown)


def _charts(data: ReportData) -> str:
    parts = []
    if data.churn:
        labels = [utc(ms) for ms, _, _ in data.churn]
        parts.append(svg.stacked_bars(f"ISR shrinks and expands per {data.bucket_ms // 1000} s", labels,
                                      {"shrink": [s for _, s, _ in data.churn],
                                       "expand": [e for _, _, e in data.churn]}))
    if data.gantt_rows and data.first_ms is not None and data.last_ms is not None:
        parts.append(svg.gantt("Intervals of the most under-replicated partitions", data.gantt_rows,
                               data.first_ms, data.last_ms, utc))
    return "".join(f"<div>{p}</div>" for p in parts) or "<p class=none>No ISR changes to plot.</p>"


def render(data: ReportData) -> str:
    """The whole report page."""
    advice = recommendations(data)
    advice_html = ("".join(f"<li><p>{escape(a)}</p><p><i>Evidence:</i> {escape(e)}</p></li>" for a, e in advice)
                   if advice else "<li>No ISR churn, no under-min-ISR or offline time: nothing to change.</li>")
    broker_chart = svg.horizontal_bars("Per broker", [
        (f'broker {b["broker"]}', {"times removed": int(b["times_removed"]),
                                   "leader when followers removed": int(b["times_leader_of_removal"])})
        for b in data.brokers]) if data.brokers else ""
    inputs = [*data.inputs.event_logs, *data.inputs.kafka_logs]
    sections = [
        f"<h1>insync replication-health report</h1><p>{utc(data.first_ms)} to {utc(data.last_ms)} (UTC), "
        f"{len(inputs)} log file(s).</p>",
        f"<h2>Summary</h2><div>{_kpis(data.summary)}</div>",
        "<h2>Data at risk</h2>" + _table(data.data_at_risk, RISK_COLUMNS),
        f"<h2>Recommendations</h2><ol>{advice_html}</ol>",
        f"<h2>ISR churn and intervals</h2>{_charts(data)}",
        "<h3>Intervals by kind</h3>" + _table(data.interval_totals, ("kind", "intervals", "partitions", "total_ms",
                                                                     "max_ms", OPEN_AT_END_COLUMN,
                                                                     SHUTDOWN_COLUMN)),
        "<h3>Longest intervals</h3>" + _table(data.longest_intervals, INTERVAL_COLUMNS),
        "<h2>Shrink episodes and causes</h2>" + _table(data.episodes, EPISODE_COLUMNS),
        "<h2>Flapping episodes</h2>" + _table(data.flaps, FLAP_COLUMNS),
        f"<h2>Per broker</h2>{broker_chart}" + _table(data.brokers, BROKER_COLUMNS),
        "<h2>Malformed lines</h2>" + _table(data.malformed_by_reason, ("source", "reason", "count"))
        + _table(data.malformed_examples, ("source", "file", "line", "reason", "text")),
        "<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in _notes(data)) + "</ul>",
        "<h2>Inputs</h2><ul>" + "".join(f"<li><code>{escape(p)}</code></li>" for p in inputs[:TOP_ROWS]) + "</ul>",
    ]
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>insync analysis</title>"
            f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>\n")
