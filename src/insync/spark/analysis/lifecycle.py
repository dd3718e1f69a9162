"""What each broker was doing when it left an ISR: stopping on purpose, dropped by the controller, or running.

Brokers and controllers say so in events about a broker (`broker_id`): a broker's own shutdown lines and the
controller granting a controlled or immediate shutdown mark it SHUTDOWN (what follows is no fault); the controller
fencing it (KRaft: its session timed out; ZooKeeper: its session expired; insync's `broker_fenced`) marks it FENCED
(it is at fault, whatever it led or followed); its start, registration or unfencing marks it UP again. The marks of
every broker fit in one small map, joined to each row as a broadcast, so that `state_of(broker, ts_ms)` reads the
last mark at or before a time with a higher-order function: no join per removed replica.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from insync.events import EventType
from insync.spark.analysis.kafka_lines import (
    BROKER_FENCED,
    BROKER_SHUTDOWN,
    BROKER_STARTED,
    BROKER_UNFENCED,
    CONTROLLED_SHUTDOWN,
)

SHUTDOWN = "shutdown"
FENCED = "fenced"
UP = "up"
LIFECYCLES = "lifecycles"  # the column `with_lifecycles` adds


def _mark() -> Column:
    typ = F.col("type")
    return (F.when(typ.isin(BROKER_SHUTDOWN, CONTROLLED_SHUTDOWN), F.lit(SHUTDOWN))
            .when(typ == BROKER_FENCED, F.lit(FENCED))
            .when(typ.isin(BROKER_STARTED, BROKER_UNFENCED, str(EventType.BROKER_REGISTERED)), F.lit(UP)))


def broker_lifecycles(events: DataFrame) -> DataFrame:
    """One row: LIFECYCLES, a map from broker id to its marks (ts_ms, line, state) in time order (empty when no event
    says anything about a broker). A broker shutting down that the controller then drops (ZooKeeper mode loses its
    session once it exits) stays shut down: that is no fencing of a running broker."""
    assert {"broker_id", "type", "ts_ms", "line"} <= set(events.columns), events.columns
    marks = events.where(F.col("broker_id").isNotNull()).select("broker_id", "ts_ms", "line", _mark().alias("state"))
    earlier = Window.partitionBy("broker_id").orderBy("ts_ms", "line").rowsBetween(Window.unboundedPreceding, -1)
    settled = F.last(F.when(F.col("state") != FENCED, F.col("state")), ignorenulls=True).over(earlier)
    marks = (marks.where(F.col("state").isNotNull())
             .withColumn("_exit", (F.col("state") == FENCED) & F.coalesce(settled == SHUTDOWN, F.lit(False)))
             .where(~F.col("_exit")).select("broker_id", F.struct("ts_ms", "line", "state").alias("mark")))
    per_broker = marks.groupBy("broker_id").agg(F.array_sort(F.collect_list("mark")).alias("marks"))
    return per_broker.agg(F.map_from_entries(F.collect_list(F.struct("broker_id", "marks"))).alias(LIFECYCLES))


def with_lifecycles(df: DataFrame, events: DataFrame) -> DataFrame:
    """`df` with the LIFECYCLES column of `events` (one small map, broadcast)."""
    assert LIFECYCLES not in df.columns, df.columns
    return df.crossJoin(F.broadcast(broker_lifecycles(events)))


def state_of(broker: Column, ts_ms: Column) -> Column:
    """SHUTDOWN, FENCED or UP: the broker's last mark at or before `ts_ms`; null when nothing was said before it.
    Needs the LIFECYCLES column (`with_lifecycles`)."""
    before = F.filter(F.col(LIFECYCLES)[broker], lambda m: m["ts_ms"] <= ts_ms)
    return F.try_element_at(before, F.lit(-1))["state"]
