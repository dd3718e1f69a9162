"""The shared session builder's settings for local masters (insync.spark.session)."""

from __future__ import annotations

import socket

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType


def test_a_local_session_runs_in_utc_on_loopback(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the platform has no Unix domain sockets")
def test_python_workers_are_reached_over_unix_domain_sockets(spark: SparkSession) -> None:
    assert spark.conf.get("spark.python.unix.domain.socket.enabled") == "true"
    plus_one = F.udf(lambda n: n + 1, LongType())  # a Python worker round trip over that socket
    assert [row[0] for row in spark.range(3).select(plus_one("id")).collect()] == [1, 2, 3]
