"""The protocol fuzzer against a running cluster, under a steady workload (`insync chaos fuzz`).

`run` first writes `BEFORE_TOPIC` and reads it back, then starts an acks=all idempotent producer on
`WORKLOAD_TOPIC` at a steady rate and a sampler of each broker's resident memory, sends the cases
(`fuzz_run.run_cases`), and checks at the end: every broker process alive and answering ApiVersions and
Metadata within `PROBE_TIMEOUT_S`, resident memory grown by at most the given bound, every acknowledged workload
record read back exactly once, `BEFORE_TOPIC` read back byte for byte as before, and no case that hung or got a
wrong answer. The summary is plain data for JSON, with `passed` and the failed cases' indexes (each replays alone
from the seed). The cases act only on the fuzzer's scratch topics and groups (`fuzz_cases`), which `run`
creates so that valid requests reach real partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from insync import admin_requests
from insync.admin import ensure_topic
from insync.chaos.cluster import pid_alive
from insync.chaos.fuzz_cases import SCRATCH_TOPICS, advertised_pairs
from insync.chaos.fuzz_run import Tally, Target, run_cases
from insync.chaos.history import client_conf
from insync.config import ConfigError
from insync.protocol.codec import API_VERSIONS_KEY, request_schema
from insync.protocol.kio import build
from insync.waiting import WaitTimeout, wait_until
from insync.wire.versions import ADVERTISED_MIN_VERSIONS, BROKER_API_VERSIONS, METADATA

WORKLOAD_TOPIC = "fuzz-workload"
BEFORE_TOPIC = "fuzz-before"
BEFORE_RECORDS = 300
WORKLOAD_PARTITIONS = 3
PROBE_TIMEOUT_S = 10.0
SCRATCH_DEADLINE_S = 5.0
RSS_SAMPLE_S = 2.0
FLUSH_TIMEOUT_S = 60.0
READ_DEADLINE_S = 120.0
POLL_S = 0.5
PROBE_API_VERSIONS = 3
PROBE_METADATA = 12
HANDLER_ERROR = "ERROR Error handling a request"  # server/listener.py's line for a handler's exception
TRACE_LINES_MAX = 200


@dataclass(frozen=True, slots=True)
class FuzzSpec:
    bootstrap: str
    requests: int
    seed: int
    concurrency: int = 32
    start: int = 0  # the first case index: a run can resume or replay a range
    pids: Mapping[int, int] = field(default_factory=dict)  # broker id -> process id, for memory and liveness
    rss_growth_max_bytes: int = 256 * 1024 * 1024
    workload_rate: float = 100.0  # records per second
    logs: tuple[Path, ...] = ()  # the brokers' own logs: a handler's unexpected error there fails the run

    def __post_init__(self) -> None:
        if self.requests < 0 or self.start < 0 or not 1 <= self.concurrency <= 1024 or self.workload_rate <= 0:
            raise ConfigError("fuzz needs requests >= 0, start >= 0, concurrency 1-1024 and a positive rate")


def run(spec: FuzzSpec) -> dict[str, Any]:
    """Run the fuzzer and every check (module docstring); the summary's `passed` is their conjunction."""
    addresses = _addresses(spec.bootstrap)
    for topic in SCRATCH_TOPICS:
        # Best effort: a run before may have left a scratch topic deleted, recreated or reassigned to no broker.
        with contextlib.suppress(ConfigError, WaitTimeout):
            ensure_topic(spec.bootstrap, topic, 2, min(3, len(addresses)), {}, SCRATCH_DEADLINE_S)
    ensure_topic(spec.bootstrap, WORKLOAD_TOPIC, WORKLOAD_PARTITIONS, min(3, len(addresses)),
                 {"min.insync.replicas": str(min(2, len(addresses)))})
    ensure_topic(spec.bootstrap, BEFORE_TOPIC, 1, min(3, len(addresses)), {})
    _write_before(spec.bootstrap)
    before = read_topic(spec.bootstrap, BEFORE_TOPIC)
    sampler = RssSampler(spec.pids)
    log_sizes = {path: path.stat().st_size if path.exists() else 0 for path in spec.logs}
    workload = Workload(spec.bootstrap, spec.workload_rate)
    target = Target(addresses, BROKER_API_VERSIONS, advertised_pairs(BROKER_API_VERSIONS, ADVERTISED_MIN_VERSIONS))
    tally = Tally()
    sampler.start()
    workload.start()
    started = time.monotonic()
    try:
        asyncio.run(run_cases(target, spec.seed, range(spec.start, spec.start + spec.requests), spec.concurrency,
                              tally))
    finally:
        elapsed_s = time.monotonic() - started
        acked = workload.stop()
        sampler.stop()
    return _summary(spec, tally, elapsed_s, acked, workload.prefix, before, sampler, handler_errors(log_sizes))


def handler_errors(since: Mapping[Path, int]) -> dict[str, int]:
    """The unexpected errors the brokers logged while handling requests after `since` (each log's size then), by
    their exception's last line: a broker may refuse garbage, never fail on it."""
    found: Counter[str] = Counter()
    for path, offset in since.items():
        with path.open("rb") as log_file:
            log_file.seek(offset)
            lines = log_file.read().decode(errors="replace").splitlines()
        for n, line in enumerate(lines):
            if HANDLER_ERROR in line:
                trace = [t for t in itertools.takewhile(lambda t: not t.startswith("["),
                                                        lines[n + 1:n + 1 + TRACE_LINES_MAX]) if t.strip()]
                found[trace[-1].strip() if trace else line] += 1
    return dict(found)


def _summary(spec: FuzzSpec, tally: Tally, elapsed_s: float, acked: set[bytes], prefix: str, before: list[Any],
             sampler: RssSampler, errors_logged: dict[str, int]) -> dict[str, Any]:
    addresses = _addresses(spec.bootstrap)
    probes = {f"{host}:{port}": probe(host, port) for host, port in addresses}
    alive = {str(broker): pid_alive(pid) for broker, pid in spec.pids.items()}
    read = Counter(record[3] for record in read_topic(spec.bootstrap, WORKLOAD_TOPIC)
                   if record[3] is not None and record[3].startswith(prefix.encode()))
    lost = len([value for value in acked if read[value] == 0])
    duplicated = len([value for value in acked if read[value] > 1])
    before_unchanged = read_topic(spec.bootstrap, BEFORE_TOPIC) == before
    rss = sampler.report()
    rss_ok = all(r["after_bytes"] - r["before_bytes"] <= spec.rss_growth_max_bytes for r in rss.values())
    passed = (tally.failures == 0 and all(p == "ok" for p in probes.values()) and all(alive.values())
              and rss_ok and lost == 0 and duplicated == 0 and before_unchanged and not errors_logged)
    return {
        "passed": passed, "seed": spec.seed, "first_index": spec.start, "requests": sum(tally.answers.values()),
        "seconds": round(elapsed_s, 1), "requests_per_s": round(sum(tally.answers.values()) / max(elapsed_s, 1e-9)),
        "connections": tally.connections, "answers": dict(tally.answers), "cases": dict(tally.by_kind),
        "apis": len(tally.apis), "problems": tally.problems, "slow": tally.slow, "handler_errors": errors_logged, "probes": probes, "alive": alive, "rss": rss,
        "rss_growth_max_bytes": spec.rss_growth_max_bytes,
        "workload": {"acked": len(acked), "read": sum(read.values()), "lost": lost, "duplicated": duplicated},
        "before_topic": {"records": len(before), "unchanged": before_unchanged},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _addresses(bootstrap: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"--bootstrap-server wants host:port[,host:port...], not {bootstrap!r}")
        out.append((host, int(port)))
    return tuple(out)


def probe(host: str, port: int) -> str:
    """"ok" when the broker answers ApiVersions and Metadata on a new connection within `PROBE_TIMEOUT_S`, else
    what went wrong."""
    versions = build(request_schema(API_VERSIONS_KEY, PROBE_API_VERSIONS), client_software_name="insync-fuzz",
                     client_software_version="1")
    metadata = build(request_schema(METADATA, PROBE_METADATA), topics=None, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)
    try:
        for api_key, body in ((API_VERSIONS_KEY, versions), (METADATA, metadata)):
            answer = admin_requests.request(f"{host}:{port}", body, PROBE_TIMEOUT_S)
            if getattr(answer, "error_code", 0) != 0:
                return f"api {api_key} answered error {int(answer.error_code)}"
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def _write_before(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer(client_conf({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}))
    for n in range(BEFORE_RECORDS):
        producer.produce(BEFORE_TOPIC, key=str(n).encode(), value=bytes(range(n % 256)) * (n % 7 + 1),
                         headers=[("n", str(n).encode())])
        producer.poll(0)
    if producer.flush(FLUSH_TIMEOUT_S) != 0:
        raise ConfigError(f"could not write {BEFORE_TOPIC} before fuzzing")


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None, bytes | None, Any, Any]]:
    """Every record of `topic` up to its high watermarks as (partition, offset, key, value, headers, timestamp)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": "insync-fuzz-reader",
                                     "enable.auto.commit": False, "isolation.level": "read_uncommitted"}))
    try:
        partitions = consumer.list_topics(topic, timeout=PROBE_TIMEOUT_S).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=PROBE_TIMEOUT_S)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[tuple[int, int, bytes | None, bytes | None, Any, Any]] = []
        positions = dict.fromkeys(partitions, 0)

        def read_to_the_ends() -> bool:
            for message in consumer.consume(1000, timeout=POLL_S):
                partition, offset = message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None:
                    out.append((partition, offset, message.key(), message.value(), message.headers(),
                                message.timestamp()))
                    positions[partition] = offset + 1
            return all(positions[p] >= ends[p] for p in partitions)

        # What was read by the deadline is returned either way: the caller's comparison names what is missing.
        with contextlib.suppress(WaitTimeout):
            wait_until(read_to_the_ends, READ_DEADLINE_S, f"{topic} read to its end", interval_s=0.001)
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        consumer.close()


class Workload:
    """One acks=all idempotent producer at a steady rate; `stop` returns the values acknowledged."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        self._bootstrap = bootstrap
        # Values unique to this run: runs before it on the same cluster left theirs in the topic.
        self.prefix = f"w-{secrets.token_hex(6)}-"
        self._interval_s = 1.0 / rate
        self._stopping = threading.Event()
        self._acked: set[bytes] = set()
        self._thread = threading.Thread(target=self._produce, name="fuzz-workload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> set[bytes]:
        self._stopping.set()
        self._thread.join(FLUSH_TIMEOUT_S * 2)
        return set(self._acked)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(client_conf({"bootstrap.servers": self._bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5}))

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                self._acked.add(message.value())

        sequence = 0
        next_s = time.monotonic()
        while not self._stopping.wait(max(0.0, next_s - time.monotonic())):
            producer.produce(WORKLOAD_TOPIC, value=f"{self.prefix}{sequence}".encode(), on_delivery=delivered)
            producer.poll(0)
            sequence += 1
            next_s += self._interval_s
        producer.flush(FLUSH_TIMEOUT_S)


class RssSampler:
    """Each broker's resident memory every `RSS_SAMPLE_S`: at the start, at the end and the highest seen."""

    def __init__(self, pids: Mapping[int, int]) -> None:
        self._pids = dict(pids)
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._peak: Counter[int] = Counter()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="fuzz-rss", daemon=True)

    def start(self) -> None:
        self._sample()
        self._first = dict(self._last)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(RSS_SAMPLE_S * 5)
        self._sample()

    def report(self) -> dict[str, dict[str, int]]:
        return {str(b): {"before_bytes": self._first.get(b, 0), "after_bytes": self._last.get(b, 0),
                         "peak_bytes": self._peak[b]} for b in sorted(self._pids)}

    def _sample_until_stopped(self) -> None:
        while not self._stopping.wait(RSS_SAMPLE_S):
            self._sample()

    def _sample(self) -> None:
        for broker, pid in self._pids.items():
            rss = rss_bytes(pid)
            if rss is not None:
                self._last[broker] = rss
                self._peak[broker] = max(self._peak[broker], rss)


def rss_bytes(pid: int) -> int | None:
    """The process's resident set size, or None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
