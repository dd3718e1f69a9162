"""SCRAM over SASL_SSL with real clients (issue 22): a cluster from `cluster up --security sasl_ssl`, a SCRAM user
made with `insync users add` (AlterUserScramCredentials through the controller: the metadata log holds its salt
and keys, never the password), then confluent-kafka, kafka-python, aiokafka and kcat produce and consume as that
user with SCRAM-SHA-512; a wrong password gets Kafka's message (which does not say whether the user exists);
`insync users list` and `delete` work, and a deleted user cannot log in any more."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from insync.chaos import cluster
from insync.cli.main import main

pytestmark = pytest.mark.timeout(180)

COUNT = 200
USER, PASSWORD = "bob", "bob-secret"
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    spec = cluster.up(str(tmp_path_factory.mktemp("scram")), 1, 0, ["insync.events.topic.enable=false"],
                      security="sasl_ssl")
    try:
        assert users(spec, "add", "--user", USER, "--password", PASSWORD) == 0
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def users(spec: cluster.ClusterSpec, *args: str) -> int:
    return main(["users", *args, "--bootstrap-server", spec.bootstrap,
                 "--command-config", str(Path(spec.directory) / "client.properties")])


def conf(spec: cluster.ClusterSpec, password: str = PASSWORD, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {"bootstrap.servers": spec.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": spec.client_settings()["ssl.ca.location"], "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": password}


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(COUNT)]


def python_conf(spec: cluster.ClusterSpec) -> dict[str, Any]:
    """kafka-python's and aiokafka's names (aiokafka takes an ssl_context instead of the CA file)."""
    return {"bootstrap_servers": spec.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": USER, "sasl_plain_password": PASSWORD}


def test_confluent_kafka_scram_sha_512(secured: cluster.ClusterSpec) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({**conf(secured), "acks": "all"})
    for value in values("ck"):
        producer.produce("scram-ck", value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf(secured), "group.id": "scram-ck", "enable.auto.commit": False})
    consumer.assign([TopicPartition("scram-ck", 0, OFFSET_BEGINNING)])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(read) < COUNT and time.monotonic() < deadline:  # bounded by the deadline
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.value())
    consumer.close()
    assert read == values("ck")


def test_kafka_python_scram_sha_512(secured: cluster.ClusterSpec) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tls = {"ssl_cafile": secured.client_settings()["ssl.ca.location"]}
    producer = KafkaProducer(acks="all", **python_conf(secured), **tls)
    for value in values("kp"):
        producer.send("scram-kp", value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10_000, **python_conf(secured), **tls)
    consumer.assign([TopicPartition("scram-kp", 0)])
    consumer.seek_to_beginning()
    read = [message.value for _, message in zip(range(COUNT), consumer, strict=False)]
    consumer.close()
    assert read == values("kp")


def test_aiokafka_scram_sha_512(secured: cluster.ClusterSpec) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    async def scenario() -> list[bytes]:
        context = create_ssl_context(cafile=secured.client_settings()["ssl.ca.location"])
        producer = AIOKafkaProducer(acks="all", ssl_context=context, **python_conf(secured))
        await producer.start()
        try:
            for value in values("ak"):
                await producer.send("scram-ak", value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(ssl_context=context, **python_conf(secured))
        await consumer.start()
        try:
            consumer.assign([TopicPartition("scram-ak", 0)])
            await consumer.seek_to_beginning()
            read: list[bytes] = []
            async with asyncio.timeout(30):
                while len(read) < COUNT:  # bounded by the timeout
                    batches = await consumer.getmany(timeout_ms=1000)
                    read.extend(m.value for ms in batches.values() for m in ms)
            return read
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == values("ak")


def test_kcat_scram_sha_512(secured: cluster.ClusterSpec) -> None:
    options = ["-b", secured.bootstrap, *(arg for key, value in conf(secured).items()
                                          if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}"))]
    lines = b"\n".join(values("kc")) + b"\n"
    produced = subprocess.run(["kcat", *options, "-P", "-t", "scram-kc"], input=lines, timeout=60, capture_output=True)
    assert produced.returncode == 0, produced.stderr.decode()
    out = subprocess.run(["kcat", *options, "-C", "-t", "scram-kc", "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == values("kc")


def metadata_error(settings: dict[str, Any]) -> str:
    """What kcat says when it cannot list the cluster's metadata with these settings."""
    options = [arg for key, value in settings.items() if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}")]
    listed = subprocess.run(["kcat", "-b", settings["bootstrap.servers"], *options, "-L", "-m", "5"],
                            capture_output=True, timeout=60)
    assert listed.returncode != 0
    return listed.stderr.decode()


def test_wrong_password_gets_kafkas_message(secured: cluster.ClusterSpec) -> None:
    assert GENERIC in metadata_error(conf(secured, password="wrong"))
    log = Path(secured.node(1).directory, "stdout.log").read_text(errors="replace")
    assert "(User:bob, mechanism SCRAM-SHA-512, listener SASL_SSL): Invalid client credentials" in log


def test_users_list_and_delete(secured: cluster.ClusterSpec, capsys: pytest.CaptureFixture[str]) -> None:
    assert users(secured, "add", "--user", "carol", "--password", "c", "--mechanism", "SCRAM-SHA-256") == 0
    capsys.readouterr()
    assert users(secured, "list") == 0
    listed = capsys.readouterr().out
    assert "bob: SCRAM-SHA-512 (iterations 8192)" in listed and "carol: SCRAM-SHA-256 (iterations 8192)" in listed
    assert users(secured, "delete", "--user", "carol", "--mechanism", "SCRAM-SHA-512") == 1
    refused = capsys.readouterr().err
    assert "RESOURCE_NOT_FOUND" in refused and "Attempt to delete a user credential that does not exist" in refused
    assert users(secured, "delete", "--user", "carol", "--mechanism", "SCRAM-SHA-256") == 0
    capsys.readouterr()
    assert users(secured, "list") == 0
    assert "carol" not in capsys.readouterr().out
    settings = {**conf(secured, password="c", mechanism="SCRAM-SHA-256"), "sasl.username": "carol"}
    assert "SCRAM-SHA-256" in metadata_error(settings)
