"""Real Apache Kafka beside insync (`make compat`, not `make test`): releases assembled from Maven Central into
the cache outside the repository (`make kafka`), started by insync's own launcher."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from reference import start_kafka

from insync.chaos import cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession with Spark's own Kafka connector on its classpath (make spark-kafka-jars)."""
    pytest.importorskip("pyspark")
    from insync.spark.connector_jars import connector_jars
    from insync.spark.session import build_session

    session = build_session("local[2]", app_name="insync-kafka-ref", shuffle_partitions=2, jars=connector_jars())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kafka41(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    """A 3-broker Kafka 4.1 cluster (KRaft, one controller) for a module's tests."""
    spec = start_kafka(tmp_path_factory.mktemp("kafka41"), "4.1")
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


@pytest.fixture(scope="module")
def insync3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    """A 3-broker insync cluster at its defaults, the counterpart of `kafka41`."""
    spec = cluster.up(str(tmp_path_factory.mktemp("insync")), 3, 0, [])
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
