"""Kafka's Java client (kafka-clients of the release, driven by tools/kafka/ClientDriver.java) against Kafka 4.1 and
against insync: AdminClient, an idempotent acks=all producer and a classic-protocol consumer group running at the
same time, at the client's defaults; the same findings on both, and again with a broker killed mid-run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos import cluster, kafka_dist, kafka_tools, script

pytestmark = pytest.mark.timeout(600)
DRIVER = Path(__file__).resolve().parents[2] / "tools" / "kafka" / "ClientDriver.java"
RECORDS = 20_000


@pytest.fixture(scope="module")
def insync3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    spec = cluster.up(str(tmp_path_factory.mktemp("insync")), 3, 0, [])
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


def _findings(spec: cluster.ClusterSpec, topic: str) -> dict[str, str]:
    ran = kafka_tools.run_driver(kafka_dist.assemble("4.1"), DRIVER, [spec.bootstrap, topic, str(RECORDS), f"g-{topic}"])
    findings = dict(line.split("=", 1) for line in ran.stdout.splitlines() if "=" in line)
    assert ran.exit_code == 0, f"{spec.engine}: exit {ran.exit_code}\n{ran.stdout}\n{ran.stderr[-3000:]}"
    return findings


@pytest.mark.parametrize("engine", ["kafka", "insync"])
def test_the_java_client_finds_the_same_on_kafka_and_insync(
        engine: str, kafka41: cluster.ClusterSpec, insync3: cluster.ClusterSpec) -> None:
    spec = kafka41 if engine == "kafka" else insync3
    findings = _findings(spec, "java-plain")
    assert findings == {"admin_partitions": "3", "admin_isr_full": "true", "admin_min_isr": "2", "admin_brokers": "3",
                        "admin_listed": "true", "admin_create_again": "TopicExistsException", "produce_failed": "0",
                        "consumed": str(RECORDS), "consume_duplicates": "0", "consume_ordered": "true",
                        "acknowledged": str(RECORDS), "left_after_commit": "0", "ok": "true"}


@pytest.mark.parametrize("engine", ["kafka", pytest.param("insync", marks=pytest.mark.xfail(
    strict=False, reason="open defect: in 1 of 4 runs on insync (none on Kafka) the Java consumer of the group did "
    "not finish within the driver's 180 s after broker 2 was killed; its producer had finished with every record "
    "acknowledged. Suspected: a commitSync blocked on the group coordinator's failover. Under investigation."))])
def test_the_java_client_rides_out_a_killed_broker(
        engine: str, kafka41: cluster.ClusterSpec, insync3: cluster.ClusterSpec) -> None:
    """Broker 2 SIGKILLed a few seconds into the run and restarted: every record acknowledged once and read once."""
    spec = kafka41 if engine == "kafka" else insync3
    outcome: dict[str, object] = {}

    def drive() -> None:
        try:
            outcome.update(_findings(spec, "java-kill"))
        except AssertionError as exc:  # the driver's own output, kept for the main thread's assertion
            outcome["failure"] = str(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    time.sleep(6.0)  # the JVM is up and the topic made: records are flowing
    spec = script.apply(spec, script.parse_step({"at_s": 0, "action": "kill", "broker": 2}, 0))
    time.sleep(3.0)
    script.apply(spec, script.parse_step({"at_s": 0, "action": "restart", "broker": 2}, 0))
    driver.join(timeout=300)
    assert not driver.is_alive()
    assert outcome.get("ok") == "true" and outcome.get("acknowledged") == str(RECORDS), outcome
