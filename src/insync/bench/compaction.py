"""The `compaction` rows of `insync bench compare`: produce latency with the log cleaner busy on a 1 GB log, beside
the same with the cleaner idle (the aim: busy p99 within twice idle p99), on insync and on Kafka alike.

A one-partition compacted topic (segments of a sixteenth of the log, `min.compaction.lag.ms` a day, so nothing is
cleanable yet) is filled with `megabytes` of 1 KiB records, `RECORDS_PER_KEY` of each key, acks=all: a clean keeps
about one record in ten. The idle run then measures latency on its own topic (`insync.bench.latency`: confluent-kafka,
linger 0, `RATE`). `min.compaction.lag.ms` goes to 0 (IncrementalAlterConfigs; both systems apply a topic's
config at once), every replica's cleaner takes its copy, and the busy run starts when the first `.cleaned` file
appears in a replica's directory (the cleaner writing its copy, Kafka's protocol on both). A sampler notes every
`SAMPLE_S` whether a `.cleaned` file is present, so the row says what share of the busy run a clean was writing;
the servers' CPU of each run and the time until every copy was cleaned stand beside it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from insync.admin import ADMIN_TIMEOUT_S, admin_client, ensure_topic, kafka_error_text
from insync.bench import clients, latency
from insync.bench.targets import Target
from insync.config import ConfigError
from insync.waiting import WaitTimeout, wait_until

TOPIC = "bench-compact"
LATENCY_TOPIC = "bench-compact-latency"
RECORD_BYTES = 1024
RECORDS_PER_KEY = 10  # the filled log holds about this many records of each key
RATE = 2_000.0  # records/s of the latency runs
SEGMENTS = 16  # the filled log's closed segments, about: the active one is never cleaned
SEGMENT_BYTES_MIN = 1 << 20  # Kafka 4's floor for segment.bytes
HELD_LAG_MS = 86_400_000  # min.compaction.lag.ms while filling: nothing is cleanable
FILL_FLUSH_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0  # Kafka's cleaner looks for work every log.cleaner.backoff.ms (15 s) at most
CLEANED_TIMEOUT_S = 600.0
CLEANED_SHARE = 0.5  # a copy counts as cleaned once it is under this share of its filled size
SAMPLE_S = 0.1
# Each latency run's figures, flat beside the result's fields as `idle_<figure>` and `busy_<figure>` (the table's)
FIGURES = ("ack_p50_ms", "ack_p99_ms", "e2e_p99_ms", "errors")
FULL_QUEUE_WAIT_S = 0.01


@dataclass(frozen=True, slots=True)
class CompactionResult:
    megabytes: int
    fill_s: float
    replica_mb_before: tuple[float, ...]  # each replica's copy of the compacted log, filled
    replica_mb_after: tuple[float, ...]  # and once cleaned (or at the time-out)
    idle: latency.LatencyResult
    busy: latency.LatencyResult
    idle_cpu_percent: float | None  # the servers' CPU over each run, in percent of one core
    busy_cpu_percent: float | None
    busy_cleaning_percent: float  # of the busy run's samples, those with a `.cleaned` file in some copy
    start_wait_s: float  # from the config change to the first `.cleaned` file
    cleaned_s: float | None  # from the config change until every copy was cleaned; None: not within the time-out
    ack_p99_ratio: float | None  # busy / idle
    e2e_p99_ratio: float | None


def run(target: Target, megabytes: int, seconds: float) -> dict[str, Any]:
    """The compaction rows on `target`, a local cluster (its replicas' directories are watched)."""
    assert megabytes > 0 and seconds > 0
    if target.directory is None:
        raise ConfigError("the compaction rows need a local cluster: its replicas' directories are watched")
    segment_bytes = max(SEGMENT_BYTES_MIN, megabytes * 1_000_000 // SEGMENTS)
    target.ensure_topic(LATENCY_TOPIC, 1)
    _create(target, segment_bytes)
    started = time.monotonic()
    _fill(target.bootstrap, megabytes * 1_000_000 // RECORD_BYTES)
    fill_s = time.monotonic() - started
    copies = _copies(Path(target.directory))
    before = tuple(_megabytes(copy) for copy in copies)
    idle, idle_cpu = _measured(target, seconds)
    with _Sampler(copies) as sampler:
        changed = time.monotonic()
        _alter_lag(target.bootstrap, 0)
        first = sampler.first_cleaning(START_TIMEOUT_S)
        if first is None:
            raise RuntimeError(f"no replica of {TOPIC} began a clean within {START_TIMEOUT_S:.0f} s of the change")
        mark = sampler.mark()
        busy, busy_cpu = _measured(target, seconds)
        cleaning = sampler.cleaning_share(mark)
    cleaned_at = _until_cleaned(copies, before)
    result = CompactionResult(
        megabytes, round(fill_s, 1), before, tuple(_megabytes(copy) for copy in copies), idle, busy, idle_cpu,
        busy_cpu, round(100 * cleaning, 1), round(first - changed, 1),
        None if cleaned_at is None else round(cleaned_at - changed, 1), _ratio(busy.ack_p99_ms, idle.ack_p99_ms),
        _ratio(busy.e2e_p99_ms, idle.e2e_p99_ms))
    flat = {f"{name}_{figure}": getattr(measured, figure) for name, measured in (("idle", idle), ("busy", busy))
            for figure in FIGURES}
    return {"compaction": {**asdict(result), **flat}}


def _create(target: Target, segment_bytes: int) -> None:
    configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
               "min.compaction.lag.ms": str(HELD_LAG_MS)}
    if target.replication_factor > 1:
        configs["min.insync.replicas"] = "2"
    ensure_topic(target.bootstrap, TOPIC, 1, target.replication_factor, configs)


def _fill(bootstrap: str, records: int) -> None:
    """`records` records of RECORD_BYTES, RECORDS_PER_KEY of each key, acks=all; raises unless every one was
    acknowledged."""
    producer = clients._producer(bootstrap, "all", {"queue.buffering.max.kbytes": 64 * 1024})
    failed = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    value = os.urandom(RECORD_BYTES - 8)
    keys = max(1, records // RECORDS_PER_KEY)
    for index in range(records):
        key = b"%07d" % (index % keys)
        while True:  # bounded by the flush time-out below: each pass waits for deliveries to make room
            try:
                producer.produce(TOPIC, value, key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(FULL_QUEUE_WAIT_S)
        if index % 1_000 == 0:
            producer.poll(0)
    left = producer.flush(FILL_FLUSH_TIMEOUT_S)
    if left or failed[0]:
        raise RuntimeError(f"filling {TOPIC}: {failed[0]} records failed, {left} not acknowledged")


def _alter_lag(bootstrap: str, lag_ms: int) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource  # type: ignore[attr-defined]

    entry = ConfigEntry("min.compaction.lag.ms", str(lag_ms), incremental_operation=AlterConfigOpType.SET)
    admin = admin_client(bootstrap)
    for future in admin.incremental_alter_configs([ConfigResource("topic", TOPIC, incremental_configs=[entry])],
                                                  request_timeout=ADMIN_TIMEOUT_S).values():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except Exception as exc:
            raise RuntimeError(f"altering {TOPIC}: {kafka_error_text(exc)}") from None


def _measured(target: Target, seconds: float) -> tuple[latency.LatencyResult, float | None]:
    cpu_before, started = target.cpu_s(), time.monotonic()
    result = latency.run(target, latency.plan_for(target, LATENCY_TOPIC, rate=RATE, seconds=seconds))
    cpu_after, elapsed = target.cpu_s(), time.monotonic() - started
    cpu = None if cpu_before is None or cpu_after is None else round(100 * (cpu_after - cpu_before) / elapsed, 1)
    return result, cpu


def _copies(directory: Path) -> list[Path]:
    """Every replica's directory of the compacted partition (`node-<id>/data/<topic>-0`, insync's and Kafka's)."""
    copies = sorted(directory.glob(f"node-*/data/{TOPIC}-0"))
    if not copies:
        raise RuntimeError(f"no replica directory of {TOPIC}-0 under {directory}")
    return copies


def _files(copy: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(copy) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _megabytes(copy: Path) -> float:
    total = 0
    for entry in _files(copy):
        try:
            total += entry.stat().st_size if entry.name.endswith(".log") else 0
        except FileNotFoundError:
            continue  # swapped away between the listing and the stat
    return round(total / 1e6, 1)


def _until_cleaned(copies: list[Path], before: tuple[float, ...]) -> float | None:
    """When every copy was under CLEANED_SHARE of its filled size, or None at CLEANED_TIMEOUT_S."""
    try:
        return wait_until(lambda: all(_megabytes(copy) < CLEANED_SHARE * size
                                      for copy, size in zip(copies, before, strict=True)) and time.monotonic(),
                          CLEANED_TIMEOUT_S, f"every copy of {TOPIC} cleaned", interval_s=SAMPLE_S * 5)
    except WaitTimeout:
        return None


def _ratio(busy: float | None, idle: float | None) -> float | None:
    return None if busy is None or not idle else round(busy / idle, 2)


class _Sampler:
    """A thread noting every SAMPLE_S whether some copy holds a `.cleaned` file (a clean is writing)."""

    def __init__(self, copies: list[Path]) -> None:
        self._copies = copies
        self._samples: list[tuple[float, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="compaction-sampler", daemon=True)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(SAMPLE_S * 20)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            cleaning = any(entry.name.endswith(".cleaned") for copy in self._copies for entry in _files(copy))
            self._samples.append((time.monotonic(), cleaning))

    def first_cleaning(self, timeout_s: float) -> float | None:
        """When a `.cleaned` file was first seen, or None at `timeout_s`."""
        try:
            return wait_until(lambda: next((at for at, cleaning in list(self._samples) if cleaning), None),
                              timeout_s, f"a clean of {TOPIC} writing", interval_s=SAMPLE_S)
        except WaitTimeout:
            return None

    def mark(self) -> int:
        return len(self._samples)

    def cleaning_share(self, mark: int) -> float:
        window = self._samples[mark:]
        return sum(cleaning for _, cleaning in window) / len(window) if window else 0.0
