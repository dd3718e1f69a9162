"""Brokers authenticate too: a cluster whose every listener, the controller's included, is SASL_PLAINTEXT/PLAIN.
Brokers register, long-poll metadata and replicate over authenticated connections (an RF-2 topic keeps both
replicas in sync under acks=all), while a broker started with a wrong password never registers and the
controller logs why."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FAST, wait_until
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)

USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def jaas(password: str) -> str:
    return f'{MODULE} username="admin" password="{password}" {USERS};'


def secure(node: cluster.NodeSpec, password: str) -> None:
    """Every listener of the node SASL_PLAINTEXT, its own credentials `admin`/`password`."""
    text = node.config_path.read_text().replace("listeners=PLAINTEXT://", "listeners=SASL_PLAINTEXT://")
    node.config_path.write_text(text + "".join(f"{k}={v}\n" for k, v in {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(password),
        "listener.name.controller.plain.sasl.jaas.config": jaas(password),
    }.items()))


def conf(spec: ClusterSpec) -> dict[str, Any]:
    bootstrap = ",".join(spec.node(n).address for n in (1, 2))  # broker 3 listens, but never joins
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}


def brokers_seen(spec: ClusterSpec) -> set[int]:
    from confluent_kafka.admin import AdminClient

    try:
        return set(AdminClient(conf(spec)).list_topics(timeout=10).brokers)
    except Exception:  # noqa: BLE001 - starting up: nobody answers yet
        return set()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:

    spec = cluster.layout(str(tmp_path_factory.mktemp("sasl-ib")), 3, 0, FAST)
    for node in spec.nodes:
        secure(node, "wrong" if node.node_id == 3 else "admin-secret")
    spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
    try:
        cluster.wait_listening(spec.controller)
        for broker in spec.brokers:
            spec = cluster.start_node(spec, broker.node_id)
        wait_until(lambda: brokers_seen(spec) == {1, 2}, 30, "brokers 1 and 2 registered")
        yield spec
    finally:
        cluster.down(ClusterSpec.load(spec.directory), 10.0)


def test_brokers_register_and_replicate_over_sasl(secured: ClusterSpec) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf(secured))
    admin.create_topics([NewTopic("ib", 1, 2, config={"min.insync.replicas": "2"})])["ib"].result(15)
    producer = Producer({**conf(secured), "acks": "all"})
    for i in range(100):
        producer.produce("ib", value=str(i).encode())
    assert producer.flush(30) == 0  # acks=all at min ISR 2: the follower fetched over SASL
    partition = admin.list_topics("ib", timeout=10).topics["ib"].partitions[0]
    assert sorted(partition.isrs) == [1, 2]


def test_a_broker_with_a_wrong_password_cannot_register(secured: ClusterSpec) -> None:
    refused = re.compile(r"Failed authentication with /127\.0\.0\.1:\d+ \(User:admin, mechanism PLAIN, listener "
                         r"CONTROLLER\): Authentication failed: Invalid username or password")
    log = Path(secured.controller.directory) / "stdout.log"
    # Broker 3 keeps trying: refused twice, and still not registered.
    wait_until(lambda: len(refused.findall(log.read_text(errors="replace"))) >= 2, 30,
               "broker 3's authentication refused twice")
    assert brokers_seen(secured) == {1, 2}
    broker_log = (Path(secured.node(3).directory) / "stdout.log").read_text(errors="replace")
    assert "refused authentication as admin with PLAIN" in broker_log
