"""`format("insync-kafka-logs")`: a Kafka cluster's brokers' logs and metadata as a stream of `rules` events, the
input of `insync monitor --kafka-logs` (a `value` JSON line per event, as `__insync_events` has).

A pyspark `SimpleDataSourceStreamReader`, on the driver: each trigger's `read` tails every `server.log`,
`state-change.log` and `controller.log` under the given directories from the byte offsets of the checkpoint (whole
lines only, at most READ_BYTES_MAX a file), and takes the metadata snapshots a thread polls every POLL_S. Spark's
file source reads only whole new files, so it cannot tail a log that grows; this reader can, and its offsets are the
files' byte positions (a restart goes on from the checkpoint; a file log4j rolled is read to its end first, other
replaced or truncated files start again at 0). Lines and snapshots are released only when older than the read's
start less HOLD_MS: every file is read after that time, so what comes out is complete up to it and goes to the
`kafka_events.Translator` in time order. A heartbeat at that time (and a tick to each partition in trouble) moves
event time while the poll answers and some broker is not shutting down: a cluster shut down, or gone, stops the
monitor's clock. The translator's knowledge is not in the checkpoint: after a restart the next poll gives it back.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from insync.spark.monitor.kafka_events import PartitionMeta, Translator, line_time_ms, parse_line

log = logging.getLogger(__name__)

NAME = "insync-kafka-logs"
LOG_NAMES = ("server.log", "state-change.log", "controller.log")
READ_BYTES_MAX = 4 << 20  # per file and trigger: a backlog is read over several micro-batches
HOLD_MS = 200  # a line is released once every file has been read this long after its time
POLL_S = 1.0
POLL_TIMEOUT_S = 2.0
DESCRIBE_EVERY_S = 10.0  # min ISR and ELR (DescribeConfigs, DescribeTopicPartitions): slower to ask
ALIVE_MS = 20_000  # no poll answered for this long: the cluster is gone, its clock stops
SNAPSHOTS_MAX = 16
ADMIN_SOCKET_TIMEOUT_MS = 3_000  # a paused broker holds a poll this long, not librdkafka's default minute


def log_files(dirs: list[str]) -> list[str]:
    """The Kafka logs in each directory and its subdirectories one level down (a cluster's `node-N/`)."""
    found: set[str] = set()
    for d in dirs:
        for name in LOG_NAMES:
            found.update(str(p) for p in (*Path(d).glob(name), *Path(d).glob(f"*/{name}")))
    return sorted(found)


def read_lines(path: str, position: list[int], until_ms: int | None) -> tuple[list[str], list[int]]:
    """Whole lines of `path` from `position` ([inode, byte]); with `until_ms`, up to the first log4j line at or
    after it. Returns them and the new position. When `path` is another file now, the rest of the one read so far
    comes first if log4j rolled it to a sibling (`server.log.2026-11-30-21`, the tarball's hourly roll); a file
    replaced or truncated otherwise starts again at 0."""
    if position:
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        rolled = _rolled(path, position[0]) if current != position[0] else None
        if rolled is not None and position[1] < rolled.stat().st_size:
            return _read_from(str(rolled), position, until_ms)
    return _read_from(path, position, until_ms)


def _rolled(path: str, inode: int) -> Path | None:
    """The sibling `path.*` that is the file of `inode`, if any."""
    for sibling in Path(path).parent.glob(f"{Path(path).name}.*"):
        try:
            if sibling.stat().st_ino == inode:
                return sibling
        except FileNotFoundError:
            continue  # removed since the listing
    return None


def _read_from(path: str, position: list[int], until_ms: int | None) -> tuple[list[str], list[int]]:
    try:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            inode, at = position if position and position[0] == stat.st_ino and position[1] <= stat.st_size else (
                stat.st_ino, 0)
            f.seek(at)
            chunk = f.read(READ_BYTES_MAX)
    except FileNotFoundError:
        return [], position
    lines, taken = [], 0
    for raw in chunk.split(b"\n")[:-1]:  # the last piece has no newline yet
        text = raw.decode("utf-8", errors="replace")
        if until_ms is not None and (ts := line_time_ms(text)) is not None and ts >= until_ms:
            break
        lines.append(text)
        taken += len(raw) + 1
    return lines, [inode, at + taken]


class Poller:
    """The cluster's metadata every POLL_S in a thread (min ISR and ELR every DESCRIBE_EVERY_S); snapshots kept
    until taken, at most SNAPSHOTS_MAX."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.snapshots: deque[tuple[int, list[PartitionMeta], list[int]]] = deque(maxlen=SNAPSHOTS_MAX)
        self.answered_ms = 0
        self.extra: dict[tuple[str, int], tuple[int, tuple[int, ...] | None]] = {}  # min ISR, ELR
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self._run, name="insync-kafka-poll", daemon=True).start()

    def _run(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": ADMIN_SOCKET_TIMEOUT_MS,
                             "log_level": 2})
        described, describing = 0.0, threading.Thread()
        while not self.stop.wait(POLL_S):  # bounded by `stop` (the reader's end, or the process's)
            if time.monotonic() - described > DESCRIBE_EVERY_S and not describing.is_alive():  # one at a time
                described = time.monotonic()
                describing = threading.Thread(target=self._describe, name="insync-kafka-describe", daemon=True)
                describing.start()
            started = time.time_ns() // 1_000_000
            try:
                md = admin.list_topics(timeout=POLL_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - no broker answered: no snapshot, the clock may stop
                log.info("metadata poll: %s", exc)
                continue
            rows = [PartitionMeta(name, pid, p.leader, tuple(p.replicas), tuple(p.isrs),
                                  *self.extra.get((name, pid), (None, None)))
                    for name, t in md.topics.items() if t.error is None for pid, p in t.partitions.items()]
            with self.lock:
                self.snapshots.append((started, rows, sorted(md.brokers)))
                self.answered_ms = time.time_ns() // 1_000_000

    def _describe(self) -> None:
        from insync.admin import describe_rows

        try:
            rows = describe_rows(self.bootstrap)
        except Exception as exc:  # noqa: BLE001 - tried again at the next round
            log.info("describing topics: %s", exc)
            return
        self.extra = {(r.topic, r.partition): (r.min_isr, r.elr) for r in rows}

    def take(self, until_ms: int) -> tuple[list[tuple[int, list[PartitionMeta], list[int]]], int]:
        with self.lock:
            taken = [s for s in self.snapshots if s[0] < until_ms]
            for _ in taken:
                self.snapshots.popleft()
            return taken, self.answered_ms


class KafkaLogsReader(SimpleDataSourceStreamReader):
    """See the module doc. Offsets: `{"files": {path: [inode, byte]}, "at": ms}` (`at` the last release)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.dirs = json.loads(options["dirs"])
        self.bootstrap = options["bootstrap"]
        self.from_beginning = options.get("startingOffsets", "latest") == "earliest"
        self.translator = Translator()
        self.poller: Poller | None = None

    def initialOffset(self) -> dict[str, Any]:
        files = {} if self.from_beginning else {p: _end(p) for p in log_files(self.dirs)}
        return {"files": files, "at": 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[str]], dict[str, Any]]:
        if self.poller is None:
            self.poller = Poller(self.bootstrap)
        until = time.time_ns() // 1_000_000 - HOLD_MS
        facts: list[tuple[int, int, Any]] = []
        files = dict(start["files"])
        for path in log_files(self.dirs):
            lines, files[path] = read_lines(path, files.get(path, []), until)
            facts.extend((f["ts_ms"], 0, f) for f in _facts(lines))
        snapshots, answered_ms = self.poller.take(until)
        facts.extend((ts, 1, (rows, brokers)) for ts, rows, brokers in snapshots)
        events: list[dict[str, Any]] = []
        for ts, is_snapshot, item in sorted(facts, key=lambda x: (x[0], x[1])):
            events += self.translator.snapshot(ts, *item) if is_snapshot else self.translator.fact(item)
        if until - answered_ms < ALIVE_MS and not self.translator.all_stopping():
            # The heartbeat: all is known up to `until`. It moves the watermark at the end of this micro-batch;
            # a tick to each partition in trouble moves that partition's own clock in this one (`rules.step` takes
            # the latest of its events' times), an alert's due time a micro-batch sooner.
            events.append({"ts_ms": until})
            events += [{"ts_ms": until, "topic": t, "partition": p, "type": "tick"}
                       for t, p in self.translator.troubled()]
        return iter([(json.dumps(e),) for e in events]), {"files": files, "at": until}

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[str]]:
        """A micro-batch again after a restart: its lines (the polls of that time are gone)."""
        events: list[dict[str, Any]] = []
        for path, stop in end["files"].items():
            position = start["files"].get(path, [])
            lines, _ = read_lines(path, position, None)
            budget = stop[1] - (position[1] if position and position[0] == stop[0] else 0)
            kept = []
            for line in lines:  # bounded by READ_BYTES_MAX
                budget -= len(line.encode("utf-8")) + 1
                if budget < 0:
                    break
                kept.append(line)
            for fact in sorted(_facts(kept), key=lambda f: f["ts_ms"]):
                events += self.translator.fact(fact)
        return iter([(json.dumps(e),) for e in events])

    def commit(self, end: dict[str, Any]) -> None:
        """The checkpoint holds the positions."""

    def stop(self) -> None:
        if self.poller is not None:
            self.poller.stop.set()


def _end(path: str) -> list[int]:
    stat = os.stat(path)
    return [stat.st_ino, stat.st_size]


def _facts(lines: list[str]) -> Iterator[dict[str, Any]]:
    previous: int | None = None
    for line in lines:
        fact = parse_line(line, previous)
        previous = line_time_ms(line) or previous
        if fact is not None:
            yield fact


class KafkaLogsDataSource(DataSource):
    """Options: `dirs` (a JSON list of directories), `bootstrap`, `startingOffsets` (latest or earliest)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from pyspark.errors import PySparkNotImplementedError

        raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "reader"})

    def simpleStreamReader(self, schema: StructType) -> KafkaLogsReader:
        return KafkaLogsReader(dict(self.options))
