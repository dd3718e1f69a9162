"""SASL/PLAIN on a real broker: confluent-kafka, kafka-python, aiokafka and kcat produce and consume over
SASL_PLAINTEXT; a wrong password, an unknown user, an unknown mechanism, a request before authentication, an
oversized frame and a few hundred mutated SASL frames each end their own connection, with a log line and the
failed-authentication metric, while other clients go on; an expired session (KIP-368) closes the connection.

One cluster for the module: a controller and one broker whose listeners are PLAINTEXT (the harness's and the
inter-broker one), SASL_PLAINTEXT, and REAUTH (SASL_PLAINTEXT with connections.max.reauth.ms=1500).
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FAST, wait_until
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, request_class

pytestmark = pytest.mark.timeout(180)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
COUNT = 200


class Sasl:
    def __init__(self, spec: ClusterSpec, ports: dict[str, int]) -> None:
        self.spec = spec
        self.ports = ports

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stdout(self) -> str:
        return (Path(self.spec.node(1).directory) / "stdout.log").read_text(errors="replace")

    def logged(self, text: str) -> None:
        """`text` in the broker's log: the listener writes its line as the connection closes, maybe after the
        client saw the close."""
        wait_until(lambda: text in self.stdout(), 10, f"{text!r} in the broker's log")

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.spec.node(1).metrics_port}/metrics", timeout=5).read()
        found = re.search(rf'^{name}{{listener="SASL_PLAINTEXT"}} (\S+)$', text.decode(), re.MULTILINE)
        return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sasl]:

    spec = cluster.layout(str(tmp_path_factory.mktemp("sasl")), 1, 0, FAST)
    broker = spec.node(1)
    sasl_port, reauth_port = cluster.free_ports(2)
    listeners = (f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                 f"REAUTH://127.0.0.1:{reauth_port}")
    text = re.sub(r"^listeners=.*$", f"listeners={listeners}", broker.config_path.read_text(), flags=re.MULTILINE)
    broker.config_path.write_text(text + "".join(f"{k}={v}\n" for k, v in {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.connections.max.reauth.ms": "1500",
    }.items()))
    spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
    cluster.wait_listening(spec.controller)
    spec = cluster.start_node(spec, 1)
    try:
        cluster.wait_listening(spec.node(1))
        cluster.wait_registered(spec, 30)
        yield Sasl(spec, {"SASL_PLAINTEXT": sasl_port, "REAUTH": reauth_port})
    finally:
        cluster.down(ClusterSpec.load(spec.directory), 10.0)


def client_conf(sasl: Sasl, user: str = "alice", password: str = "alice-secret") -> dict[str, Any]:
    return {"bootstrap.servers": sasl.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(COUNT)]


def test_confluent_kafka_plain(sasl: Sasl) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({**client_conf(sasl), "acks": "all"})
    for value in values("ck"):
        producer.produce("sasl-ck", value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**client_conf(sasl), "group.id": "sasl-ck", "enable.auto.commit": False})
    consumer.assign([TopicPartition("sasl-ck", 0, OFFSET_BEGINNING)])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(read) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            read.append(message.value())
    consumer.close()
    assert read == values("ck")


def test_kafka_python_plain(sasl: Sasl) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = {"bootstrap_servers": sasl.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(acks="all", **conf)
    for value in values("kp"):
        producer.send("sasl-kp", value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10_000, **conf)
    consumer.assign([TopicPartition("sasl-kp", 0)])
    consumer.seek_to_beginning()
    read = [message.value for _, message in zip(range(COUNT), consumer, strict=False)]
    consumer.close()
    assert read == values("kp")


def test_aiokafka_plain(sasl: Sasl) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    conf = {"bootstrap_servers": sasl.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **conf)
        await producer.start()
        try:
            for value in values("ak"):
                await producer.send("sasl-ak", value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("sasl-ak", 0)])
            await consumer.seek_to_beginning()
            read: list[bytes] = []
            while len(read) < COUNT:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                read.extend(m.value for ms in batches.values() for m in ms)
            return read
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == values("ak")


def test_kcat_plain(sasl: Sasl) -> None:
    kcat_round_trip(sasl, "sasl-kc")


def kcat_round_trip(sasl: Sasl, topic: str) -> None:
    options = ["-b", sasl.address("SASL_PLAINTEXT"), "-X", "security.protocol=SASL_PLAINTEXT",
               "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    lines = "\n".join(v.decode() for v in values("kc")) + "\n"
    subprocess.run(["kcat", *options, "-P", "-t", topic], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.decode().splitlines() == [v.decode() for v in values("kc")]


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_bad_credentials_refused_with_kafkas_message(sasl: Sasl, user: str, password: str) -> None:
    failed_before = sasl.metric("failed_authentication_total")
    with connect(sasl) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        answer = authenticate(sock, f"\0{user}\0{password}".encode())
        assert int(answer.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert closed(sock)
    assert sasl.metric("failed_authentication_total") == failed_before + 1
    assert re.search(rf"Failed authentication with /127\.0\.0\.1:\d+ \(User:{user}, mechanism PLAIN", sasl.stdout())
    test_confluent_kafka_plain(sasl)  # and everyone else goes on


def test_unknown_mechanism_answered_then_closed(sasl: Sasl) -> None:
    with connect(sasl) as sock:
        answer = handshake(sock, "GSSAPI")
        assert int(answer.error_code) == 33 and list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-512"]
        assert closed(sock)
    assert "Unsupported SASL mechanism GSSAPI" in sasl.stdout()


def test_nothing_served_before_authentication(sasl: Sasl) -> None:
    with connect(sasl) as sock:
        sock.sendall(encode_request(build(request_class(METADATA, 12), topics=None,
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                                    1))
        assert closed(sock)  # no answer at all: not even the broker list
    sasl.logged("Unexpected Kafka request of type 3 during SASL handshake")


def test_oversized_frame_before_authentication_closes(sasl: Sasl) -> None:
    with connect(sasl) as sock:
        sock.sendall(struct.pack(">i", 1024 * 1024) + b"\0" * 64)
        assert closed(sock)
    sasl.logged("exceeds sasl.server.max.receive.size before authentication: the client may be configured with the "
                "wrong security protocol (524288)")


def test_session_expires_without_reauthentication(sasl: Sasl) -> None:
    with connect(sasl, "REAUTH") as sock:
        handshake(sock, "PLAIN")
        answer = authenticate(sock, b"\0alice\0alice-secret")
        assert answer.error_code == 0 and answer.session_lifetime.total_seconds() == 1.5
        time.sleep(1.6)  # time is the state here: the 1.5 s session lapses (the broker tells only on a request)
        sock.sendall(encode_request(build(request_class(METADATA, 12), topics=None,
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                                    9))
        assert closed(sock)
    sasl.logged("expired (connections.max.reauth.ms)")


def test_handshake_v0_then_raw_tokens(sasl: Sasl) -> None:
    """Kafka clients before 1.0: after SaslHandshake v0 the token goes without a Kafka header, and so does the
    answer (PLAIN's is empty)."""
    with connect(sasl) as sock:
        assert call(sock, build(request_class(SASL_HANDSHAKE, 0), mechanism="PLAIN"), SASL_HANDSHAKE, 1).error_code == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_exactly(sock, 4) == struct.pack(">i", 0)
        assert metadata(sock).brokers  # authenticated: the broker answers


def test_reauthentication_keeps_the_connection(sasl: Sasl) -> None:
    """KIP-368: a second exchange on the same connection renews the session; another principal is refused."""
    with connect(sasl, "REAUTH") as sock:
        handshake(sock, "PLAIN")
        authenticate(sock, b"\0alice\0alice-secret")
        time.sleep(1.0)  # time is the state here: within the first 1.5 s session, most of it gone
        handshake(sock, "PLAIN")
        assert authenticate(sock, b"\0alice\0alice-secret").session_lifetime.total_seconds() == 1.5
        time.sleep(1.0)  # past the first session's end, within the second's
        assert metadata(sock).brokers
        handshake(sock, "PLAIN")
        refused = authenticate(sock, b"\0admin\0admin-secret")
        assert int(refused.error_code) == 58
        assert refused.error_message == "Cannot change principals during re-authentication from User:alice: User:admin"
        assert closed(sock)


def test_confluent_kafka_reauthenticates(sasl: Sasl) -> None:
    """librdkafka re-authenticates before its 1.5 s sessions end: a producer sending for 4 s loses nothing."""
    from confluent_kafka import Producer

    log_before = len(sasl.stdout())
    producer = Producer({**client_conf(sasl), "bootstrap.servers": sasl.address("REAUTH"), "acks": "all"})
    deadline, sent = time.monotonic() + 4, 0
    while time.monotonic() < deadline:  # bounded by the deadline
        producer.produce("sasl-reauth", value=b"%d" % sent)
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0 and sent > 10
    ports = re.findall(r"Authenticated /127\.0\.0\.1:(\d+) as User:alice with PLAIN on listener REAUTH",
                       sasl.stdout()[log_before:])
    assert max(ports.count(port) for port in ports) >= 2  # a connection authenticated again, not replaced


def test_fuzzed_sasl_frames_cost_only_their_connection(sasl: Sasl) -> None:
    rng = random.Random(22)
    exchanges = [[encode_request(build(request_class(SASL_HANDSHAKE, 1), mechanism=mechanism), 1),
                  encode_request(build(request_class(SASL_AUTHENTICATE, 2), auth_bytes=token), 2)]
                 for mechanism, token in (("PLAIN", b"\0alice\0alice-secret"),
                                          ("SCRAM-SHA-512", b"n,,n=alice,r=0123456789abcdef"))]
    for _ in range(300):
        frames = [bytearray(f) for f in rng.choice(exchanges)]
        target = frames[rng.randrange(2)]
        for _ in range(rng.randint(1, 4)):
            target[rng.randrange(4, len(target))] = rng.randrange(256)
        with connect(sasl) as sock:
            sock.settimeout(5)
            try:
                sock.sendall(b"".join(frames))
                sock.recv(65536)
            except OSError:
                pass
    kcat_round_trip(sasl, "sasl-after-fuzz")
    assert "Traceback" not in sasl.stdout()


# A SASL exchange by hand ---------------------------------------------------------------------------------------


def connect(sasl: Sasl, listener: str = "SASL_PLAINTEXT") -> socket.socket:
    return socket.create_connection(("127.0.0.1", sasl.ports[listener]), timeout=10)


def call(sock: socket.socket, body: Any, api_key: int, correlation_id: int) -> Any:
    sock.sendall(encode_request(body, correlation_id))
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    answered, response = decode_response(api_key, int(body.__version__), read_exactly(sock, size))
    assert answered == correlation_id
    return response


def handshake(sock: socket.socket, mechanism: str) -> Any:
    return call(sock, build(request_class(SASL_HANDSHAKE, 1), mechanism=mechanism), SASL_HANDSHAKE, 1)


def authenticate(sock: socket.socket, token: bytes) -> Any:
    return call(sock, build(request_class(SASL_AUTHENTICATE, 2), auth_bytes=token), SASL_AUTHENTICATE, 2)


def metadata(sock: socket.socket) -> Any:
    return call(sock, build(request_class(METADATA, 12), topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False), METADATA, 5)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:  # bounded by the socket timeout
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    """The broker closed the connection (a read sees the end of the stream, or a reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
