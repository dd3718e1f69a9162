"""Helpers for the checks against real Apache Kafka (imported by the tests beside this file)."""

from __future__ import annotations

from pathlib import Path

from insync.chaos import cluster

# The releases the compatibility checks run: the line with ELR on by default, the newest 4.x, and the last
# ZooKeeper release, whose behaviour the seeds describe.
VERSIONS = ("4.1", "4", "3.9")


def start_kafka(directory: Path, version: str, brokers: int = 3, extra: list[str] | None = None
                ) -> cluster.ClusterSpec:
    return cluster.up(str(directory), brokers, 0, list(extra or []), engine=f"kafka:{version}")
