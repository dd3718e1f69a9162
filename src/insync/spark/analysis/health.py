"""The replication-health analysis: from the normalised event table to the tables an operator reads after an alert
storm. Every step is a DataFrame transformation; only small aggregates ever reach the driver.
- `isr_changes`: each partition's ISR as a time-ordered sequence; a change is a step whose members differ from
  the step before (one change read from two sources, or Kafka 2.x's commit line after its shrink, is not two).
- `intervals`: under-replicated, under min ISR and offline, one mechanism: each piece of evidence is a
  (partition, kind, time, state) row, an interval a maximal run of `true`. Shutdown is no outage: an interval cut
  by the end of a broker's log or its shutdown lines is `open_ended`, one begun by a controlled shutdown `shutdown`.
- `removals`: one row per replica removed from an ISR, with how long it stayed out and what its broker was doing
  (`lifecycle`); a flapping episode is a removal re-added within the flap window, a shutdown's is none.
- `episodes`: removals (but a shutdown's) grouped in time (EPISODE_GAP_S), then by cause and the broker at fault:
  `failed`, `follower` (fenced by the controller, or out of several partitions), `leader` (fetches pending at the
  leader, or every follower of one leader removed: KIP-501's slow leader); the rest is one episode per group:
  `burst` (seed 001), insync's `stuck` or `slow`, or `unknown`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from insync.events import LeaderChangeReason
from insync.spark.analysis import lifecycle
from insync.spark.analysis.kafka_lines import BROKER_SHUTDOWN, ISR_CHANGE_REFUSED, ISR_UPDATE
from insync.spark.analysis.logparse import removed_entry

EPISODE_GAP_S = 10
BURST_OUT_MS_MAX = 5_000
FOLLOWER_PARTITIONS_MIN = 2
CAUSES = ("follower", "leader", "failed", "burst", "stuck", "slow", "unknown")
TOPIC_PARTITIONS_NAMED = 10  # an episode's table row names at most this many partitions
SINGLE_REPLICA = "single_replica_isr"  # a kind of state row for `data_at_risk`, not an interval reported

_ORDER = ("ts_ms", "file", "line")  # a total order of events: time, then position in the logs


def _reversed_order() -> list[Column]:
    return [F.col(name).desc() for name in _ORDER]


@dataclass(frozen=True, slots=True)
class AnalysisOptions:
    flap_window_ms: int = 60_000
    log_timezone: str = "UTC"

    def __post_init__(self) -> None:
        assert self.flap_window_ms > 0, self.flap_window_ms


def _ids_text(ids: Column) -> Column:
    return F.array_join(F.transform(ids, lambda b: b.cast("string")), ",")


# ---------------------------------------------------------------------------------------------------------------
# ISR changes


def isr_steps(events: DataFrame) -> DataFrame:
    """Every event that states a partition's ISR, with the ISR of the step before (`previous_isr`) and the ISR
    before it (as the event states it, else the previous step's). A shrink or expand that its broker's next line
    about the partition refuses (`isr_change_refused`: before 2.7, the leader's ZooKeeper write lost) did not
    happen and is no step: without this, each refused shrink and the next line's ISR would read as a phantom
    shrink and expand (KAFKA-2729's loop logs one every check)."""
    assert set(_ORDER) <= set(events.columns), events.columns
    kinds = ("isr_shrink", "isr_expand", ISR_UPDATE, "leader_change")
    candidates = events.where((F.col("type").isin(*kinds) & F.col("isr_after").isNotNull())
                              | (F.col("type") == ISR_CHANGE_REFUSED))
    # Refusals are rare: only the histories (partition, broker) that hold one need the window that finds the
    # change each refuses; the others are kept as they are, without a shuffle and a sort of every ISR step.
    keys = ("topic", "partition", "broker")
    refusing = F.broadcast(candidates.where(F.col("type") == ISR_CHANGE_REFUSED)
                           .select(*(F.col(k).alias(f"_r_{k}") for k in keys)).distinct())
    same = [F.col(k).eqNullSafe(F.col(f"_r_{k}")) for k in keys]
    by_broker = Window.partitionBy(*keys).orderBy(*_ORDER)
    refused = F.coalesce(F.lead("type").over(by_broker) == ISR_CHANGE_REFUSED, F.lit(False))
    judged = (candidates.join(refusing, same[0] & same[1] & same[2], "left_semi").withColumn("_refused", refused)
              .where(F.col("type").isin(*kinds) & ~(F.col("_refused") & F.col("type").isin("isr_shrink", "isr_expand")))
              .drop("_refused"))
    steps = (candidates.join(refusing, same[0] & same[1] & same[2], "left_anti")
             .where(F.col("type").isin(*kinds)).unionByName(judged))
    by_partition = Window.partitionBy("topic", "partition").orderBy(*_ORDER)
    return (_current(steps, by_partition).withColumn("previous_isr", F.lag("isr_after").over(by_partition))
            .withColumn("isr_before", F.coalesce("isr_before", "previous_isr")))


def _current(steps: DataFrame, by_partition: WindowSpec) -> DataFrame:
    """The ISR steps that state the partition as it is, without those of Kafka's that are out of date:
    - a state older (a lower partition epoch) than one already stated: a broker that learns metadata late (it was
      paused, say) restates what others learnt long before;
    - a shrink or expand by a broker that another line already says is no longer the leader: a paused leader, once
      resumed, proposes an AlterPartition from its old view before it learns it was replaced (nothing commits it)."""
    before = by_partition.rowsBetween(Window.unboundedPreceding, -1)
    proposal = F.col("type").isin("isr_shrink", "isr_expand")
    leader_now = F.last(F.when(~proposal, F.col("leader")), ignorenulls=True).over(before)
    stale = ((F.col("partition_epoch") < F.max("partition_epoch").over(before))
             | (proposal & (F.col("source") == "kafka") & (F.col("leader") != leader_now)))
    return steps.withColumn("_stale", F.coalesce(stale, F.lit(False))).where(~F.col("_stale")).drop("_stale")


def isr_changes(steps: DataFrame) -> DataFrame:
    """Shrinks and expands: ISR steps that change the members. A Kafka broker's `Leader ... starts at leader epoch`
    line states the ISR its controller left (a replica it fenced is gone); insync's `leader_change` events are not
    counted (its leaders report their shrinks and expands as events of their own)."""
    removed_ids = F.array_except("isr_before", "isr_after")
    added_ids = F.array_except("isr_after", "isr_before")

    def logged_or_bare(broker: Column) -> Column:
        logged = F.get(F.filter(F.coalesce("removed", F.array()), lambda r: r["broker"] == broker), 0)
        return F.coalesce(logged, removed_entry(broker))

    # A step that restates the ISR the partition already had is no change: Kafka 2.x's commit line after its
    # shrink line, or the same change read from both a broker's events.jsonl and its server.log.
    restated = F.coalesce(F.col("previous_isr") == F.col("isr_after"), F.lit(False))
    counted = (F.col("type") != "leader_change") | (F.col("source") == "kafka")
    changes = (steps.where(counted & F.col("isr_before").isNotNull() & ~restated)
               .withColumn("removed", F.transform(removed_ids, logged_or_bare))
               .withColumn("added", added_ids)
               .where((F.size("removed") > 0) | (F.size("added") > 0)))
    change = (F.when((F.size("removed") > 0) & (F.size("added") > 0), F.lit("shrink+expand"))
              .when(F.size("removed") > 0, F.lit("shrink")).otherwise(F.lit("expand")))
    return changes.select("ts", "ts_ms", "topic", "partition", "leader", change.alias("change"),
                          F.col("type").alias("logged_as"), "isr_before", "isr_after", "removed", "added",
                          "leader_epoch", "source", "file", "line")


# ---------------------------------------------------------------------------------------------------------------
# Intervals


def replica_counts(events: DataFrame) -> DataFrame:
    """Per partition: the replica set size where events name it, else the largest ISR seen."""
    return events.where(F.col("topic").isNotNull()).groupBy("topic", "partition").agg(
        F.max(F.size("replicas")).alias("replicas_named"),
        F.max(F.greatest(F.size("isr_before"), F.size("isr_after"))).alias("isr_max"),
        F.max("min_isr").alias("partition_min_isr")
    ).select("topic", "partition", F.coalesce("replicas_named", "isr_max").alias("replica_count"),
             F.col("replicas_named").isNotNull().alias("replicas_known"), "partition_min_isr")


_SHUTDOWN_REMOVAL = "_shutdown_removal"  # the column `_with_shutdown_removals` adds to ISR steps


def _state(df: DataFrame, kind: str, state: Column, full_isr: Column | None = None) -> DataFrame:
    """A state row; `shutdown_move` says whether the row moved the partition for a controlled shutdown (a leader
    change whose reason says so, or an ISR step that removed only replicas shutting down: `_with_shutdown_removals`)
    or for anything else (any other leader change or removal), and is null for other rows; `full_isr`, where
    given, whether the row's ISR is the whole replica set (an under-replicated row's own state says so without it)."""
    # insync keeps a leader change's reason in `detail`; Kafka's lines do not say why a leader changed, but the
    # brokers' and controller's lines say which brokers were shutting down.
    by_reason = F.coalesce(F.col("detail") == str(LeaderChangeReason.SHUTDOWN), F.lit(False))
    removal = F.col(_SHUTDOWN_REMOVAL) if _SHUTDOWN_REMOVAL in df.columns else F.lit(None).cast("boolean")
    move = F.when(F.col("type") == "leader_change", by_reason | F.coalesce(removal, F.lit(False))).otherwise(removal)
    full = F.lit(None).cast("boolean") if full_isr is None else full_isr
    return df.select("topic", "partition", F.lit(kind).alias("kind"), *_ORDER, state.alias("state"),
                     move.alias("shutdown_move"), full.alias("full_isr"))


def _with_shutdown_removals(steps: DataFrame, events: DataFrame) -> DataFrame:
    """ISR steps with `_shutdown_removal`: whether every replica the step removed was shutting down then (null when
    it removed none)."""
    removed = F.when(F.col("isr_before").isNotNull(), F.array_except("isr_before", "isr_after"))
    only_shutdowns = F.forall(removed, lambda r: F.coalesce(
        lifecycle.state_of(r, F.col("ts_ms")) == lifecycle.SHUTDOWN, F.lit(False)))
    return (lifecycle.with_lifecycles(steps, events)
            .withColumn(_SHUTDOWN_REMOVAL, F.when(F.size(removed) > 0, only_shutdowns)).drop(lifecycle.LIFECYCLES))


def state_rows(events: DataFrame, steps: DataFrame, counts: DataFrame) -> DataFrame:
    """(topic, partition, kind, ts_ms, file, line, state) from every source of evidence; null states dropped."""
    typ = F.col("type")
    sized = _with_shutdown_removals(steps, events).join(counts, ["topic", "partition"], "left")
    isr_size = F.size("isr_after")
    explicit = events.where(typ.isin("under_replicated_start", "under_replicated_end", "under_min_isr_start",
                                     "under_min_isr_end", "partition_offline", "partition_online"))
    rows = [
        _state(sized, "under_replicated", isr_size < F.col("replica_count")),
        _state(explicit.where(typ.startswith("under_replicated")), "under_replicated",
               typ == "under_replicated_start"),
        _state(sized, "under_min_isr", F.coalesce("under_min_isr", isr_size < F.col("partition_min_isr"))),
        _state(events.where(typ == "produce_rejected"), "under_min_isr", F.lit(True)),
        _state(explicit.where(typ.startswith("under_min_isr")), "under_min_isr", typ == "under_min_isr_start"),
        _state(explicit.where(typ.startswith("partition_o")), "offline", typ == "partition_offline"),
        _state(events.where((typ == "leader_change") & F.col("leader").isNotNull()), "offline",
               F.col("leader") < 0),
    ]
    union = rows[0]
    for more in rows[1:]:
        union = union.unionByName(more)
    return union.where(F.col("state").isNotNull())


def outage() -> Column:
    """An interval that counts as under-replicated, under-min-ISR or offline time: closed by evidence, and not
    begun by a controlled shutdown."""
    return ~F.col("open_ended") & ~F.col("shutdown")


LOG_END_COLUMNS = {"file", "log_end_ms", "shutdowns"}


def log_ends(events: DataFrame) -> DataFrame:
    """(file, log_end_ms, shutdowns): the last event time of each log file, and the (ts_ms, line) of each shutdown
    its broker logged (Kafka's `broker_shutdown` lines), in order."""
    assert {"file", "ts_ms", "line", "type"} <= set(events.columns), events.columns
    shutdown = F.when(F.col("type") == BROKER_SHUTDOWN, F.struct("ts_ms", "line"))
    return events.groupBy("file").agg(F.max("ts_ms").alias("log_end_ms"),
                                      F.array_sort(F.collect_list(shutdown)).alias("shutdowns"))


def _cut_ms(next_ms: Column) -> Column:
    """The first shutdown in this state row's file after the row, when it comes before the partition's next state
    row (`next_ms`, null when none): the evidence this row gave ends there. Null otherwise."""
    ts, line = F.col("ts_ms"), F.col("line")
    after = F.filter(F.coalesce("shutdowns", F.array()), lambda s: (s["ts_ms"] > ts) | ((s["ts_ms"] == ts)
                                                                                        & (s["line"] > line)))
    first = F.get(after, 0)["ts_ms"]
    return F.when(next_ms.isNull() | (first < next_ms), first)


def intervals(states: DataFrame, ends: DataFrame) -> DataFrame:
    """Maximal runs of `true` per (partition, kind). A run no evidence closes is open at the end of the log: it
    ends at the last event (`ends`, from `log_ends`) of the file holding its partition's last state row. A run
    whose latest state row came from a broker that then logged its shutdown, before any other state row of the
    partition, is cut there: it ends at the shutdown, open at the end of (that part of) the log, and a state the
    broker states again after its restart begins a new run."""
    assert {"state", "shutdown_move", "full_isr"} <= set(states.columns), states.columns
    assert set(ends.columns) == LOG_END_COLUMNS, ends.columns
    # In a controlled shutdown: since the partition's last shutdown move, with no other move or full ISR since.
    # Partitioned by partition only, so the per-kind window below needs a sort but no new shuffle.
    in_order = Window.partitionBy("topic", "partition").orderBy(*_ORDER)
    by_partition = in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    full_isr = F.coalesce("full_isr", (F.col("kind") == "under_replicated") & ~F.col("state"))
    marker = F.coalesce("shutdown_move", F.when(full_isr, F.lit(False)))
    # One log line makes a state row per kind, peers in this order that Spark puts in any order (it differs with
    # the shuffle's partitions); the line is a shutdown move when any of its rows says so (a leader change knows
    # it only from the ISR step's removals), so every row of it takes the same answer, in any order.
    same_line = in_order.rangeBetween(Window.currentRow, Window.currentRow)
    by_kind = Window.partitionBy("topic", "partition", "kind").orderBy(*_ORDER)
    # The whole partition as the frame: Spark computes it once per partition. A frame from the current row to the
    # end is computed again for every row (quadratic in a partition's rows: two thirds of the analysis's time).
    whole = by_kind.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    rows = (states.join(F.broadcast(ends.select("file", "shutdowns")), "file", "left")
            .withColumn("line_marker", F.max(marker).over(same_line))
            .withColumn("shutdown", F.coalesce(F.last("line_marker", ignorenulls=True).over(by_partition),
                                               F.lit(False)))
            .withColumn("previous", F.coalesce(F.lag("state").over(by_kind), F.lit(False)))
            .withColumn("cut_ms", F.when(F.col("state"), _cut_ms(F.lead("ts_ms").over(by_kind))))
            .withColumn("after_cut", F.coalesce(F.lag(F.col("cut_ms").isNotNull()).over(by_kind), F.lit(False)))
            .withColumn("last_file", F.last("file").over(whole)))
    # The rows where a run begins, ends on evidence (a `false` state), or is cut: each run is a `begins` row and
    # the next of these rows (none: open at the end of the log). The filter keeps the window's order, so the
    # `lead` below needs no new sort.
    begins = F.col("state") & (~F.col("previous") | F.col("after_cut"))
    closes = ~F.col("state") & F.col("previous") & ~F.col("after_cut")
    bounds = (rows.where(begins | closes | F.col("cut_ms").isNotNull())
              .withColumn("next_end_ms", F.lead(F.coalesce("cut_ms", "ts_ms")).over(by_kind))
              .withColumn("next_cut", F.lead(F.col("cut_ms").isNotNull()).over(by_kind)))
    runs = bounds.where(begins).join(F.broadcast(ends.select(F.col("file").alias("last_file"), "log_end_ms")),
                                     "last_file", "left")
    end_ms = F.coalesce("cut_ms", "next_end_ms", "log_end_ms")
    open_ended = F.col("cut_ms").isNotNull() | F.coalesce("next_cut", F.lit(True))
    return runs.select("topic", "partition", "kind", F.timestamp_millis("ts_ms").alias("start"),
                       F.timestamp_millis(end_ms).alias("end"), F.col("ts_ms").alias("start_ms"),
                       end_ms.alias("end_ms"), (end_ms - F.col("ts_ms")).alias("duration_ms"),
                       open_ended.alias("open_ended"), "shutdown")


# ---------------------------------------------------------------------------------------------------------------
# Removals, flapping, episodes


def removals(changes: DataFrame, events: DataFrame) -> DataFrame:
    """One row per replica removed from an ISR, with `back_ms` until it was added back (null if never), whether a
    fetch from it was pending at the leader (`fetch_pending`: null when the log does not say), whether it had
    reported the partition failed since it last moved in or out of that ISR (`failed`), and whether its broker was
    shutting down (`shutdown`) or fenced by the controller (`fenced`) then (`lifecycle`)."""
    assert {"removed", "added", "isr_after", "leader"} <= set(changes.columns), changes.columns
    outs = changes.select("ts_ms", "topic", "partition", "leader", "isr_after", F.explode("removed").alias("r"),
                          "file", "line").select(
        "ts_ms", "topic", "partition", "leader", "isr_after", F.col("r.broker").alias("replica"),
        F.col("r.reason").alias("reason"), F.col("r.fetch_pending").alias("fetch_pending"),
        F.lit("out").alias("move"), "file", "line")
    ins = changes.select("ts_ms", "topic", "partition", "leader", "isr_after", F.explode("added").alias("replica"),
                         F.lit(None).cast("string").alias("reason"), F.lit(None).cast("boolean").alias("fetch_pending"),
                         F.lit("in").alias("move"), "file", "line")
    by_replica = Window.partitionBy("topic", "partition", "replica").orderBy(*_ORDER)
    moves = outs.unionByName(ins).withColumn("next_move", F.lead("move").over(by_replica)) \
        .withColumn("next_ms", F.lead("ts_ms").over(by_replica)) \
        .withColumn("previous_ms", F.lag("ts_ms").over(by_replica))
    # Failure reports are few: one small list per (partition, replica), broadcast.
    failures = events.where(F.col("type") == "partition_failed").groupBy(
        "topic", "partition", F.col("broker").alias("replica")).agg(F.collect_list("ts_ms").alias("failed_at"))
    since = F.coalesce("previous_ms", F.lit(-1))
    failed = F.exists(F.coalesce("failed_at", F.array().cast("array<long>")),
                      lambda t: (t <= F.col("ts_ms")) & (t > since))
    all_followers_out = (F.size("isr_after") == 1) & F.array_contains("isr_after", F.col("leader"))
    state = lifecycle.state_of(F.col("replica"), F.col("ts_ms"))
    outs = lifecycle.with_lifecycles(moves.where(F.col("move") == "out"), events)
    return outs.join(F.broadcast(failures), ["topic", "partition", "replica"], "left").select(
        "ts_ms", "topic", "partition", "leader", "replica", "reason", "fetch_pending", failed.alias("failed"),
        F.coalesce(all_followers_out, F.lit(False)).alias("all_followers_out"),
        F.when(F.col("next_move") == "in", F.col("next_ms") - F.col("ts_ms")).alias("back_ms"),
        F.coalesce(state == lifecycle.SHUTDOWN, F.lit(False)).alias("shutdown"),
        F.coalesce(state == lifecycle.FENCED, F.lit(False)).alias("fenced"), "file", "line")


def flapping(outs: DataFrame, flap_window_ms: int) -> DataFrame:
    assert flap_window_ms > 0, flap_window_ms
    flaps = outs.where(F.col("back_ms") <= flap_window_ms)
    return flaps.select("topic", "partition", "replica", "leader", F.timestamp_millis("ts_ms").alias("removed_at"),
                        F.timestamp_millis(F.col("ts_ms") + F.col("back_ms")).alias("readded_at"),
                        F.col("back_ms").alias("out_ms"), "reason", "file", "line")


def assign_episodes(outs: DataFrame) -> DataFrame:
    """Removals with an `episode` number: seconds with removals, split where the gap exceeds EPISODE_GAP_S. A
    replica removed because its broker was shutting down is no fault: it has no episode, and is no flap."""
    assert {"ts_ms", "shutdown"} <= set(outs.columns), outs.columns
    outs = outs.where(~F.col("shutdown"))
    seconds = outs.select(F.floor(F.col("ts_ms") / 1000).alias("second")).distinct()
    in_time = Window.orderBy("second")
    new = F.when(F.col("second") - F.lag("second").over(in_time) <= EPISODE_GAP_S, 0).otherwise(1)
    seconds = seconds.withColumn("new", new).withColumn(
        "episode", F.sum("new").over(in_time.rowsBetween(Window.unboundedPreceding, 0)).cast("int"))
    # Partitioned by episode: every window of `blame` and the aggregate of `episodes` group by the episode and
    # more, which this partitioning satisfies, so they sort but shuffle no more (one shuffle instead of five).
    return outs.withColumn("second", F.floor(F.col("ts_ms") / 1000)).join(
        F.broadcast(seconds.select("second", "episode")), "second").drop("second").repartition("episode")


def blame(outs: DataFrame) -> DataFrame:
    """Each removal of a time group (`episode`, from `assign_episodes`) with the cause (`blame`) and the broker at
    fault (`at_fault`) that the removal or its group's pattern shows, checked in this order (null when none):
    - `failed`: the removed replica had reported the partition failed since it last moved (its own disk);
    - `follower`: the removed replica's broker had been fenced by the controller (it stopped heartbeating: paused,
      killed, cut off), whether it followed or led the partition, or was fenced later in the group before it came
      back (a leader's lag check can drop a stopped broker before the controller's session timeout fences it);
    - `leader`: a fetch from the replica was pending at the leader when it was removed (insync's evidence), or,
      where the log does not say (Kafka, events before version 2), every follower of each partition the leader
      had removals on was removed in the group, at least two followers, none of them was removed by another
      leader in the group (they stayed in sync elsewhere: the leader, not they, was slow), and not all came
      back within BURST_OUT_MS_MAX unstuck (that is a burst);
    - `follower`: one replica removed from at least FOLLOWER_PARTITIONS_MIN partitions (the rest of its removals),
      and the removals that broker made itself as a leader in the group (a paused broker, resumed, drops the
      followers that could not fetch from it meanwhile), and its removals in other time groups while it was out
      as such.
    """
    assert {"episode", "fetch_pending", "failed", "fenced", "all_followers_out"} <= set(outs.columns), outs.columns
    by_leader = Window.partitionBy("episode", "leader")
    by_replica = Window.partitionBy("episode", "replica")
    by_partition = Window.partitionBy("episode", "topic", "partition")

    def every(condition: Column, window: WindowSpec) -> Column:
        return F.min(F.coalesce(condition, F.lit(False)).cast("int")).over(window) == 1

    # The first removal of the same replica, at or after this one, that found its broker fenced: a running minimum
    # in reverse order, since a frame from the current row to the end is computed again for every row.
    fenced_next = F.min(F.when(F.col("fenced"), F.col("ts_ms"))).over(
        by_replica.orderBy(*_reversed_order()).rowsBetween(Window.unboundedPreceding, 0))
    outs = outs.withColumn("fenced", F.coalesce(fenced_next.isNotNull() & (
        F.col("back_ms").isNull() | (F.col("ts_ms") + F.col("back_ms") >= fenced_next)), F.lit(False)))
    marked = (outs.withColumn("_emptied", F.max(F.col("all_followers_out").cast("int")).over(by_partition) == 1)
              .withColumn("_one_leader", F.size(F.collect_set("leader").over(by_replica)) == 1))
    # A burst (every follower back within seconds, none stuck: the count rule's large batch) empties ISRs too.
    burst_like = (F.col("back_ms") <= BURST_OUT_MS_MAX) & ~F.coalesce(F.col("reason") == "stuck", F.lit(False))
    pattern = (every(F.col("fetch_pending").isNull(), by_leader) & every(F.col("_emptied"), by_leader)
               & every(F.col("_one_leader"), by_leader) & (F.size(F.collect_set("replica").over(by_leader)) >= 2)
               & ~every(burst_like, by_leader))
    first = (F.when(F.col("failed"), F.lit("failed")).when(F.col("fenced"), F.lit("follower"))
             .when(F.coalesce("fetch_pending", F.lit(False)) | pattern, F.lit("leader")))
    marked = marked.withColumn("blame", first).withColumn(
        "at_fault", F.when(F.col("blame").isin("failed", "follower"), F.col("replica"))
        .when(F.col("blame") == "leader", F.col("leader")))
    # Distinct partitions per replica among its unblamed removals, counted by marking each one's first removal:
    # a set collected over the window would be copied into every row (quadratic in an episode's removals).
    by_rest = Window.partitionBy("episode", "replica", "topic", "partition", F.col("blame").isNull()).orderBy(*_ORDER)
    first = F.col("blame").isNull() & (F.row_number().over(by_rest) == 1)
    marked = marked.withColumn("_rest_partitions", F.sum(first.cast("int")).over(by_replica))
    follower = F.col("blame").isNull() & (F.col("_rest_partitions") >= FOLLOWER_PARTITIONS_MIN)
    marked = (marked.withColumn("at_fault", F.when(follower, F.col("replica")).otherwise(F.col("at_fault")))
              .withColumn("blame", F.when(follower, F.lit("follower")).otherwise(F.col("blame"))))
    # A stuck broker that leads partitions too removes their followers once it runs again (they could not reach
    # it): the same broker at fault.
    stuck_brokers = F.collect_set(F.when(F.col("blame") == "follower", F.col("at_fault"))).over(
        Window.partitionBy("episode"))
    own = F.col("blame").isNull() & F.array_contains(stuck_brokers, F.col("leader"))
    marked = (marked.withColumn("at_fault", F.when(own, F.col("leader")).otherwise(F.col("at_fault")))
              .withColumn("blame", F.when(own, F.lit("follower")).otherwise(F.col("blame"))))
    return _overlapping_follower(marked).drop("_emptied", "_one_leader", "_rest_partitions")


def _overlapping_follower(marked: DataFrame) -> DataFrame:
    """A removal no rule blamed, of a replica that was out at the same time, in another time group, as a follower
    at fault until it came back: the same follower's fault (a slow follower falls behind on its partitions at
    different times). A removal never followed by the replica's return proves nothing about later ones."""
    by_replica = Window.partitionBy("replica")
    as_follower = (F.col("blame") == "follower") & (F.col("at_fault") == F.col("replica")) & F.col("back_ms").isNotNull()
    end = F.col("ts_ms") + F.coalesce(F.col("back_ms"), F.lit(0))
    before_end = F.max(F.when(as_follower, end)).over(
        by_replica.orderBy(*_ORDER).rowsBetween(Window.unboundedPreceding, -1))
    # The rows after this one as the rows before it in reverse order: a running minimum, not a frame recomputed for
    # every row (quadratic in a replica's removals).
    after_start = F.min(F.when(as_follower, F.col("ts_ms"))).over(
        by_replica.orderBy(*_reversed_order()).rowsBetween(Window.unboundedPreceding, -1))
    late = F.col("blame").isNull() & F.coalesce((before_end >= F.col("ts_ms")) | (after_start <= end), F.lit(False))
    return (marked.withColumn("at_fault", F.when(late, F.col("replica")).otherwise(F.col("at_fault")))
            .withColumn("blame", F.when(late, F.lit("follower")).otherwise(F.col("blame"))))


def _cause() -> Column:
    """The cause of removals no broker is blamed for (`blame`), from how they went."""
    return (F.when((F.col("not_back") == 0) & (F.col("max_out_ms") <= BURST_OUT_MS_MAX) & (F.col("stuck") == 0),
                   F.lit("burst"))
            .when((F.col("stuck") > 0) & (F.col("stuck") >= F.col("slow")), F.lit("stuck"))
            .when(F.col("slow") > 0, F.lit("slow"))
            .otherwise(F.lit("unknown")))


def _evidence() -> Column:
    span_s = (F.col("last_removal_ms") - F.col("start_ms")) / 1000.0
    removed, leaders = _ids_text(F.col("removed_brokers")), _ids_text(F.col("leaders"))
    named = F.array_join(F.col("topic_partitions"), ", ")
    cause = F.col("cause")
    return (F.when((cause == "follower") & (F.col("fenced") > 0), F.format_string(
                "broker %s fenced by the controller (it stopped heartbeating) and removed from %d partitions "
                "(leaders %s) within %.1f s", removed, "partitions", leaders, span_s))
            .when(cause == "follower", F.format_string(
                "broker %s removed from %d partitions (leaders %s) within %.1f s", removed, "partitions", leaders,
                span_s))
            .when((cause == "leader") & (F.col("pending") > 0), F.format_string(
                "followers %s of %d partitions led by broker %d removed within %.1f s while %d of their fetches were "
                "pending at the leader (it was serving them)", removed, "partitions", "broker_at_fault", span_s,
                "pending"))
            .when(cause == "leader", F.format_string(
                "every follower (%s) of %d partitions led by broker %d removed within %.1f s, none of them removed "
                "by another leader", removed, "partitions", "broker_at_fault", span_s))
            .when(cause == "failed", F.format_string(
                "broker %d marked %s failed and left its ISR (leaders %s)", "broker_at_fault", named, leaders))
            .when(cause == "burst", F.format_string(
                "%d removals over %d partitions, every replica back within %.1f s, none stuck", "removals",
                "partitions", F.col("max_out_ms") / 1000.0))
            .otherwise(F.format_string(
                "%d removals over %d partitions (brokers %s, leaders %s): %d stuck, %d slow, %d by message count",
                "removals", "partitions", removed, leaders, "stuck", "slow", "messages")))


def episodes(outs_with_episode: DataFrame, ends: DataFrame) -> DataFrame:
    """Removals grouped by time group, cause and broker at fault (`blame`), numbered in time order."""
    assert set(ends.columns) == LOG_END_COLUMNS, ends.columns
    reason = F.col("reason")
    agg = blame(outs_with_episode).join(F.broadcast(ends), "file", "left").groupBy("episode", "blame", "at_fault").agg(
        F.min("ts_ms").alias("start_ms"), F.max("ts_ms").alias("last_removal_ms"),
        F.max(F.coalesce(F.col("ts_ms") + F.col("back_ms"), "log_end_ms")).alias("end_ms"),
        F.count("*").alias("removals"),
        # One set of names gives the count too: a distinct count would make Spark aggregate every row twice more.
        F.collect_set(F.concat_ws("-", "topic", F.col("partition").cast("string"))).alias("_named"),
        F.array_sort(F.collect_set("replica")).alias("removed_brokers"),
        F.array_sort(F.collect_set("leader")).alias("leaders"),
        F.sum(F.coalesce("fetch_pending", F.lit(False)).cast("int")).alias("pending"),
        F.sum(F.col("fenced").cast("int")).alias("fenced"),
        F.sum(F.col("back_ms").isNull().cast("int")).alias("not_back"), F.max("back_ms").alias("max_out_ms"),
        F.sum(F.coalesce(reason == "stuck", F.lit(False)).cast("int")).alias("stuck"),
        F.sum(F.coalesce(reason == "slow", F.lit(False)).cast("int")).alias("slow"),
        F.sum(F.coalesce(reason == "messages", F.lit(False)).cast("int")).alias("messages"))
    agg = (agg.withColumn("partitions", F.size("_named").cast("long"))
           .withColumn("topic_partitions", F.slice(F.array_sort("_named"), 1, TOPIC_PARTITIONS_NAMED))
           .withColumn("cause", F.coalesce("blame", _cause())).withColumnRenamed("at_fault", "broker_at_fault")
           .withColumn("evidence", _evidence()))
    in_time = Window.orderBy("start_ms", "cause", F.col("broker_at_fault").asc_nulls_last())  # a small table
    return agg.select(F.row_number().over(in_time).alias("episode"), F.timestamp_millis("start_ms").alias("start"),
                      F.timestamp_millis("end_ms").alias("end"),
                      (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
                      (F.col("not_back") > 0).alias("open_ended"), "cause", "broker_at_fault", "evidence",
                      "partitions", "removals", "topic_partitions", "removed_brokers", "leaders", "max_out_ms",
                      "not_back", "pending", "stuck", "slow", "messages", "fenced")


def per_broker(events: DataFrame, outs: DataFrame, episode_table: DataFrame, flap_window_ms: int) -> DataFrame:
    """How often each broker was removed, and how often it led a partition whose followers were removed."""
    reason = F.col("reason")
    as_follower = outs.groupBy(F.col("replica").alias("broker")).agg(
        F.count("*").alias("times_removed"), F.countDistinct("topic", "partition").alias("partitions_removed_from"),
        F.sum(F.coalesce(F.col("back_ms") <= flap_window_ms, F.lit(False)).cast("int")).alias("flaps"),
        F.sum(F.coalesce(reason == "stuck", F.lit(False)).cast("int")).alias("removed_stuck"),
        F.sum(F.coalesce(reason == "slow", F.lit(False)).cast("int")).alias("removed_slow"),
        F.sum(F.coalesce(reason == "messages", F.lit(False)).cast("int")).alias("removed_by_messages"))
    as_leader = outs.where(F.col("leader").isNotNull()).groupBy(F.col("leader").alias("broker")).agg(
        F.count("*").alias("times_leader_of_removal"),
        F.countDistinct("topic", "partition").alias("partitions_led_with_removals"))
    blamed = episode_table.where(F.col("cause").isin("follower", "leader")).select(
        F.col("broker_at_fault").alias("broker"), "cause")
    by_episode = blamed.groupBy("broker").agg(
        F.sum((F.col("cause") == "follower").cast("int")).alias("follower_episodes"),
        F.sum((F.col("cause") == "leader").cast("int")).alias("leader_episodes"))
    reported = events.where(F.col("broker").isNotNull()).groupBy("broker").agg(
        F.count("*").alias("events_reported"),
        F.sum((F.col("type") == "partition_failed").cast("int")).alias("partitions_failed"))
    table = reported
    for part in (as_follower, as_leader, by_episode):
        table = table.join(part, "broker", "full_outer")
    counts = [c for c in table.columns if c != "broker"]
    return table.fillna(0, subset=counts).select("broker", *counts)


# ---------------------------------------------------------------------------------------------------------------
# Data at risk


def single_replica_states(steps: DataFrame, counts: DataFrame) -> DataFrame:
    """State rows of the kind SINGLE_REPLICA: the ISR is one replica and the partition has a leader (with none,
    offline, the ISR is kept as it was, and nothing is written, so nothing is acknowledged). Each says whether its
    ISR is full, which ends a controlled shutdown as it does for the intervals."""
    alone = (F.size("isr_after") == 1) & (F.coalesce("leader", F.lit(0)) >= 0)
    sized = steps.join(counts, ["topic", "partition"], "left")
    return _state(sized, SINGLE_REPLICA, alone, F.size("isr_after") >= F.col("replica_count"))


def data_at_risk(events: DataFrame, steps: DataFrame, spans: DataFrame, ends: DataFrame,
                 counts: DataFrame) -> DataFrame:
    """Per partition with something at risk or refused (outages only, as `outage`):
    - `single_replica_isr_ms`: time its ISR was one replica, with a leader, in a partition of more than one
      replica never seen under min ISR (no interval, no rejection, no `min.isr` in a Kafka line: its min ISR is
      1), so acks=all writes were acknowledged by that replica alone and its loss loses them. Where a partition
      was ever under min ISR, its min ISR is above 1 and a single replica refuses acks=all writes instead (judged
      per partition, not per instant: the leader reports under min ISR a few milliseconds after the controller's
      event that shrank the ISR);
    - `under_min_isr_ms` and `produce_refusals` (NOT_ENOUGH_REPLICAS answers counted: insync's count, one per
      Kafka rejection line): writes refused, not lost;
    - `unclean_elections` and `records_given_up` (insync's unclean recovery says which offsets; null: not known).
    """
    assert {"kind", "start_ms", "end_ms", "open_ended", "shutdown"} <= set(spans.columns), spans.columns
    # A partition of one replica (`counts`: replica_counts) has one copy by design, not by an incident.
    guarded = (spans.where(F.col("kind") == "under_min_isr").select("topic", "partition")
               .unionByName(counts.where(F.col("replica_count") <= 1).select("topic", "partition"))
               .unionByName(events.where(F.col("min_isr") > 1).select("topic", "partition")).distinct())
    at_risk = (intervals(single_replica_states(steps, counts), ends).where(outage())
               .join(guarded, ["topic", "partition"], "left_anti")
               .groupBy("topic", "partition").agg(F.sum("duration_ms").alias("single_replica_isr_ms")))
    refused = spans.where((F.col("kind") == "under_min_isr") & outage()).groupBy("topic", "partition").agg(
        F.sum("duration_ms").alias("under_min_isr_ms"))
    typ = F.col("type")
    counted = events.where(F.col("topic").isNotNull()).groupBy("topic", "partition").agg(
        F.sum(F.when((typ == "produce_rejected") & F.col("detail").startswith("NOT_ENOUGH_REPLICAS"),
                     F.coalesce("records", F.lit(1)))).alias("produce_refusals"),
        F.sum(((typ == "leader_change") & (F.col("detail") == str(LeaderChangeReason.UNCLEAN))).cast("int"))
        .alias("unclean_elections"),
        F.sum(F.when(typ == "unclean_recovery", F.col("records"))).alias("records_given_up"))
    table = at_risk
    for part in (refused, counted):
        table = table.join(part, ["topic", "partition"], "full_outer")
    table = table.fillna(0, subset=["single_replica_isr_ms", "under_min_isr_ms", "produce_refusals",
                                    "unclean_elections"])
    return table.where((F.col("single_replica_isr_ms") > 0) | (F.col("under_min_isr_ms") > 0)
                       | (F.col("produce_refusals") > 0) | (F.col("unclean_elections") > 0)).select(
        "topic", "partition", "single_replica_isr_ms", "under_min_isr_ms", "produce_refusals", "unclean_elections",
        "records_given_up")
