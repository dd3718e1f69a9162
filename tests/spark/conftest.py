"""One SparkSession for every Spark test: local[2], UI off, two shuffle partitions, bound to 127.0.0.1. (Spark's own
Kafka connector is tested in tests/kafka_ref, by `make compat`: its jars come from Maven Central.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from insync.spark.session import build_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="insync-tests", shuffle_partitions=2)
    yield session
    session.stop()
