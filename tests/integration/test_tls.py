"""TLS listeners with real clients (issue 22): a 2-broker cluster from `cluster up --security ssl`, where every
listener (brokers' and the controller's) speaks TLS and requires a client certificate from the cluster's CA.
confluent-kafka, kafka-python, aiokafka and kcat produce and consume with the operator's certificate;
a certificate from another CA, a plaintext client and a client that stalls mid-handshake are each refused on
their own connection, with a log line, while the others go on being served. A node with a PLAINTEXT and an SSL
listener answers Metadata with the advertised address of the listener the client came in on."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FAST, wait_until
from insync import command_config
from insync.admin import ensure_topic
from insync.chaos import certs, cluster
from insync.security_config import STANDARD_AUTHORIZER

pytestmark = pytest.mark.timeout(180)

TOPIC = "tls"
COUNT = 200


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    acls_on = f"authorizer.class.name={STANDARD_AUTHORIZER}"  # node and admin are super users
    spec = cluster.up(str(tmp_path_factory.mktemp("tls")), 2, 0, [*FAST, "ssl.handshake.timeout.ms=1000", acls_on],
                      security="ssl")
    try:
        command_config.use(spec.client_settings())
        ensure_topic(spec.bootstrap, TOPIC, 2, 2, {})
        yield spec
    finally:
        command_config.use({})
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def settings(spec: cluster.ClusterSpec) -> dict[str, str]:
    return {**spec.client_settings(), "bootstrap.servers": spec.bootstrap}


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(COUNT)]


def consume_confluent(conf: dict[str, Any], tag: str) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": f"read-{tag}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(2)])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and len(read) < COUNT:  # bounded by the deadline
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value().startswith(tag.encode()):
                read.append(message.value())
    finally:
        consumer.close()
    return read


def test_confluent_kafka_with_a_client_certificate(secure: cluster.ClusterSpec) -> None:
    from confluent_kafka import Producer

    producer = Producer({**settings(secure), "acks": "all", "enable.idempotence": True})
    for value in values("ck"):
        producer.produce(TOPIC, value)
    assert producer.flush(30) == 0
    assert sorted(consume_confluent(settings(secure), "ck")) == sorted(values("ck"))


def test_kafka_python_with_a_client_certificate(secure: cluster.ClusterSpec) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = secure.client_settings()
    tls = {"security_protocol": "SSL", "ssl_cafile": conf["ssl.ca.location"],
           "ssl_certfile": conf["ssl.certificate.location"], "ssl_keyfile": conf["ssl.key.location"]}
    producer = KafkaProducer(bootstrap_servers=secure.bootstrap, acks="all", **tls)
    for value in values("kp"):
        producer.send(TOPIC, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=secure.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, **tls)
    read = [m.value for m in consumer if m.value.startswith(b"kp-")]
    consumer.close()
    assert sorted(read) == sorted(values("kp"))


def test_aiokafka_with_a_client_certificate(secure: cluster.ClusterSpec) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    conf = secure.client_settings()

    async def scenario() -> list[bytes]:
        context = create_ssl_context(cafile=conf["ssl.ca.location"], certfile=conf["ssl.certificate.location"],
                                     keyfile=conf["ssl.key.location"])
        producer = AIOKafkaProducer(bootstrap_servers=secure.bootstrap, security_protocol="SSL",
                                    ssl_context=context, acks="all")
        await producer.start()
        try:
            for value in values("ak"):
                await producer.send(TOPIC, value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=secure.bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest")
        await consumer.start()
        read: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:  # bounded by the timeout
                    if message.value.startswith(b"ak-"):
                        read.append(message.value)
                    if len(read) == COUNT:
                        break
        finally:
            await consumer.stop()
        return read

    assert sorted(asyncio.run(scenario())) == sorted(values("ak"))


def test_kcat_reads_the_client_properties(secure: cluster.ClusterSpec) -> None:
    properties = str(Path(secure.directory) / "client.properties")
    lines = b"\n".join(values("kc")) + b"\n"
    subprocess.run(["kcat", "-F", properties, "-b", secure.bootstrap, "-P", "-t", TOPIC], input=lines,
                   check=True, timeout=60, capture_output=True)
    read = subprocess.run(["kcat", "-F", properties, "-b", secure.bootstrap, "-C", "-t", TOPIC, "-e", "-q"],
                          check=True, timeout=60, capture_output=True).stdout.split()
    assert sorted(v for v in read if v.startswith(b"kc-")) == sorted(values("kc"))


def broker_log(spec: cluster.ClusterSpec) -> str:
    return "".join((Path(b.directory) / "stdout.log").read_text() for b in spec.brokers)


def metadata_fails(conf: dict[str, Any], timeout_s: float = 3) -> bool:
    """Whether a Metadata request with `conf` fails (a refused client fails once `timeout_s` is over)."""
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient(conf).list_topics(timeout=timeout_s)
    except Exception:
        return True
    return False


def test_a_certificate_from_another_ca_is_refused(secure: cluster.ClusterSpec, tmp_path: Path) -> None:
    other = certs.create(tmp_path / "other", clients=("mallory",))
    certificate, key = other.client("mallory")
    conf = {**settings(secure), "ssl.certificate.location": str(certificate), "ssl.key.location": str(key)}
    assert metadata_fails(conf)
    wait_until(lambda: "certificate" in broker_log(secure).split("Failed authentication")[-1], 10,
               "the refusal is logged")
    assert not metadata_fails(settings(secure), 15)  # the others are served as before


def test_the_certificates_common_name_is_the_principal_the_authorizer_sees(secure: cluster.ClusterSpec) -> None:
    """bob's certificate, from the cluster's own CA (certs create on its directory adds him), gets him in as
    User:bob, whom no ACL lets write; admin (a super user) writes as before."""
    from confluent_kafka import Producer

    certificate, key = certs.create(Path(secure.directory) / "certs", clients=("bob",)).client("bob")
    bob = Producer({**settings(secure), "ssl.certificate.location": str(certificate),
                    "ssl.key.location": str(key), "message.timeout.ms": 10_000})
    refused: list[str] = []
    bob.produce(TOPIC, b"bob", on_delivery=lambda err, _m: refused.append(err.name() if err else "delivered"))
    bob.flush(15)
    assert refused == ["TOPIC_AUTHORIZATION_FAILED"]
    wait_until(lambda: "Principal = User:bob is Denied operation = " in broker_log(secure), 10,
               "the authorizer's log names bob")


def test_a_plaintext_client_on_a_tls_port_is_refused(secure: cluster.ClusterSpec) -> None:
    assert metadata_fails({"bootstrap.servers": secure.bootstrap, "socket.timeout.ms": 2000})
    wait_until(lambda: "WRONG_VERSION_NUMBER" in broker_log(secure), 10, "the refusal is logged")
    assert not metadata_fails(settings(secure), 15)


def test_a_client_stalling_mid_handshake_loses_only_its_connection(secure: cluster.ClusterSpec) -> None:
    host, _, port = secure.brokers[0].address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as stalled:
        stalled.sendall(b"\x16\x03\x01\x02\x00")  # a TLS record header announcing a ClientHello that never comes
        assert not metadata_fails(settings(secure), 15)  # served meanwhile
        assert stalled.recv(1) == b""  # closed by the broker after ssl.handshake.timeout.ms (1 s), not by our 10 s
    wait_until(lambda: "SSL handshake not completed in 1000 ms" in broker_log(secure), 10, "the stall is logged")


def test_metadata_answers_the_address_of_the_listener_the_client_came_in_on(tmp_path: Path) -> None:
    """One node (broker and controller) with a PLAINTEXT and an SSL listener, the SSL one advertised as
    localhost: a client on each sees the broker at that listener's address."""
    from confluent_kafka.admin import AdminClient

    files = certs.create(tmp_path / "certs")
    plain, tls, controller = cluster.free_ports(3)
    config = tmp_path / "server.properties"
    config.write_text("\n".join([
        "node.id=1", "process.roles=broker,controller", f"log.dirs={tmp_path / 'data'}",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SSL://localhost:{tls}",
        "inter.broker.listener.name=PLAINTEXT", f"controller.listener=CONTROLLER://127.0.0.1:{controller}",
        f"controller.quorum.voters=1@127.0.0.1:{controller}", f"ssl.keystore.location={files.node}",
        "offsets.topic.replication.factor=1", "insync.events.topic.enable=false", *FAST]) + "\n")
    log = (tmp_path / "stdout.log").open("wb")
    node = subprocess.Popen([sys.executable, "-m", "insync.cli.main", "broker", "start", "--config", str(config)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        cluster.wait_port(tls, 30, node.pid, "the node")

        def brokers(conf: dict[str, str]) -> list[tuple[str, int]]:
            return [(b.host, b.port) for b in AdminClient(conf).list_topics(timeout=5).brokers.values()]

        wait_until(lambda: brokers({"bootstrap.servers": f"127.0.0.1:{plain}"}), 30, "the broker registered")
        assert brokers({"bootstrap.servers": f"127.0.0.1:{plain}"}) == [("127.0.0.1", plain)]
        assert brokers({"bootstrap.servers": f"localhost:{tls}", "security.protocol": "SSL",
                        "ssl.ca.location": str(files.ca)}) == [("localhost", tls)]
    finally:
        node.terminate()
        node.wait(timeout=20)
        log.close()
