"""`insync monitor`: a Spark Structured Streaming query over `__insync_events`, alerts to `__insync_alerts`.

The query reads the topic with `format("insync")` on the driver (`source.driver_reader`), with each record's
`ts_ms` as event time and a watermark of no delay (every node sends a heartbeat record every half second, so
`now` follows the cluster's clock and stops when the cluster does), and folds each partition's events into its
state with `applyInPandasWithState` (`rules.step`; a processing-time timeout brings a partition with an open
episode back every second). Each micro-batch (1 s trigger) yields alerts and status lines; `foreachBatch` writes
the alerts to `__insync_alerts` (and a local JSONL file if asked) and hands both to the caller's view. The
checkpoint holds the offsets and every partition's state, so a restarted monitor goes on where it was, and
`alert_log` writes alerts exactly once across restarts. An alert record has key `topic-partition` and value JSON
`{"v": 1, "kind", "topic", "partition", "since_ms", "due_ms", "emitted_ms", "cause", "evidence", "monitor",
"batch"}`; `emitted_ms - due_ms` is the delay from the condition to its alert.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from insync.spark.monitor import alert_log, rules
from insync.spark.monitor.rules import Thresholds
from insync.types import ALERTS_TOPIC, EVENTS_TOPIC
from insync.waiting import WaitTimeout, wait_until

log = logging.getLogger(__name__)

OUTPUT_DDL = ("kind string, topic string, partition int, since_ms long, due_ms long, cause string, evidence string, "
              "status string")
STATE_DDL = "state string"
STATUS = "status"  # the output rows that carry a partition's status line, not an alert
SOCKET_TIMEOUT_MS = 3_000  # a paused broker holds its partition's fetch this long per request, not the default 30 s
RESTART_BACKOFF_S = 1.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    bootstrap: str
    checkpoint: str
    thresholds: Thresholds = field(default_factory=Thresholds)
    trigger_ms: int = 1_000
    from_beginning: bool = False
    alerts_file: str | None = None
    kafka_logs: tuple[str, ...] = ()  # a Kafka cluster's log directories: read them (`kafka_source`), not the topic

    def __post_init__(self) -> None:
        assert self.bootstrap and self.checkpoint and self.trigger_ms > 0, self


def partition_states(events: DataFrame, thresholds: Thresholds) -> DataFrame:
    """Per-partition state over a stream of `__insync_events` records (`value` the event's JSON line)."""
    parsed = (events.select(F.col("value").cast("string").alias("json"))
              .withColumn("e", F.from_json("json", "ts_ms long, topic string, partition int"))
              .select("json", "e.topic", "e.partition", F.timestamp_millis("e.ts_ms").alias("event_time"))
              .withWatermark("event_time", "0 seconds"))
    # Heartbeats (no topic) go through to the grouping and are dropped there: a filter here would be pushed
    # below the watermark by Spark's optimizer (it does not refer to the event time), and the watermark would
    # then move only with the events about partitions, never while all is quiet or one broker is paused.
    return (parsed.groupBy("topic", "partition")
            .applyInPandasWithState(_updater(thresholds), OUTPUT_DDL, STATE_DDL, "append",
                                    GroupStateTimeout.ProcessingTimeTimeout))


def _updater(thresholds: Thresholds) -> Callable[[Any, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    def update(key: Any, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        if key[0] is None or key[1] is None or pd.isna(key[1]):  # the heartbeats' group: event time only
            for _ in frames:
                pass
            return
        topic, partition = str(key[0]), int(key[1])
        current = json.loads(state.get[0]) if state.exists else rules.new_state()
        events = sorted((json.loads(line) for frame in frames for line in frame["json"]), key=lambda e: e["ts_ms"])
        outcome = rules.step(current, topic, partition, events, int(state.getCurrentWatermarkMs()), thresholds)
        state.update((json.dumps(outcome.state),))
        if outcome.recheck:
            state.setTimeoutDuration(rules.RECHECK_MS)
        rows = [{"kind": a.kind, "topic": topic, "partition": partition, "since_ms": a.since_ms,
                 "due_ms": a.due_ms, "cause": a.cause, "evidence": json.dumps(a.evidence), "status": outcome.status}
                for a in outcome.alerts]
        rows.append({"kind": STATUS, "topic": topic, "partition": partition, "since_ms": 0, "due_ms": 0,
                     "cause": "", "evidence": "{}", "status": outcome.status})
        yield pd.DataFrame(rows, columns=["kind", "topic", "partition", "since_ms", "due_ms", "cause", "evidence",
                                          "status"])

    return update


def alert_record(row: Any, emitted_ms: int, monitor: str, batch_id: int) -> dict[str, Any]:
    return {"v": 1, "kind": row["kind"], "topic": row["topic"], "partition": int(row["partition"]),
            "since_ms": int(row["since_ms"]), "due_ms": int(row["due_ms"]), "emitted_ms": emitted_ms,
            "cause": row["cause"], "evidence": json.loads(row["evidence"]), "monitor": monitor, "batch": batch_id}


class AlertSink:
    """foreachBatch: each alert once into `__insync_alerts` and the local file (`alert_log`), then the alerts
    this micro-batch added and every status to the view."""

    def __init__(self, spark: SparkSession, settings: MonitorSettings,
                 on_batch: Callable[[list[dict[str, Any]], dict[str, str]], None]) -> None:
        self.on_batch = on_batch
        self.monitor = alert_log.monitor_id(Path(settings.checkpoint))
        topic = alert_log.AlertTopic(spark, settings.bootstrap)
        topic.warm()
        self.logs: list[alert_log.AlertTopic | alert_log.AlertFile] = [topic]
        if settings.alerts_file:
            self.logs.append(alert_log.AlertFile(Path(settings.alerts_file)))
        self.written: list[alert_log.Written] | None = None  # recovered at the first micro-batch with alerts

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = [r.asDict() for r in batch.collect()]
        statuses = {f"{r['topic']}-{r['partition']}": r["status"] for r in rows if r["kind"] == STATUS}
        emitted_ms = int(time.time() * 1000)
        alerts = [alert_record(r, emitted_ms, self.monitor, batch_id) for r in rows if r["kind"] != STATUS]
        self.on_batch(self._write(batch_id, alerts) if alerts else [], statuses)

    def _write(self, batch_id: int, alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each log gets the alerts it lacks; returns those that were new to at least one of them."""
        if self.written is None:
            self.written = [sink.recover(self.monitor) for sink in self.logs]
        added: dict[alert_log.AlertId, dict[str, Any]] = {}
        for i, sink in enumerate(self.logs):
            missing = self.written[i].missing(batch_id, alerts)
            if missing:
                sink.append(missing)
                added.update((alert_log.alert_id(a), a) for a in missing)
            self.written[i] = self.written[i].after(batch_id, alerts)
        return list(added.values())


def start(spark: SparkSession, settings: MonitorSettings,
          on_batch: Callable[[list[dict[str, Any]], dict[str, str]], None]) -> StreamingQuery:
    """Start the monitor's query (the caller stops it); `on_batch(alerts, statuses)` after each micro-batch."""
    from insync.spark.monitor.kafka_source import KafkaLogsDataSource
    from insync.spark.source.datasource import InsyncDataSource

    spark.dataSource.register(InsyncDataSource)
    Path(settings.checkpoint).mkdir(parents=True, exist_ok=True)
    starting = "earliest" if settings.from_beginning else "latest"
    if settings.kafka_logs:
        spark.dataSource.register(KafkaLogsDataSource)
        events = (spark.readStream.format(KafkaLogsDataSource.name()).option("dirs", json.dumps(settings.kafka_logs))
                  .option("bootstrap", settings.bootstrap).option("startingOffsets", starting).load())
    else:
        events = (spark.readStream.format("insync").option("kafka.bootstrap.servers", settings.bootstrap)
                  .option("subscribe", EVENTS_TOPIC).option("failOnDataLoss", "false").option("reader", "driver")
                  .option("kafka.socket.timeout.ms", str(SOCKET_TIMEOUT_MS))
                  .option("startingOffsets", starting).load())
    return (partition_states(events, settings.thresholds).writeStream
            .foreachBatch(AlertSink(spark, settings, on_batch))
            .option("checkpointLocation", str(Path(settings.checkpoint) / "query"))
            .trigger(processingTime=f"{settings.trigger_ms} milliseconds")
            .start())


class MonitorError(Exception):
    """The monitor cannot start or its query failed; the message says why."""


def wait_for_events_topic(bootstrap: str, deadline_s: float) -> None:
    """The events topic exists with a leader for each partition (brokers create it at start), and the alerts
    topic exists (created here with one partition and the events topic's replication factor: writing the first
    alert must not wait for a topic to be created, perhaps with a paused broker among its replicas);
    MonitorError naming the cause otherwise."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})

    def ready() -> bool:
        try:
            topics = admin.list_topics(timeout=2).topics
            topic = topics.get(EVENTS_TOPIC)
            if topic is None or topic.error is not None or not topic.partitions or any(
                    p.leader < 0 for p in topic.partitions.values()):
                return False
            if ALERTS_TOPIC not in topics:
                factor = len(next(iter(topic.partitions.values())).replicas)
                admin.create_topics([NewTopic(ALERTS_TOPIC, num_partitions=1, replication_factor=factor)])[
                    ALERTS_TOPIC].result(timeout=deadline_s)
            return True
        except Exception as exc:  # noqa: BLE001 - the cluster is not up yet, or another monitor created it: try again
            log.info("waiting for %s: %s", EVENTS_TOPIC, exc)
            return False

    try:
        wait_until(ready, deadline_s, f"{EVENTS_TOPIC} with a leader for each partition", interval_s=0.5)
    except WaitTimeout:
        raise MonitorError(f"no {EVENTS_TOPIC} topic at {bootstrap} within {deadline_s:.0f} s: is the cluster up, "
                           "with insync.events.topic.enable=true (the default)?") from None


def wait_for_kafka(bootstrap: str, deadline_s: float) -> None:
    """A Kafka cluster answers, and the alerts topic exists (one partition, replicated on up to three brokers);
    MonitorError otherwise."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})

    def ready() -> bool:
        try:
            metadata = admin.list_topics(timeout=2)
            if ALERTS_TOPIC not in metadata.topics:
                factor = min(3, len(metadata.brokers))
                admin.create_topics([NewTopic(ALERTS_TOPIC, num_partitions=1, replication_factor=factor)])[
                    ALERTS_TOPIC].result(timeout=deadline_s)
            return True
        except Exception as exc:  # noqa: BLE001 - not up yet, or another monitor created it: try again
            log.info("waiting for the Kafka cluster: %s", exc)
            return False

    try:
        wait_until(ready, deadline_s, f"the Kafka cluster at {bootstrap}", interval_s=0.5)
    except WaitTimeout:
        raise MonitorError(f"no Kafka cluster answered at {bootstrap} within {deadline_s:.0f} s") from None


class Monitor:
    """The monitor's query, restarted from its checkpoint when it fails, in a thread of its own.

    The source reads on the driver (`reader=driver`): a paused or killed broker that leads a partition of
    `__insync_events` holds up only that partition's fetches (each for at most SOCKET_TIMEOUT_MS, until its
    leadership moves), never a micro-batch. A query that fails anyway (a replayed micro-batch reads its ranges
    whole) comes back from the checkpoint RESTART_BACKOFF_S later, losing nothing. A cluster that is gone makes it
    fail again at each try, until `stop`."""

    def __init__(self, spark: SparkSession, settings: MonitorSettings,
                 on_batch: Callable[[list[dict[str, Any]], dict[str, str]], None],
                 on_error: Callable[[str], None] = lambda message: None) -> None:
        self._spark, self._settings, self._on_batch, self._on_error = spark, settings, on_batch, on_error
        self._stop = threading.Event()
        self._query: StreamingQuery | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self._thread = threading.Thread(target=self._run, name="insync-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():  # bounded by `stop`; each round waits out its query
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._query = start(self._spark, self._settings, self._on_batch)
                self._query.awaitTermination()
                error: BaseException | None = self._query.exception()
            except Exception as exc:  # noqa: BLE001 - a failed start (the cluster is gone): try again
                error = exc
            if error is None or self._stop.is_set():
                return
            self.restarts += 1
            self._on_error(f"the monitor's query failed ({str(error).splitlines()[0][:300]}); restarting from "
                           "its checkpoint")
            self._stop.wait(RESTART_BACKOFF_S)

    @property
    def query(self) -> StreamingQuery | None:
        return self._query

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            if self._query is not None:
                self._query.stop()
        self._thread.join(STOP_TIMEOUT_S)
