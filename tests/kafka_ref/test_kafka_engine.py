"""`insync cluster up --engine kafka:VERSION`: a real Kafka cluster of each release the checks use, started by
insync's launcher, driven by insync's commands and faults, writing the tarball's logs, and gone after `down`."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from reference import VERSIONS, start_kafka

from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, kafka_cluster, script
from insync.config import ConfigError
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(300)
RECORDS = 300


def _produce(bootstrap: str, topic: str, count: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    delivered: list[object] = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda err, msg: delivered.append(msg) if err is None else None)
    assert producer.flush(60) == 0
    return len(delivered)


def _consume_all(bootstrap: str, topic: str, count: int, timeout_s: float = 60.0) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.add(message.value())
    finally:
        consumer.close()
    return values


def _wait_isr(bootstrap: str, topic: str, size: int, timeout_s: float = 60.0) -> list[tuple[int, ...]]:
    isrs: list[tuple[int, ...]] = []

    def sized() -> list[tuple[int, ...]] | None:
        nonlocal isrs
        isrs = [row.isr for row in describe_rows(bootstrap, [topic])]
        return isrs if isrs and all(len(isr) == size for isr in isrs) else None

    return wait_until(sized, timeout_s, lambda: f"ISRs of {topic} of size {size} (last: {isrs})", interval_s=0.5)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_kafka_cluster_runs_under_insyncs_launcher(tmp_path: Path, version: str) -> None:
    spec = start_kafka(tmp_path / "c", version)
    assert cluster.ClusterSpec.load(spec.directory).engine == kafka_cluster.parse_engine(f"kafka:{version}")
    try:
        ensure_topic(spec.bootstrap, "t", 3, 3, {"min.insync.replicas": "2"})
        assert _produce(spec.bootstrap, "t", RECORDS) == RECORDS
        assert len(_consume_all(spec.bootstrap, "t", RECORDS)) == RECORDS
        # A controlled shutdown takes the broker out of every ISR at once (Kafka's own behaviour), and it is back
        # in each once restarted.
        spec = cluster.stop_node(spec, 2, deadline_s=30.0, sig=signal.SIGTERM)
        assert all(2 not in isr for isr in _wait_isr(spec.bootstrap, "t", 2))
        spec = script.apply(spec, script.parse_step({"at_s": 0, "action": "restart", "broker": 2}, 0))
        assert all(2 in isr for isr in _wait_isr(spec.bootstrap, "t", 3))
        with pytest.raises(ConfigError, match="slow-reads is injected by insync nodes themselves"):
            script.apply(spec, script.parse_step({"at_s": 0, "action": "slow-reads", "broker": 1, "topic": "t",
                                                  "partition": 0, "ms": 100}, 0))
        _assert_tarball_logs(spec)
    finally:
        spec = cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
    assert all(node.pid is None for node in spec.nodes)


def _logged(directory: Path, name: str) -> str:
    """A log's text with its rolled files (the tarball's log4j rolls every hour: server.log.2026-11-30-21)."""
    return "".join(path.read_text() for path in sorted(directory.glob(f"{name}*")))


def _assert_tarball_logs(spec: cluster.ClusterSpec) -> None:
    """Every broker writes server.log and state-change.log; the controller's decisions are in controller.log (a
    KRaft controller's, or the ZooKeeper-era controller broker's)."""
    for broker in spec.brokers:
        directory = Path(broker.directory)
        server = _logged(directory, "server.log")
        assert "Kafka Server started" in server or "started (kafka.server.KafkaServer)" in server
        assert "t-0" in _logged(directory, "state-change.log")
    holders = [*spec.controllers, *spec.brokers]
    assert any(_logged(Path(node.directory), "controller.log") for node in holders)


def test_a_secured_kafka_cluster_takes_the_operators_client_settings(tmp_path: Path) -> None:
    """`--security sasl_ssl` on Kafka: the same certificates, JAAS users and DIR/client.properties as insync's."""
    from insync import command_config

    spec = cluster.up(str(tmp_path / "c"), 1, 0, [], security="sasl_ssl", engine="kafka:4.1")
    try:
        settings = command_config.load(tmp_path / "c" / "client.properties")
        assert settings["security.protocol"] == "SASL_SSL"
        secured = Producer({**settings, "bootstrap.servers": spec.bootstrap, "acks": "all"})
        delivered: list[object] = []
        for i in range(20):
            secured.produce("sec", f"v{i}".encode(),
                                         on_delivery=lambda err, msg: delivered.append(msg) if err is None else None)
        assert secured.flush(60) == 0 and len(delivered) == 20  # the topic auto-created, over SASL_SSL
        plain = Producer({"bootstrap.servers": spec.bootstrap, "message.timeout.ms": 3000})
        outcomes: list[object] = []
        plain.produce("sec", b"refused", on_delivery=lambda err, msg: outcomes.append(err))
        plain.flush(10)
        assert len(outcomes) == 1 and outcomes[0] is not None  # a plaintext client does not get in
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


def test_network_faults_cut_a_kafka_broker_in_its_namespace(tmp_path: Path) -> None:
    """`--netns` on Kafka: each node in its own namespace, `chaos isolate` cuts broker 2 from the others (Kafka
    shrinks the ISR after replica.lag.time.max.ms), `heal` lets it back in."""
    from insync.chaos import netns

    if netns.unavailable() is not None:
        pytest.skip(f"--netns: {netns.unavailable()}")
    spec = cluster.up(str(tmp_path / "n"), 2, 0, ["replica.lag.time.max.ms=6000"], namespaces=True,
                      engine="kafka:4.1")
    try:
        ensure_topic(spec.bootstrap, "nt", 1, 2, {})
        script.apply(spec, script.parse_step({"at_s": 0, "action": "isolate", "broker": 2}, 0))
        assert _wait_isr(spec.brokers[0].address, "nt", 1) == [(1,)]
        script.apply(spec, script.parse_step({"at_s": 0, "action": "heal"}, 0))
        # Kafka keeps the ISR in its own order (the replica assignment's, or the order members rejoined).
        assert [sorted(isr) for isr in _wait_isr(spec.bootstrap, "nt", 2)] == [[1, 2]]
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
