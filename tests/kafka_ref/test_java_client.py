"""Kafka's Java client (kafka-clients of the release, driven by tools/kafka/ClientDriver.java) against Kafka 4.1 and
against insync: AdminClient, an idempotent acks=all producer and a classic-protocol consumer group running at the
same time, at the client's defaults; the same findings on both, and again with a broker killed mid-run. And the
producer with a transactional.id (tools/kafka/TxnDriver.java): commit, abort, a zombie fenced, read_committed, and
a consume-transform-produce loop committing its offsets in its transactions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from insync.chaos import cluster, kafka_dist, kafka_tools, script
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(600)
DRIVER = Path(__file__).resolve().parents[2] / "tools" / "kafka" / "ClientDriver.java"
TXN_DRIVER = DRIVER.with_name("TxnDriver.java")
RECORDS = 20_000


def _cluster(request: pytest.FixtureRequest, engine: str) -> cluster.ClusterSpec:
    """The module's cluster of that engine, started only when a test asks for it."""
    spec: cluster.ClusterSpec = request.getfixturevalue("kafka41" if engine == "kafka" else "insync3")
    return spec


def _records_in(bootstrap: str, topic: str) -> bool:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return bool(partitions) and sum(consumer.end_offsets(partitions).values()) > 0
    finally:
        consumer.close()


def _findings(spec: cluster.ClusterSpec, topic: str) -> dict[str, str]:
    ran = kafka_tools.run_driver(kafka_dist.assemble("4.1"), DRIVER, [spec.bootstrap, topic, str(RECORDS), f"g-{topic}"])
    findings = dict(line.split("=", 1) for line in ran.stdout.splitlines() if "=" in line)
    assert ran.exit_code == 0, f"{spec.engine}: exit {ran.exit_code}\n{ran.stdout}\n{ran.stderr[-3000:]}"
    return findings


@pytest.mark.parametrize("engine", ["kafka", "insync"])
def test_the_java_client_finds_the_same_on_kafka_and_insync(
        engine: str, request: pytest.FixtureRequest) -> None:
    spec = _cluster(request, engine)
    findings = _findings(spec, "java-plain")
    assert findings == {"admin_partitions": "3", "admin_isr_full": "true", "admin_min_isr": "2", "admin_brokers": "3",
                        "admin_listed": "true", "admin_create_again": "TopicExistsException", "produce_failed": "0",
                        "consumed": str(RECORDS), "consume_duplicates": "0", "consume_ordered": "true",
                        "acknowledged": str(RECORDS), "left_after_commit": "0", "ok": "true"}


@pytest.mark.parametrize("engine", ["kafka", "insync"])
def test_the_java_client_rides_out_a_killed_broker(
        engine: str, request: pytest.FixtureRequest) -> None:
    """Broker 2 SIGKILLed while records flow and restarted: every record acknowledged once and read once."""
    spec = _cluster(request, engine)
    outcome: dict[str, object] = {}

    def drive() -> None:
        try:
            outcome.update(_findings(spec, "java-kill"))
        except AssertionError as exc:  # the driver's own output, kept for the main thread's assertion
            outcome["failure"] = str(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    # The kill lands once the driver's admin checks are done and its producer's records are in, not at a guess.
    wait_until(lambda: _records_in(spec.bootstrap, "java-kill"), 120.0, "the Java producer's first records",
               retry_on=(KafkaError,))
    spec = script.apply(spec, script.parse_step({"at_s": 0, "action": "kill", "broker": 2}, 0))
    time.sleep(3.0)  # broker 2 stays down this long while the clients run
    script.apply(spec, script.parse_step({"at_s": 0, "action": "restart", "broker": 2}, 0))
    driver.join(timeout=300)
    assert not driver.is_alive()
    assert outcome.get("ok") == "true" and outcome.get("acknowledged") == str(RECORDS), outcome


@pytest.mark.parametrize("engine", ["kafka", "insync"])
def test_the_java_clients_transactions_on_kafka_and_insync(
        engine: str, request: pytest.FixtureRequest) -> None:
    spec = _cluster(request, engine)
    ran = kafka_tools.run_driver(kafka_dist.assemble("4.1"), TXN_DRIVER, [spec.bootstrap, "java-txn"])
    findings = dict(line.split("=", 1) for line in ran.stdout.splitlines() if "=" in line)
    assert ran.exit_code == 0, f"{spec.engine}: exit {ran.exit_code}\n{ran.stdout}\n{ran.stderr[-3000:]}"
    # Both finalize transaction.version 2: the client adds a partition through the produce itself, and the leader
    # answers the fenced zombie's send INVALID_PRODUCER_EPOCH.
    assert findings == {"transaction_version": "2", "fenced": "InvalidProducerEpochException",
                        "read_committed": "33", "read_committed_exact": "true", "read_uncommitted": "63",
                        "read_uncommitted_exact": "true", "ctp_transformed": "33", "ctp_output_exact": "true",
                        "ok": "true"}
