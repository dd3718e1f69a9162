"""A real insync cluster (controller + brokers as OS processes on 127.0.0.1) for integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos import cluster
from insync.cli import cluster_cmd

FAST = [
    "replica.lag.time.max.ms=4000",
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.fetch.backoff.ms=200",
    "isr.change.propagation.check.interval.ms=250",
    "isr.change.propagation.blackout.ms=500",
]


def start(directory: Path, brokers: int = 3, extra: list[str] | None = None) -> cluster.ClusterSpec:
    return cluster_cmd.up(str(directory), brokers, 0, [*FAST, *(extra or [])])


@pytest.fixture(scope="session")
def insync_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    spec = start(tmp_path_factory.mktemp("cluster"))
    try:
        yield spec
    finally:
        cluster_cmd.down(cluster.ClusterSpec.load(spec.directory), 10.0)
