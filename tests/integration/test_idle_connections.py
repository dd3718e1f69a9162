"""Ten thousand idle connections and slowloris clients against a real 1-broker cluster while an acks=all producer
runs: the broker raising its open files limit to the hard one, every idle connection answered (nothing refused
below `max.connections`), the broker's resident memory growing by less than `KB_PER_CONNECTION_MAX` per idle
connection, every connection without a request read in full or answered for `connections.max.idle.ms` closed by
the broker (the slowloris ones, which send a byte a second, and the idle ones), not before that time, an
oversized frame closing only its own connection, and every record of the producer acknowledged. Counts and
bounds, not timings.

`KB_PER_CONNECTION_MAX`: a served connection holds a few Python objects (two tasks, its streams and transport, a
frame decoder, a semaphore and a queue), 11-13 KiB measured; 32 KiB leaves room for the allocator's rounding and
still fails a connection that keeps a read buffer (`READ_CHUNK_BYTES`, 256 KiB) or its requests.
"""

from __future__ import annotations

import resource
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from conftest import start, wait_until
from insync.admin import admin_client
from insync.bench import connections
from insync.bench.targets import rss_kb
from insync.chaos import cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

IDLE = 10_000
SLOWLORIS = 5
IDLE_MS = 30_000
IDLE_CLOSE_SLACK_S = 20.0  # the broker looks every second; a loaded machine schedules its loop late
REQUEST_MAX_BYTES = 1_000_000
KB_PER_CONNECTION_MAX = 32
RATE = 50  # records a second
RECORDS_MAX = 20_000
TOPIC = "busy"
SHELL_OPEN_FILES = 1_024


def set_open_files_limit(soft: int | None) -> int:
    """This process's soft limit on open files set to `soft` (None: the hard limit); the hard limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard if soft is None else min(soft, hard), hard))
    return hard


def open_files_limit(pid: int) -> int:
    """The soft limit on open files of process `pid`."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if line.startswith("Max open files"))
    return int(line.split()[3])


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed `sock` (without waiting, and without taking any bytes; `sock` is left
    non-blocking)."""
    sock.setblocking(False)  # with a timeout, Python would wait for data whatever the flags
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


class Slowloris(threading.Thread):
    """`count` connections each sending one frame of `REQUEST_MAX_BYTES` a byte a second, never finishing it:
    for each, the seconds from its connect until it saw the broker close it."""

    def __init__(self, address: tuple[str, int], count: int) -> None:
        super().__init__(daemon=True)
        self.socks: list[socket.socket] = []
        self.opened_at: list[float] = []
        for _ in range(count):
            self.socks.append(socket.create_connection(address, timeout=10))
            self.opened_at.append(time.monotonic())
        self.frame = struct.pack(">i", REQUEST_MAX_BYTES) + b"\x00" * (REQUEST_MAX_BYTES - 4)
        self.closed_after_s: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        for index in range(len(self.frame)):  # bounded: the frame, a byte a second; `stop` ends it sooner
            for number, sock in enumerate(self.socks):
                if number in self.closed_after_s:
                    continue
                try:
                    closed = closed_by_peer(sock) or not sock.send(self.frame[index:index + 1])
                except OSError:
                    closed = True
                if closed:
                    self.closed_after_s[number] = time.monotonic() - self.opened_at[number]
            if len(self.closed_after_s) == len(self.socks) or self.stop.wait(1.0):
                return

    def close(self) -> None:
        self.stop.set()
        self.join(10)
        for sock in self.socks:
            sock.close()


class SteadyProducer(threading.Thread):
    """An acks=all confluent-kafka producer at `RATE` records a second until stopped; counts what was
    acknowledged and what failed."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "enable.idempotence": True})
        self.sent = self.acked = 0
        self.errors: list[str] = []
        self.stop = threading.Event()

    def _delivered(self, error: object, _message: object) -> None:
        if error is None:
            self.acked += 1
        else:
            self.errors.append(str(error))

    def run(self) -> None:
        while self.sent < RECORDS_MAX and not self.stop.wait(1 / RATE):  # bounded: RECORDS_MAX
            self.producer.produce(TOPIC, value=b"r%d" % self.sent, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)

    def finish(self) -> int:
        """Stop sending; what is still unacknowledged after the flush."""
        self.stop.set()
        self.join(10)
        return self.producer.flush(30)


def test_idle_and_slowloris_connections_beside_a_producer(tmp_path: Path) -> None:
    hard = set_open_files_limit(SHELL_OPEN_FILES)  # the broker inherits a shell's usual limit ...
    assert hard > IDLE + 1_000, "the hard open files limit is too low for the idle connections"
    spec = start(tmp_path, brokers=1, extra=[f"connections.max.idle.ms={IDLE_MS}", "socket.listen.backlog.size=512",
                                             f"socket.request.max.bytes={REQUEST_MAX_BYTES}"])
    set_open_files_limit(None)
    broker = spec.brokers[0]
    assert broker.pid is not None
    assert open_files_limit(broker.pid) == hard  # ... and raises it, as the JVM does for Kafka
    address = (broker.host, broker.port)
    bootstrap = f"{broker.host}:{broker.port}"
    idle: list[socket.socket] = []
    slowloris: Slowloris | None = None
    producer: SteadyProducer | None = None
    try:
        admin = admin_client(bootstrap)  # kept: the futures fail if the client is collected
        futures = admin.create_topics([NewTopic(TOPIC, 1, 1)])
        for future in futures.values():
            future.result(30)
        producer = SteadyProducer(bootstrap)
        producer.start()
        slowloris = Slowloris(address, SLOWLORIS)
        slowloris.start()

        rss_before = rss_kb(broker.pid)
        idle, slow_connects = connections.open_idle(address, IDLE)  # each answered one ApiVersions request
        assert len(idle) == IDLE
        rss_after = rss_kb(broker.pid)
        assert rss_before is not None and rss_after is not None
        kb_per_connection = (rss_after - rss_before) / IDLE
        print(f"{IDLE} idle connections: {rss_before} -> {rss_after} KiB ({kb_per_connection:.1f} KiB each), "
              f"{slow_connects} connects waited out a SYN retransmission")
        assert kb_per_connection < KB_PER_CONNECTION_MAX

        oversized = socket.create_connection(address, timeout=10)
        oversized.sendall(struct.pack(">i", REQUEST_MAX_BYTES + 1))  # the size alone; no body, no end of stream
        assert oversized.recv(1) == b""  # closed by the broker
        oversized.close()
        assert not any(closed_by_peer(sock) for sock in idle[-100:])  # the others stay open ...
        connections.close_all(connections.open_idle(address, 1)[0])  # ... and new ones are served

        wait_until(lambda: len(slowloris.closed_after_s) == SLOWLORIS, IDLE_MS / 1000 + IDLE_CLOSE_SLACK_S + 10,
                   "the slowloris connections closed by the broker")
        closed_after_s = sorted(slowloris.closed_after_s.values())
        print(f"slowloris connections closed after {closed_after_s} s")
        assert closed_after_s[0] >= IDLE_MS / 1000  # not before the idle time ...
        assert closed_after_s[-1] <= IDLE_MS / 1000 + IDLE_CLOSE_SLACK_S  # ... and soon after it
        wait_until(lambda: all(closed_by_peer(sock) for sock in idle), IDLE_MS / 1000 + IDLE_CLOSE_SLACK_S,
                   "the idle connections closed by the broker")

        unacknowledged = producer.finish()
        print(f"producer: {producer.sent} sent, {producer.acked} acknowledged, errors {producer.errors[:3]}")
        assert (unacknowledged, producer.errors) == (0, [])
        assert producer.acked == producer.sent > 0
    finally:
        if producer is not None and producer.is_alive():
            producer.finish()
        if slowloris is not None:
            slowloris.close()
        connections.close_all(idle)
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)

