"""`insync bench latency`: acks latency and end-to-end latency with a producer and a tailing consumer.

`run` starts the consumer process (`latency_workers.consume`), waits until it sits at the end of partition 0,
then starts the producer process (`latency_workers.produce`): `warmup_s` of records that are not measured (the
clients connect, the ISR forms), then `seconds` of measured ones. The server's CPU time is read over the measured
window when the target has pids. `LatencyResult` carries the counts (records sent, acked and read in the window,
errors: failed or never acknowledged, or never read) beside ack and end-to-end p50/p99/p999/max in ms.

`find_max_rate` searches the highest rate whose end-to-end p99 stays under a bound, with every measured record
acked and read: it doubles the rate from `start_rate` while runs pass (halves while they fail), then bisects
between the best pass and the first failure; `steps` runs at most.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

from insync.bench import latency_workers
from insync.bench.latency_workers import DELIVERY_TIMEOUT_S, DRAIN_TIMEOUT_S, READY_TIMEOUT_S, ProducerPlan
from insync.bench.targets import Target, cpu_ms_per_mb

SECONDS_MIN = 10.0
E2E_P99_MS_MAX = 50.0
SEARCH_STEPS_MAX = 12
SEARCH_PRECISION = 0.1  # bisection stops when the bounds are within this fraction of the best passing rate
JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LatencyResult:
    target: str
    client: str
    rate: float
    linger_ms: int
    acks: str
    record_bytes: int
    seconds: float
    records_sent: int
    records_acked: int
    records_read: int
    errors: int
    outstanding_max: int  # the most measured records sent and not yet acknowledged at once
    ack_p50_ms: float | None
    ack_p99_ms: float | None
    ack_p999_ms: float | None
    ack_max_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None
    e2e_p999_ms: float | None
    e2e_max_ms: float | None
    server_cpu_ms_per_mb: float | None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def passes(self, e2e_p99_ms_max: float) -> bool:
        """Every measured record acknowledged and read, end-to-end p99 under the bound."""
        return (self.errors == 0 and self.records_read == self.records_sent > 0 and self.e2e_p99_ms is not None
                and self.e2e_p99_ms < e2e_p99_ms_max)


def run(target: Target, plan: ProducerPlan) -> LatencyResult:
    """One run of `plan` against `target`, whose topic `plan.topic` already exists."""
    assert plan.bootstrap == target.bootstrap
    context = multiprocessing.get_context("spawn")  # clean children: no copy of the caller's threads or sockets
    signals = SimpleNamespace(ready=context.Event(), stop=context.Event())
    started, ended = context.Event(), context.Event()
    expected = context.Value("q", 0)
    produced_q: Any = context.Queue()
    consumed_q: Any = context.Queue()
    run_s_max = READY_TIMEOUT_S + plan.warmup_s + plan.seconds + DELIVERY_TIMEOUT_S + DRAIN_TIMEOUT_S
    consumer = context.Process(target=latency_workers.consume, args=(
        plan.bootstrap, plan.topic, plan.marker, signals, expected, consumed_q, run_s_max), daemon=True)
    producer = context.Process(target=latency_workers.produce, args=(plan, started, ended, produced_q), daemon=True)
    consumer.start()
    try:
        if not signals.ready.wait(READY_TIMEOUT_S):
            raise RuntimeError("the consumer found no end offset for the topic")
        producer.start()
        cpu_before = target.cpu_s() if started.wait(READY_TIMEOUT_S + plan.warmup_s) else None
        cpu_after = target.cpu_s() if ended.wait(plan.seconds + READY_TIMEOUT_S) else None
        produced = _result_of(produced_q, producer, DELIVERY_TIMEOUT_S + JOIN_TIMEOUT_S)
        expected.value = produced["sent"]
        signals.stop.set()
        consumed = _result_of(consumed_q, consumer, DRAIN_TIMEOUT_S + JOIN_TIMEOUT_S)
    finally:
        signals.stop.set()
        for process in (producer, consumer):
            _reap(process)
    megabytes = produced["acked"] * plan.record_bytes / 1e6
    return LatencyResult(
        target=target.name, client=plan.client, rate=plan.rate, linger_ms=plan.linger_ms, acks=plan.acks,
        record_bytes=plan.record_bytes, seconds=plan.seconds, records_sent=produced["sent"],
        records_acked=produced["acked"], records_read=consumed["read"],
        errors=produced["errors"] + consumed["errors"] + max(0, produced["sent"] - consumed["read"]),
        outstanding_max=produced["outstanding_max"], ack_p50_ms=produced["p50_ms"], ack_p99_ms=produced["p99_ms"],
        ack_p999_ms=produced["p999_ms"], ack_max_ms=produced["max_ms"], e2e_p50_ms=consumed["p50_ms"],
        e2e_p99_ms=consumed["p99_ms"], e2e_p999_ms=consumed["p999_ms"], e2e_max_ms=consumed["max_ms"],
        server_cpu_ms_per_mb=cpu_ms_per_mb(cpu_before, cpu_after, megabytes))


def _result_of(results: Any, process: Any, timeout_s: float) -> dict[str, Any]:
    try:
        result: dict[str, Any] = results.get(timeout=timeout_s)
    except queue.Empty:
        raise RuntimeError(f"the {process.name} process gave no result (exit code {process.exitcode})") from None
    return result


def _reap(process: Any) -> None:
    if process.pid is None:
        return  # never started
    process.join(JOIN_TIMEOUT_S)
    if process.is_alive():
        process.kill()
        process.join(JOIN_TIMEOUT_S)


def plan_for(target: Target, topic: str, client: str = "confluent", rate: float = 500.0, seconds: float = 10.0,
             warmup_s: float = 3.0, record_bytes: int = 1024, acks: str = "all", linger_ms: int = 0) -> ProducerPlan:
    """The latency benchmark's scenario by default: confluent-kafka, 500 records/s of 1 KiB, acks=all, linger 0."""
    return ProducerPlan(target.bootstrap, topic, client, rate, warmup_s, seconds, record_bytes, acks, linger_ms,
                        os.urandom(8))


@dataclass(frozen=True, slots=True)
class SearchResult:
    e2e_p99_ms_max: float
    max_rate: float | None  # None: even the lowest rate tried failed
    runs: tuple[LatencyResult, ...]

    def to_json(self) -> str:
        return json.dumps({"e2e_p99_ms_max": self.e2e_p99_ms_max, "max_rate": self.max_rate,
                           "runs": [asdict(r) for r in self.runs]})


def find_max_rate(measure: Callable[[float], LatencyResult], start_rate: float,
                  e2e_p99_ms_max: float = E2E_P99_MS_MAX, steps: int = 7) -> SearchResult:
    assert start_rate >= 1 and e2e_p99_ms_max > 0 and 1 <= steps <= SEARCH_STEPS_MAX
    runs: list[LatencyResult] = []
    best: float | None = None
    failed: float | None = None
    rate = start_rate
    for _ in range(steps):
        result = measure(rate)
        runs.append(result)
        if result.passes(e2e_p99_ms_max):
            best = rate
        else:
            failed = rate
        if failed is None:
            rate = rate * 2
        elif best is None:
            rate = rate / 2
        elif failed - best <= best * SEARCH_PRECISION:
            break
        else:
            rate = (best + failed) / 2
        rate = float(round(rate))
        if rate < 1 or rate in (r.rate for r in runs):
            break
    return SearchResult(e2e_p99_ms_max, best, tuple(runs))
