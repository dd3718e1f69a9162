"""Exactly-once alerts across restarts: the two logs an alert is written to, and what each holds already.

Spark replays a micro-batch that was not committed with the same batch id, offsets and state, so it yields the
same alerts. Every alert record carries the monitor's id (`monitor_id`, one per checkpoint directory) and its
batch id. On the sink's first micro-batch after a (re)start, each log recovers from its own records which alerts
of this monitor's last batch it holds (`Written`), and a replayed batch writes to it only what it lacks. The
logs' own records are the marker, so there is no window between writing an alert and remembering that it was
written. An alert is identified by `(kind, topic, partition, since_ms)`: the rules alert each episode once.
The logs: `__insync_alerts` (`AlertTopic`, acks=all; recovered from the last TOPIC_TAIL_RECORDS records of each
partition, so another monitor writing more than that many alerts between this one's stop and restart would hide
its last batch) and the local JSONL file (`AlertFile`; recovered from its last FILE_TAIL_BYTES; a line cut short
by a crash is removed, and the replay writes that alert again whole).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from insync.types import ALERTS_TOPIC

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Alert = dict[str, Any]
AlertId = tuple[str, str, int, int]

MONITOR_ID_FILE = "monitor-id"
TOPIC_TAIL_RECORDS = 10_000
FILE_TAIL_BYTES = 4 * 1024 * 1024
RECOVER_TIMEOUT_S = 20.0  # reading the topic's tail; past it the sink fails and the query restarts


class RecoveryError(Exception):
    """What a log holds of this monitor could not be read; the message says which log and why."""


def alert_id(alert: Alert) -> AlertId:
    return (str(alert["kind"]), str(alert["topic"]), int(alert["partition"]), int(alert["since_ms"]))


@dataclass(frozen=True, slots=True)
class Written:
    """What one log holds of this monitor: its last batch id (-1: nothing) and the alerts of that batch."""

    batch: int = -1
    alerts: frozenset[AlertId] = frozenset()

    def missing(self, batch_id: int, alerts: Sequence[Alert]) -> list[Alert]:
        """The alerts of micro-batch `batch_id` this log does not hold yet."""
        assert batch_id >= 0, batch_id
        if batch_id < self.batch:
            return []  # an older batch than the log's last: every alert of it was written before that one
        if batch_id == self.batch:
            return [a for a in alerts if alert_id(a) not in self.alerts]
        return list(alerts)

    def after(self, batch_id: int, alerts: Sequence[Alert]) -> Written:
        """This log once `alerts` of micro-batch `batch_id` are in it."""
        if batch_id < self.batch:
            return self
        ids = frozenset(alert_id(a) for a in alerts)
        return Written(batch_id, self.alerts | ids if batch_id == self.batch else ids)


def written_of(records: Iterable[Alert], monitor: str) -> Written:
    """What a log holds of `monitor`, from its records (other monitors' and older records without ids ignored)."""
    mine = [r for r in records if r.get("monitor") == monitor and isinstance(r.get("batch"), int)]
    if not mine:
        return Written()
    last = max(int(r["batch"]) for r in mine)
    return Written(last, frozenset(alert_id(r) for r in mine if r["batch"] == last))


def monitor_id(checkpoint: Path) -> str:
    """The id of the monitor this checkpoint belongs to, made at its first start (renamed into place, so a crash
    leaves either no id or a whole one). A new checkpoint is a new monitor."""
    path = checkpoint / MONITOR_ID_FILE
    if path.exists():
        found = path.read_text(encoding="utf-8").strip()
        assert found, f"{path} is empty"
        return found
    made = uuid.uuid4().hex
    partial = path.with_name(MONITOR_ID_FILE + ".tmp")
    partial.write_text(made, encoding="utf-8")
    os.replace(partial, path)
    return made


class AlertFile:
    """The local JSONL file, one alert per line, appended and fsynced per micro-batch."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def recover(self, monitor: str) -> Written:
        if not self.path.exists():
            return Written()
        with open(self.path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - FILE_TAIL_BYTES)
            handle.seek(start)
            tail = handle.read()
            whole = tail.rfind(b"\n") + 1  # where the last complete line ends
            if whole < len(tail):
                handle.truncate(start + whole)  # a line cut short by a crash: its batch is written again whole
        lines = tail[:whole].splitlines()
        if start > 0:
            lines = lines[1:]  # the first line of the tail may be a piece of one
        return written_of(_parsed(lines, str(self.path)), monitor)

    def append(self, alerts: Sequence[Alert]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(a) + "\n" for a in alerts)
            handle.flush()
            os.fsync(handle.fileno())


class AlertTopic:
    """`__insync_alerts`, key `topic-partition`, written with the `insync` sink."""

    def __init__(self, spark: SparkSession, bootstrap: str) -> None:
        self.spark, self.bootstrap = spark, bootstrap

    def recover(self, monitor: str) -> Written:
        tail = read_tail(self.bootstrap, ALERTS_TOPIC, TOPIC_TAIL_RECORDS, RECOVER_TIMEOUT_S)
        return written_of(_parsed((value for value, _ in tail), ALERTS_TOPIC), monitor)

    def warm(self) -> None:
        """Write nothing, once, before the first alert: a session's first write through the sink starts its Python
        planner and worker and imports the sink's modules (seconds, where the writes after it take a fraction of
        one), and that time should not be the first alert's."""
        self._write([])

    def append(self, alerts: Sequence[Alert]) -> None:
        self._write([(f"{a['topic']}-{a['partition']}", json.dumps(a)) for a in alerts])

    def _write(self, records: list[tuple[str, str]]) -> None:
        # One task, so the worker `warm` started writes every batch (a second one would start cold: 1 s more).
        (self.spark.createDataFrame(records, "key string, value string").coalesce(1).write.format("insync")
         .mode("append").option("kafka.bootstrap.servers", self.bootstrap).option("topic", ALERTS_TOPIC).save())


def _parsed(lines: Iterable[bytes], where: str) -> list[Alert]:
    """The JSON objects among `lines`; others (not this monitor's writing) are skipped with a warning."""
    records, skipped = [], 0
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(record, dict):
            records.append(record)
    if skipped:
        log.warning("insync monitor: %d records of %s are not JSON; skipped while recovering its alerts", skipped,
                    where)
    return records


def read_tail(bootstrap: str, topic: str, records_max: int, timeout_s: float) -> list[tuple[bytes, int]]:
    """The value and timestamp (ms) of the last `records_max` records of each partition of `topic` (none if it does
    not exist)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "insync-monitor-recovery", "log_level": 2,
                         "enable.auto.commit": False, "allow.auto.create.topics": False})
    deadline = time.monotonic() + timeout_s
    try:
        found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return []
        if found.error is not None:
            raise RecoveryError(f"cannot read {topic}: {found.error}")
        ends = {}
        for partition in found.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            if high > low:
                ends[partition] = (max(low, high - records_max), high)
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ends.items()])
        values: list[tuple[bytes, int]] = []
        pending = set(ends)
        while pending:  # bounded by the deadline
            if time.monotonic() > deadline:
                raise RecoveryError(f"{topic}'s last records not read within {timeout_s:.0f} s (partitions "
                                    f"{sorted(pending)} still behind)")
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise RecoveryError(f"reading {topic}: {message.error()}")
            values.append((message.value() or b"", message.timestamp()[1]))
            if (message.offset() or 0) + 1 >= ends[message.partition() or 0][1]:
                pending.discard(message.partition() or 0)
        return values
    finally:
        consumer.close()
