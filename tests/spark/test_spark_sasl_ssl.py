"""The `insync` source and sink over SASL_SSL, with the options Spark's Kafka source takes (issue 22): a cluster
from `cluster up --security sasl_ssl`, records written by the sink and read back by a batch query whose tasks
speak TLS and SASL themselves; and a task with a wrong password fails with the broker's message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from insync.chaos import cluster
from insync.spark.source.client_security import librdkafka_names
from insync.spark.source.datasource import InsyncDataSource
from insync.spark.source.fetch_client import FetchError
from insync.spark.source.kafka_io import OffsetRange, RangeFetch

pytestmark = pytest.mark.timeout(240)

TOPIC = "spark-sasl-ssl"
COUNT = 500


@pytest.fixture(scope="module")
def insync(spark: SparkSession) -> SparkSession:
    spark.dataSource.register(InsyncDataSource)
    return spark


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    spec = cluster.up(str(tmp_path_factory.mktemp("spark-sasl")), 1, 0, ["insync.events.topic.enable=false"],
                      security="sasl_ssl")
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
           "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
           "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def java_options(spec: cluster.ClusterSpec, *, user: str | None = None, password: str | None = None,
                 mechanism: str | None = None) -> dict[str, str]:
    """Spark's Kafka source options for the operator of `spec` (`client.properties`), in the Java names."""
    settings = spec.client_settings()
    mechanism = mechanism or settings["sasl.mechanism"]
    user = user or settings["sasl.username"]
    password = password or settings["sasl.password"]
    return {"kafka.bootstrap.servers": spec.bootstrap,
            "kafka.security.protocol": settings["security.protocol"],
            "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": f'{MODULES[mechanism]} required username="{user}" password="{password}";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": settings["ssl.ca.location"]}


def test_sink_then_source_over_sasl_ssl(insync: SparkSession, secured: cluster.ClusterSpec) -> None:
    options = java_options(secured)
    rows = [(f"v{i}",) for i in range(COUNT)]
    (insync.createDataFrame(rows, "value string").write.format("insync").options(**options)
     .option("topic", TOPIC).mode("append").save())
    read = (insync.read.format("insync").options(**options).option("subscribe", TOPIC).load()
            .orderBy("offset").collect())
    assert sorted(r.value.decode() for r in read) == sorted(value for (value,) in rows)  # two writing tasks
    assert [r.offset for r in read] == list(range(COUNT))


def test_a_task_with_a_wrong_password_fails_with_the_brokers_message(secured: cluster.ClusterSpec) -> None:
    conf = librdkafka_names({k.removeprefix("kafka."): v for k, v in java_options(secured, password="no").items()})
    fetch = RangeFetch(OffsetRange(TOPIC, 0, 0, 1), conf, include_headers=False, fail_on_data_loss=True,
                       poll_timeout_ms=10_000)
    with pytest.raises(FetchError, match="refused authentication as admin with [A-Z0-9-]+: Authentication "
                                         "failed: Invalid username or password"):
        list(fetch.batches())
