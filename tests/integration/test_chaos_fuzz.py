"""The schema-driven fuzzer (`insync chaos fuzz`) against a 3-broker cluster of its own under a steady acks=all
idempotent workload: no case hangs or gets a wrong answer, every broker still answers ApiVersions and Metadata,
the workload loses and duplicates nothing (read back after the run, and by a consumer reading while it runs), a
topic written before is read back unchanged, no broker is fenced and a new topic can be created. A few thousand
cases to the brokers, a few thousand shared with the controller's listener; the slow test sends many more over
more connections."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import running
from insync.chaos import fuzz, fuzz_workload
from insync.chaos.cluster import ClusterSpec
from insync.server.event_log import EVENTS_FILE

FAST_REQUESTS = 2000
CONTROLLER_REQUESTS = 4000
SLOW_REQUESTS = 10_000  # CI's share: `insync chaos fuzz` sent the recorded 1,000,000 (docs/benchmarks.md)
SEED = 20261130


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:
    with running(tmp_path_factory.mktemp("fuzz-cluster")) as spec:
        yield spec


def _run(spec: ClusterSpec, requests: int, start: int, concurrency: int, controller: bool = False) -> dict[str, Any]:
    nodes = (spec.controller, *spec.brokers)
    pids = {n.node_id: n.pid for n in nodes if n.pid is not None}
    logs = tuple(Path(n.directory) / "stdout.log" for n in nodes)
    summary = fuzz.run(fuzz.FuzzSpec(spec.bootstrap, requests, SEED, concurrency, start, pids, workload_rate=50.0,
                                     logs=logs, controller=spec.controller.address if controller else "",
                                     events=(spec.controller.log_dir / EVENTS_FILE,)))
    assert summary["problems"] == [], summary["problems"]
    assert summary["handler_errors"] == {}, summary["handler_errors"]  # refused or answered, never an exception
    assert set(summary["probes"].values()) == {"ok"}, summary["probes"]
    assert all(summary["alive"].values()) and "0" in summary["alive"], summary["alive"]
    workload = summary["workload"]
    assert workload["lost"] == 0 and workload["duplicated"] == 0 and workload["acked"] > 0, workload
    # The consumer reading during the fuzz saw every acknowledged value, once.
    assert workload["live_seen"] == workload["acked"], workload
    assert workload["live_missed"] == 0 and workload["live_duplicated"] == 0, workload
    before = summary["before_topic"]  # each run on the module's cluster adds its records to the topic
    assert before["unchanged"] and before["records"] % fuzz_workload.BEFORE_RECORDS == 0 < before["records"], before
    cluster = summary["cluster"]
    assert cluster["brokers_before"] == cluster["brokers_after"] == [b.node_id for b in spec.brokers], cluster
    assert cluster["fenced"] == {} and cluster["new_topic"] == "ok", cluster
    assert summary["requests"] == requests and summary["passed"], summary
    return summary


@pytest.mark.slow  # 48 connections of flood for a minute starve make test's CPU-counting tests beside it
@pytest.mark.timeout(300)
def test_thousands_of_schema_cases_break_nothing(fuzz_cluster: ClusterSpec) -> None:
    summary = _run(fuzz_cluster, FAST_REQUESTS, 0, 16)
    answers = summary["answers"]
    # Every way a broker may meet a case shows up: answered, refused with an error, connection closed.
    assert answers["ok"] > 0 and answers["error"] > 0 and answers["closed"] > 0, answers
    assert summary["controller"] == {}


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_the_controllers_listener_takes_its_share_of_cases(fuzz_cluster: ClusterSpec) -> None:
    """A quarter of the cases go to the controller, from its own table; none may name a real broker in a
    registration or heartbeat (those are skipped), and the controller answers ApiVersions after them."""
    summary = _run(fuzz_cluster, CONTROLLER_REQUESTS, FAST_REQUESTS + SLOW_REQUESTS, 16, controller=True)
    controller = summary["controller"]
    assert controller["probe"] == "ok" and controller["requests"] == CONTROLLER_REQUESTS // 4, controller
    answers = controller["answers"]
    assert answers["ok"] > 0 and answers["error"] > 0 and answers["closed"] > 0, answers
    assert controller["apis"] >= 15, controller


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ten_thousand_schema_cases_break_nothing(fuzz_cluster: ClusterSpec) -> None:
    _run(fuzz_cluster, SLOW_REQUESTS, FAST_REQUESTS, 64)
