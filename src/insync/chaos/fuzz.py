"""The protocol fuzzer against a running cluster, under a steady workload (`insync chaos fuzz`).

`run` writes `BEFORE_TOPIC` and reads it back, starts the workload (`fuzz_workload`: a producer and a consumer
reading live) and a sampler of each node's resident memory, sends the cases to the brokers and, given one, the
controller (`fuzz_controller`), and checks at the end: every process alive, the brokers answering ApiVersions and
Metadata and the controller ApiVersions within `PROBE_TIMEOUT_S`, memory grown by at most the given bound, no
handler exception in the nodes' logs, every acknowledged workload value read back exactly once and seen once by
the live consumer, `BEFORE_TOPIC` unchanged, the same brokers and none fenced, a topic still created, and no case
that hung or got a wrong answer. The summary is plain data for JSON, with `passed` and the failed cases' indexes
(each replays alone from the seed). The cases act only on the fuzzer's scratch topics and groups (`fuzz_cases`),
which `run` creates so that valid requests reach real partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from insync import admin_requests
from insync.admin import ensure_topic
from insync.chaos import fuzz_controller
from insync.chaos.cluster import pid_alive
from insync.chaos.fuzz_cases import SCRATCH_TOPICS, advertised_pairs
from insync.chaos.fuzz_run import Tally, Target, run_cases
from insync.chaos.fuzz_workload import (
    BEFORE_TOPIC,
    WORKLOAD_TOPIC,
    LiveConsumer,
    Workload,
    read_topic,
    write_before,
)
from insync.config import ConfigError
from insync.protocol.codec import API_VERSIONS_KEY, request_schema
from insync.protocol.kio import build
from insync.waiting import WaitTimeout
from insync.wire.versions import ADVERTISED_MIN_VERSIONS, BROKER_API_VERSIONS, METADATA

WORKLOAD_PARTITIONS = 3
PROBE_TIMEOUT_S = 10.0
SCRATCH_DEADLINE_S = 5.0
RSS_SAMPLE_S = 2.0
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
    pids: Mapping[int, int] = field(default_factory=dict)  # node id -> process id, for memory and liveness
    rss_growth_max_bytes: int = 256 * 1024 * 1024
    workload_rate: float = 100.0  # records per second
    logs: tuple[Path, ...] = ()  # the nodes' own logs: a handler's unexpected error there fails the run
    controller: str = ""  # host:port of the controller's listener, which then takes a share of the cases
    events: tuple[Path, ...] = ()  # the controller's events.jsonl: a broker fenced there during the run fails it

    def __post_init__(self) -> None:
        if self.requests < 0 or self.start < 0 or not 1 <= self.concurrency <= 1024 or self.workload_rate <= 0:
            raise ConfigError("fuzz needs requests >= 0, start >= 0, concurrency 1-1024 and a positive rate")
        if self.controller and len(_addresses(self.controller, "--controller")) != 1:
            raise ConfigError(f"--controller wants one host:port, not {self.controller!r}")


@dataclass(frozen=True, slots=True)
class _Run:
    """What `run` gathered for the summary."""

    tally: Tally
    controller_tally: Tally
    seconds: float
    workload: dict[str, Any]
    before: list[Any]
    brokers_before: tuple[int, ...]
    sampler: RssSampler
    handler_errors: dict[str, int]
    fenced: dict[str, int]


def run(spec: FuzzSpec) -> dict[str, Any]:
    """Run the fuzzer and every check (module docstring); the summary's `passed` is their conjunction."""
    replicas = min(3, len(_addresses(spec.bootstrap)))
    for topic in SCRATCH_TOPICS:
        # Best effort: a run before may have left a scratch topic deleted, recreated or reassigned to no broker.
        with contextlib.suppress(ConfigError, WaitTimeout):
            ensure_topic(spec.bootstrap, topic, 2, replicas, {}, SCRATCH_DEADLINE_S)
    ensure_topic(spec.bootstrap, WORKLOAD_TOPIC, WORKLOAD_PARTITIONS, replicas,
                 {"min.insync.replicas": str(min(2, replicas))})
    ensure_topic(spec.bootstrap, BEFORE_TOPIC, 1, replicas, {})
    write_before(spec.bootstrap)
    before = read_topic(spec.bootstrap, BEFORE_TOPIC)
    brokers_before = live_brokers(spec.bootstrap)
    if not brokers_before:  # the controller's cases could not be kept off the real brokers' registrations
        raise ConfigError(f"no broker of {spec.bootstrap} answered Metadata")
    sampler = RssSampler(spec.pids)
    log_sizes, event_sizes = _sizes(spec.logs), _sizes(spec.events)
    workload = Workload(spec.bootstrap, spec.workload_rate)
    live = LiveConsumer(spec.bootstrap, workload.prefix)
    tally, controller_tally = Tally(), Tally()
    sampler.start()
    live.start()
    workload.start()
    started = time.monotonic()
    try:
        asyncio.run(_send(spec, brokers_before, tally, controller_tally))
    finally:
        seconds = time.monotonic() - started
        acked = workload.stop()
        seen_live = live.stop(acked)
        sampler.stop()
    workload_report = {**_read_back(spec.bootstrap, acked, workload.prefix), **seen_live}
    return _summary(spec, _Run(tally, controller_tally, seconds, workload_report, before, brokers_before, sampler,
                               handler_errors(log_sizes), fuzz_controller.fenced(event_sizes, brokers_before)))


async def _send(spec: FuzzSpec, brokers: tuple[int, ...], tally: Tally, controller_tally: Tally) -> None:
    """The cases to the brokers, and every `fuzz_controller.CONTROLLER_EVERY`th to the controller if given."""
    indexes = range(spec.start, spec.start + spec.requests)
    target = Target(_addresses(spec.bootstrap), BROKER_API_VERSIONS,
                    advertised_pairs(BROKER_API_VERSIONS, ADVERTISED_MIN_VERSIONS))
    if not spec.controller:
        await run_cases(target, spec.seed, indexes, spec.concurrency, tally)
        return
    controller = fuzz_controller.controller_target(_addresses(spec.controller)[0], brokers)
    broker_workers, controller_workers = fuzz_controller.workers(spec.concurrency)
    await asyncio.gather(
        run_cases(target, spec.seed, (i for i in indexes if not fuzz_controller.goes_to_controller(i)),
                  broker_workers, tally),
        run_cases(controller, spec.seed, (i for i in indexes if fuzz_controller.goes_to_controller(i)),
                  controller_workers, controller_tally))


def handler_errors(since: Mapping[Path, int]) -> dict[str, int]:
    """The unexpected errors the nodes logged while handling requests after `since` (each log's size then), by
    their exception's last line: a node may refuse garbage, never fail on it."""
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


def _read_back(bootstrap: str, acked: Mapping[bytes, float], prefix: str) -> dict[str, int]:
    read = Counter(record[3] for record in read_topic(bootstrap, WORKLOAD_TOPIC)
                   if record[3] is not None and record[3].startswith(prefix.encode()))
    return {"acked": len(acked), "read": sum(read.values()), "lost": sum(1 for value in acked if read[value] == 0),
            "duplicated": sum(1 for value in acked if read[value] > 1)}


def _summary(spec: FuzzSpec, gathered: _Run) -> dict[str, Any]:
    tallies = (gathered.tally, gathered.controller_tally)
    probes = {f"{host}:{port}": probe(host, port) for host, port in _addresses(spec.bootstrap)}
    alive = {str(node): pid_alive(pid) for node, pid in spec.pids.items()}
    before_unchanged = read_topic(spec.bootstrap, BEFORE_TOPIC) == gathered.before
    rss = gathered.sampler.report()
    rss_ok = all(r["after_bytes"] - r["before_bytes"] <= spec.rss_growth_max_bytes for r in rss.values())
    workload = gathered.workload
    cluster = {"brokers_before": list(gathered.brokers_before), "brokers_after": list(live_brokers(spec.bootstrap)),
               "fenced": gathered.fenced, "new_topic": fuzz_controller.topic_created(
                   spec.bootstrap, min(3, len(gathered.brokers_before)))}
    controller = _controller_summary(spec, gathered.controller_tally)
    answers = sum((t.answers for t in tallies), Counter[str]())
    passed = (all(t.failures == 0 for t in tallies) and all(p == "ok" for p in probes.values())
              and controller.get("probe", "ok") == "ok" and all(alive.values()) and rss_ok
              and workload["lost"] == workload["duplicated"] == 0
              and workload["live_missed"] == workload["live_duplicated"] == 0 and before_unchanged
              and not gathered.handler_errors and cluster["brokers_after"] == cluster["brokers_before"]
              and not cluster["fenced"] and cluster["new_topic"] == "ok")
    return {
        "passed": passed, "seed": spec.seed, "first_index": spec.start, "requests": sum(answers.values()),
        "seconds": round(gathered.seconds, 1),
        "requests_per_s": round(sum(answers.values()) / max(gathered.seconds, 1e-9)),
        "connections": sum(t.connections for t in tallies), "answers": dict(answers),
        "cases": dict(sum((t.by_kind for t in tallies), Counter[str]())), "apis": len(gathered.tally.apis),
        "problems": gathered.tally.problems + _at_controller(gathered.controller_tally.problems),
        "slow": gathered.tally.slow + _at_controller(gathered.controller_tally.slow),
        "handler_errors": gathered.handler_errors, "probes": probes, "alive": alive, "rss": rss,
        "rss_growth_max_bytes": spec.rss_growth_max_bytes, "workload": workload,
        "before_topic": {"records": len(gathered.before), "unchanged": before_unchanged},
        "cluster": cluster, "controller": controller,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _at_controller(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**case, "target": "controller"} for case in cases]


def _controller_summary(spec: FuzzSpec, tally: Tally) -> dict[str, Any]:
    """The controller's cases and probe (ApiVersions: a controller serves no Metadata); empty without one."""
    if not spec.controller:
        return {}
    host, port = _addresses(spec.controller)[0]
    return {"address": spec.controller, "requests": sum(tally.answers.values()), "answers": dict(tally.answers),
            "apis": len(tally.apis), "probe": probe(host, port, metadata=False)}


def _sizes(paths: tuple[Path, ...]) -> dict[Path, int]:
    return {path: path.stat().st_size if path.exists() else 0 for path in paths}


def _addresses(bootstrap: str, option: str = "--bootstrap-server") -> tuple[tuple[str, int], ...]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"{option} wants host:port[,host:port...], not {bootstrap!r}")
        out.append((host, int(port)))
    return tuple(out)


def _metadata_request() -> Any:
    return build(request_schema(METADATA, PROBE_METADATA), topics=None, allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False)


def probe(host: str, port: int, metadata: bool = True) -> str:
    """"ok" when the node answers ApiVersions (and with `metadata`, Metadata) on a new connection within
    `PROBE_TIMEOUT_S`, else what went wrong."""
    versions = build(request_schema(API_VERSIONS_KEY, PROBE_API_VERSIONS), client_software_name="insync-fuzz",
                     client_software_version="1")
    asks = ((API_VERSIONS_KEY, versions), (METADATA, _metadata_request()))[:2 if metadata else 1]
    try:
        for api_key, body in asks:
            answer = admin_requests.request(f"{host}:{port}", body, PROBE_TIMEOUT_S)
            if getattr(answer, "error_code", 0) != 0:
                return f"api {api_key} answered error {int(answer.error_code)}"
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def live_brokers(bootstrap: str) -> tuple[int, ...]:
    """The ids of the brokers in Metadata (fenced ones are left out), from the first broker that answers; none
    if no broker does."""
    for host, port in _addresses(bootstrap):
        try:
            answer = admin_requests.request(f"{host}:{port}", _metadata_request(), PROBE_TIMEOUT_S)
        except (OSError, ValueError):
            continue
        return tuple(sorted(int(b.node_id) for b in answer.brokers))
    return ()


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
