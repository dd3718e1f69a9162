"""The schema-driven fuzzer (`insync chaos fuzz`) against a 3-broker cluster of its own under a steady acks=all
idempotent workload: no case hangs or gets a wrong answer, every broker still answers ApiVersions and Metadata,
the workload loses and duplicates nothing, and a topic written before is read back unchanged. A few thousand
cases here; the slow test sends many more over more connections."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import running
from insync.chaos import fuzz
from insync.chaos.cluster import ClusterSpec

FAST_REQUESTS = 2000
SLOW_REQUESTS = 60_000
SEED = 20261130


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:
    with running(tmp_path_factory.mktemp("fuzz-cluster")) as spec:
        yield spec


def _run(spec: ClusterSpec, requests: int, start: int, concurrency: int) -> dict[str, object]:
    pids = {b.node_id: b.pid for b in spec.brokers if b.pid is not None}
    logs = tuple(Path(b.directory) / "stdout.log" for b in spec.brokers)
    summary = fuzz.run(fuzz.FuzzSpec(spec.bootstrap, requests, SEED, concurrency, start, pids, workload_rate=50.0,
                                     logs=logs))
    assert summary["problems"] == [], summary["problems"]
    assert summary["handler_errors"] == {}, summary["handler_errors"]  # refused or answered, never an exception
    assert set(summary["probes"].values()) == {"ok"}, summary["probes"]  # type: ignore[union-attr]
    assert all(summary["alive"].values()), summary["alive"]  # type: ignore[union-attr]
    workload = summary["workload"]
    assert workload["lost"] == 0 and workload["duplicated"] == 0 and workload["acked"] > 0, workload  # type: ignore[index]
    assert summary["before_topic"] == {"records": fuzz.BEFORE_RECORDS, "unchanged": True}
    assert summary["requests"] == requests and summary["passed"], summary
    return summary


@pytest.mark.slow  # 48 connections of flood for a minute starve make test's CPU-counting tests beside it
@pytest.mark.timeout(240)
def test_thousands_of_schema_cases_break_nothing(fuzz_cluster: ClusterSpec) -> None:
    summary = _run(fuzz_cluster, FAST_REQUESTS, 0, 16)
    answers = summary["answers"]
    # Every way a broker may meet a case shows up: answered, refused with an error, connection closed.
    assert answers["ok"] > 0 and answers["error"] > 0 and answers["closed"] > 0, answers  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tens_of_thousands_of_schema_cases_break_nothing(fuzz_cluster: ClusterSpec) -> None:
    _run(fuzz_cluster, SLOW_REQUESTS, FAST_REQUESTS, 64)
