"""The connection rows of `insync bench compare`: idle connections, active producers among them, a reconnect storm.

All three speak the protocol over plain sockets from this one process, so the client costs little CPU:
- idle: `count` connections to each broker in turn, opened one after another, each answered one ApiVersions
  request and left open; each broker's resident memory (VmRSS) before and after gives KiB per connection, and
  connects slower than a SYN retransmission (a full listen backlog) are counted.
- active: `clients` connections, while the idle ones stay open, each a producer of 1 KiB records to one partition
  (round-robin over the topic's, to its leader), one record per Produce request (linger 0), acks=all, `rate` a
  second together from a fixed schedule; ack latency from a record's scheduled send to its response, after a
  warm-up. Every `CHECK_EVERY`th response of a connection is decoded and checked for error 0; how far the sender
  fell behind its schedule says whether the client kept up.
- storm: a broker restarted (SIGTERM, then started again); once it accepts a connection, `count` clients connect
  at once, each sending an ApiVersions request: the time until every one is answered.
"""

from __future__ import annotations

import collections
import errno
import os
import selectors
import socket
import struct
import time
from dataclasses import asdict, dataclass
from typing import Any

from insync.admin import admin_client
from insync.bench import requests
from insync.bench.clients import percentile
from insync.bench.targets import Target, rss_kb
from insync.chaos import cluster
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.framing import FrameDecoder
from insync.protocol.kio import request_class
from insync.wire.versions import PRODUCE

API_VERSIONS, API_VERSIONS_VERSION = 18, 3
RECORD_BYTES = 1024
SYN_RETRANSMIT_S = 0.9  # Linux resends a dropped SYN after a second: a connect this slow met a full backlog
SOCKET_TIMEOUT_S = 30.0
SETTLE_S = 2.0  # after opening the idle connections, before reading memory: the brokers finish setting them up
WAIT_S_MAX = 0.05
DRAIN_TIMEOUT_S = 30.0
STORM_TIMEOUT_S = 300.0  # a client whose SYN is dropped again and again resends it after 1, 3, 7, ... 127 s
CONNECT_ATTEMPTS_MAX = 20  # a storm client whose connect fails tries again at once, this often at most
_SIZE = struct.Struct(">i")
CHECK_EVERY = 16
RESPONSE_BYTES_MAX = 1 << 20  # an ApiVersions or one-record Produce response is far smaller


def frames() -> FrameDecoder:
    """A decoder of response frames (no request header to expect, so no smallest size)."""
    return FrameDecoder(RESPONSE_BYTES_MAX, min_frame_bytes=0)


@dataclass(frozen=True, slots=True)
class IdleResult:
    connections_per_broker: int
    rss_kb_before: tuple[int | None, ...]  # each broker's
    rss_kb_after: tuple[int | None, ...]
    kb_per_connection: float | None  # the mean over the brokers
    open_s: float  # opening them all, one after another
    slow_connects: int


@dataclass(frozen=True, slots=True)
class ActiveResult:
    clients: int
    rate: float
    seconds: float
    records_acked: int
    errors: int
    ack_p50_ms: float | None
    ack_p99_ms: float | None
    ack_max_ms: float | None
    send_behind_ms_max: float  # the most a record was sent after its scheduled time


@dataclass(frozen=True, slots=True)
class StormResult:
    connections: int
    broker_id: int
    answered: int
    seconds: float | None  # None: not every connection was answered in time
    slow_connects: int
    reconnects: int  # connections refused, reset or closed before their answer, and made again


def api_versions_frame(correlation_id: int = 0) -> bytes:
    body = request_class(API_VERSIONS, API_VERSIONS_VERSION)(client_software_name="insync-bench",
                                                             client_software_version="1")
    return encode_request(body, correlation_id, "insync-bench-connections")


def kb_per_connection(before: int | None, after: int | None, count: int) -> float | None:
    """KiB of resident memory each of `count` connections added, None without both readings."""
    assert count > 0
    if before is None or after is None:
        return None
    return round((after - before) / count, 2)


def mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 2) if known and len(known) == len(values) else None


def brokers(target: Target) -> list[cluster.NodeSpec]:
    """The target's brokers as they run now (pids change when a row restarts one)."""
    assert target.directory is not None, "a local cluster's rows"
    return list(cluster.ClusterSpec.load(target.directory).brokers)


def open_idle(address: tuple[str, int], count: int) -> tuple[list[socket.socket], int]:
    """`count` connections to `address`, one after another, each answered one ApiVersions request; and how many
    took longer to connect than a SYN retransmission."""
    frame = api_versions_frame()
    opened: list[socket.socket] = []
    slow = 0
    try:
        for _ in range(count):
            began = time.monotonic()
            sock = socket.create_connection(address, timeout=SOCKET_TIMEOUT_S)
            opened.append(sock)
            slow += time.monotonic() - began >= SYN_RETRANSMIT_S
            sock.sendall(frame)
            _read_frame(sock)
    except BaseException:
        close_all(opened)
        raise
    return opened, slow


def _read_frame(sock: socket.socket) -> bytes:
    decoder = frames()
    for _ in range(1 << 20):  # bounded: a frame is at most this many reads
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the broker closed the connection")
        payloads = list(decoder.feed(data))
        if payloads:
            return payloads[0]
    raise ConnectionError("no whole frame")


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


def idle(target: Target, count: int) -> tuple[IdleResult, list[socket.socket]]:
    """`count` idle connections to each broker, and the sockets, left open for `active`."""
    nodes = brokers(target)
    before = [rss_kb(node.pid) if node.pid else None for node in nodes]
    opened: list[socket.socket] = []
    slow = 0
    started = time.monotonic()
    try:
        for node in nodes:
            socks, slow_here = open_idle((node.host, node.port), count)
            opened += socks
            slow += slow_here
        open_s = time.monotonic() - started
        time.sleep(SETTLE_S)
        after = [rss_kb(node.pid) if node.pid else None for node in nodes]
    except BaseException:
        close_all(opened)
        raise
    per_broker = [kb_per_connection(b, a, count) for b, a in zip(before, after, strict=True)]
    return IdleResult(count, tuple(before), tuple(after), mean(per_broker), round(open_s, 3), slow), opened


class _Producer:
    """One connection sending Produce requests of one record to one partition; responses come in request order,
    so each pops the oldest scheduled send time."""

    CORRELATION_AT = 8  # size (4) + api key (2) + api version (2)

    def __init__(self, address: tuple[str, int], frame: bytes) -> None:
        self.sock = socket.create_connection(address, timeout=SOCKET_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frame = bytearray(frame)
        self.scheduled: collections.deque[float] = collections.deque()
        self.decoder = frames()
        self.sent = 0
        self.answered = 0

    def send(self, scheduled_at: float) -> None:
        _SIZE.pack_into(self.frame, self.CORRELATION_AT, self.sent & 0x7FFFFFFF)
        self.sock.sendall(self.frame)
        self.scheduled.append(scheduled_at)
        self.sent += 1

    def receive(self) -> list[tuple[float, bool]]:
        """(scheduled send time, acknowledged without error) of each response that arrived."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed a producer's connection")
        out = []
        for payload in self.decoder.feed(data):
            ok = True
            if self.answered % CHECK_EVERY == 0:
                _, body = decode_response(PRODUCE, requests.PRODUCE_VERSION, payload)
                ok = [p.error_code for t in body.responses for p in t.partition_responses] == [0]
            self.answered += 1
            out.append((self.scheduled.popleft(), ok))
        return out


def leaders(target: Target, topic: str) -> list[tuple[int, tuple[str, int]]]:
    """(partition, its leader's address) of every partition of `topic`."""
    metadata = admin_client(target.bootstrap).list_topics(topic, timeout=15)
    partitions = metadata.topics[topic].partitions
    return [(p, (metadata.brokers[partitions[p].leader].host, metadata.brokers[partitions[p].leader].port))
            for p in sorted(partitions)]


def active(target: Target, topic: str, clients: int, rate: float, warmup_s: float, seconds: float
           ) -> ActiveResult:
    """`clients` producers at `rate` records a second in all (acks=all, one record per request) for `warmup_s`
    then the measured `seconds`."""
    assert clients > 0 and rate > 0 and warmup_s >= 0 and seconds > 0
    placement = leaders(target, topic)
    producers: list[_Producer] = []
    try:
        for i in range(clients):
            partition, address = placement[i % len(placement)]
            producers.append(_Producer(address, requests.produce_frame(topic, -1, RECORD_BYTES, partition)))
        latencies, errors, behind_s = _paced(producers, rate, warmup_s, seconds)
    finally:
        close_all([p.sock for p in producers])
    latencies.sort()
    return ActiveResult(clients, rate, seconds, len(latencies), errors, percentile(latencies, 0.5),
                        percentile(latencies, 0.99), round(latencies[-1], 2) if latencies else None,
                        round(behind_s * 1000, 2))


def _paced(producers: list[_Producer], rate: float, warmup_s: float, seconds: float
           ) -> tuple[list[float], int, float]:
    """Send from the fixed schedule round-robin over `producers`: the ack latencies (ms) of the measured window,
    the errors (error responses, and records unanswered at the end) among its records, and the most seconds a send
    came after its scheduled time."""
    selector = selectors.DefaultSelector()
    for index, producer in enumerate(producers):
        selector.register(producer.sock, selectors.EVENT_READ, index)
    interval = 1.0 / rate
    start = time.monotonic()
    measured_from = start + warmup_s
    total = int((warmup_s + seconds) * rate)
    deadline = start + warmup_s + seconds + DRAIN_TIMEOUT_S
    latencies: list[float] = []
    errors = sent = 0
    behind_s = 0.0
    try:
        while time.monotonic() < deadline:  # bounded by the deadline
            now = time.monotonic()
            while sent < total and start + sent * interval <= now:
                producers[sent % len(producers)].send(start + sent * interval)
                behind_s = max(behind_s, time.monotonic() - (start + sent * interval))
                sent += 1
            if sent == total and not any(p.scheduled for p in producers):
                break
            wait = min(WAIT_S_MAX, max(0.0, start + sent * interval - now)) if sent < total else WAIT_S_MAX
            for key, _ in selector.select(wait):
                arrived = time.monotonic()
                for scheduled, ok in producers[key.data].receive():
                    if scheduled < measured_from:
                        continue
                    if ok:
                        latencies.append((arrived - scheduled) * 1000)
                    else:
                        errors += 1
    finally:
        selector.close()
    unanswered = sum(1 for p in producers for scheduled in p.scheduled if scheduled >= measured_from)
    return latencies, errors + unanswered, behind_s


def restart_broker(target: Target, node_id: int) -> None:
    """Stop broker `node_id` cleanly and start it again; returns once it accepts connections."""
    assert target.directory is not None
    spec = cluster.stop_node(cluster.ClusterSpec.load(target.directory), node_id)
    spec = cluster.start_node(spec, node_id)
    cluster.wait_listening(spec.node(node_id), spec.start_deadline_s)


def storm(target: Target, count: int) -> StormResult:
    """Restart the last broker, then `count` clients connect to it at once (see the module's docstring)."""
    node = brokers(target)[-1]
    restart_broker(target, node.node_id)
    answered, seconds, slow, retried = connect_at_once((node.host, node.port), count, STORM_TIMEOUT_S)
    return StormResult(count, node.node_id, answered, seconds, slow, retried)


def connect_at_once(address: tuple[str, int], count: int, timeout_s: float
                    ) -> tuple[int, float | None, int, int]:
    """(answered, seconds until the last was answered or None, connects slower than a SYN retransmission,
    connections made again after a failure) of `count` non-blocking connects to `address` started together, each
    then sending one ApiVersions request."""
    assert count > 0 and timeout_s > 0
    selector = selectors.DefaultSelector()
    frame = api_versions_frame()
    started = time.monotonic()
    states: dict[int, _Storming] = {}
    try:
        for index in range(count):
            states[index] = _Storming(address, started)
            selector.register(states[index].sock, selectors.EVENT_WRITE, index)
        answered = slow = retried = 0
        last = started
        while answered < count and time.monotonic() - started < timeout_s:  # bounded by the timeout
            for key, _ in selector.select(WAIT_S_MAX):
                state = states[key.data]
                outcome = state.step(frame, selector, key.data)
                if outcome == "connected":
                    slow += state.connected_at - state.began >= SYN_RETRANSMIT_S
                elif outcome == "answered":
                    answered += 1
                    last = time.monotonic()
                elif outcome == "retrying":
                    retried += 1
    finally:
        selector.close()
        close_all([state.sock for state in states.values()])
    return answered, (round(last - started, 3) if answered == count else None), slow, retried


class _Storming:
    """One storm client: connecting, then waiting for its ApiVersions answer."""

    def __init__(self, address: tuple[str, int], began: float) -> None:
        self.address = address
        self.began = began
        self.connected_at = 0.0
        self.attempts = 0
        self.decoder = frames()
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        self.attempts += 1
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(self.address)
        assert code in (0, errno.EINPROGRESS), errno.errorcode.get(code, code)
        return sock

    def step(self, frame: bytes, selector: selectors.BaseSelector, index: int) -> str:
        """Whatever the socket is ready for; a failed connection (refused, reset, or closed before the answer, as
        a broker may do to a handshake it dropped from a full queue) is made again, as a client would."""
        try:
            return self._step(frame, selector, index)
        except OSError:
            if self.attempts >= CONNECT_ATTEMPTS_MAX:
                raise
            selector.unregister(self.sock)
            self.sock.close()
            self.connected_at = 0.0
            self.decoder = frames()
            self.sock = self._connect()
            selector.register(self.sock, selectors.EVENT_WRITE, index)
            return "retrying"

    def _step(self, frame: bytes, selector: selectors.BaseSelector, index: int) -> str:
        if not self.connected_at:
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code != 0:
                raise OSError(code, f"connecting to {self.address}: {os.strerror(code)}")
            self.connected_at = time.monotonic()
            self.sock.send(frame)  # a few dozen bytes into an empty send buffer
            selector.modify(self.sock, selectors.EVENT_READ, index)
            return "connected"
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError(f"{self.address} closed a connection before answering")
        if any(True for _ in self.decoder.feed(data)):
            selector.unregister(self.sock)
            return "answered"
        return "reading"


def run(target: Target, idle_count: int, clients: int, rate: float, topic: str, seconds: float,
        warmup_s: float = 3.0) -> dict[str, Any]:
    """The three rows against `target`, whose `topic` exists: idle, active among the idle, then the storm."""
    idle_result, held = idle(target, idle_count)
    try:
        active_result = active(target, topic, clients, rate, warmup_s, seconds)
    finally:
        close_all(held)
    return {"connections-idle": asdict(idle_result), "connections-active": asdict(active_result),
            "reconnect-storm": asdict(storm(target, idle_count))}
