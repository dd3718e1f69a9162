"""One SparkSession for every Spark test: local[2], UI off, two shuffle partitions, bound to 127.0.0.1, with Spark's
own Kafka connector on the classpath (test_spark_kafka_connector.py; a JVM's classpath is fixed at its start, so the
one session carries it for every file)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from insync.spark.connector_jars import connector_jars  # noqa: E402
from insync.spark.session import build_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="insync-tests", shuffle_partitions=2, jars=connector_jars())
    yield session
    session.stop()
