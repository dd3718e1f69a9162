"""`insync bench requests`: Produce requests per second one broker serves at one record per request.

`run` finds the leader of partition 0 and opens one connection to it from this process, with a plain blocking
socket so the client costs little CPU beside the brokers: it keeps `inflight` Produce requests (v9, one batch of
one record, acks 1 or -1) on the wire, sending the next as each response arrives; the frame is built once and
only its correlation id changes. After `warmup_s` it counts the responses of `seconds` and reads the leader's
and the whole cluster's CPU time from /proc. Only every `CHECK_EVERY`th response is decoded and checked for
error 0, since decoding each would cost the client as much as a broker.

With `profile`, a second window of the same length is sampled by py-spy on the leader (sampling costs the leader
time, so the rate comes from the first window): the leader's CPU ms per request in that window is shared out in
proportion to its samples, which `breakdown` sorts into decode, core, encode, asyncio, syscalls, poll or other.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from insync.admin import admin_client, describe_rows
from insync.bench.targets import Target, server_cpu_s
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, nested, request_class
from insync.protocol.records import build_batch
from insync.wire.versions import PRODUCE

PRODUCE_VERSION = 9  # flexible, by topic name: what librdkafka 2.x sends
RECORD_BYTES = 100
INFLIGHT_MAX = 100  # limits.INFLIGHT_REQUESTS_PER_CONNECTION_MAX: more would only wait in the socket
CHECK_EVERY = 64
SPY_RATE_HZ = 250
SPY_ATTACH_S = 0.5  # py-spy attaching, and leaving before the window ends
SOCKET_TIMEOUT_S = 30.0
_SIZE = struct.Struct(">i")
CATEGORIES = ("decode", "core", "encode", "asyncio", "syscalls", "poll", "other")


@dataclass(frozen=True, slots=True)
class RequestRateResult:
    acks: int
    inflight: int
    seconds: float
    requests: int
    requests_per_s: float
    leader_cpu_ms_per_request: float | None
    cluster_cpu_ms_per_request: float | None
    profiled_requests: int = 0
    python_ms_per_request: float | None = None  # the leader's CPU per request in the profiled window
    breakdown_ms: dict[str, float] = field(default_factory=dict)  # python_ms_per_request by category

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def produce_frame(topic: str, acks: int, record_bytes: int = RECORD_BYTES, partition: int = 0) -> bytes:
    """A framed Produce v9 request (correlation id 0) of one batch holding one record, to `partition`."""
    assert acks in (1, -1) and record_bytes > 0 and partition >= 0
    cls = request_class(PRODUCE, PRODUCE_VERSION)
    batch = build_batch([(None, os.urandom(record_bytes))], base_timestamp=int(time.time() * 1000))
    data = build(nested(cls, "PartitionProduceData"), index=partition, records=batch)
    topics = (build(nested(cls, "TopicProduceData"), name=topic, partition_data=(data,)),)
    body = build(cls, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=30), topic_data=topics)
    return encode_request(body, 0, "insync-bench-requests")


class _Pipeline:
    """One connection keeping up to `inflight` copies of `frame` in flight, each with its own correlation id."""

    # size (4) + api key (2) + api version (2): the correlation id follows
    CORRELATION_AT = 8

    def __init__(self, address: tuple[str, int], frame: bytes, inflight: int) -> None:
        assert 1 <= inflight <= INFLIGHT_MAX
        self.sock = socket.create_connection(address, timeout=SOCKET_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frame = bytearray(frame)
        self.inflight = inflight
        self.sent = 0
        self.answered = 0
        self._buffer = bytearray()

    def run_for(self, seconds: float) -> int:
        """Keep the pipeline full for `seconds`; the responses received meanwhile."""
        assert seconds > 0
        start, deadline = self.answered, time.monotonic() + seconds
        while time.monotonic() < deadline:
            while self.sent - self.answered < self.inflight:
                self._send()
            self._receive()
        return self.answered - start

    def close(self) -> None:
        self.sock.close()

    def _send(self) -> None:
        _SIZE.pack_into(self.frame, self.CORRELATION_AT, self.sent & 0x7FFFFFFF)
        self.sock.sendall(self.frame)
        self.sent += 1

    def _receive(self) -> None:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        self._buffer += data
        while len(self._buffer) >= _SIZE.size:  # bounded by the frames one recv holds
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if len(self._buffer) < _SIZE.size + size:
                return
            payload = bytes(self._buffer[_SIZE.size:_SIZE.size + size])
            del self._buffer[:_SIZE.size + size]
            if self.answered % CHECK_EVERY == 0:
                _check(payload, self.answered & 0x7FFFFFFF)
            self.answered += 1


def _check(payload: bytes, correlation_id: int) -> None:
    got, body = decode_response(PRODUCE, PRODUCE_VERSION, payload)
    assert got == correlation_id, (got, correlation_id)
    codes = [p.error_code for t in body.responses for p in t.partition_responses]
    if codes != [0]:
        raise RuntimeError(f"Produce answered error codes {codes}")


def leader_of(target: Target, topic: str) -> tuple[tuple[str, int], int | None]:
    """The address and pid of the leader of `topic`'s partition 0 on `target` (a pid only for a local cluster)."""
    leader = describe_rows(target.bootstrap, [topic])[0].leader
    broker = admin_client(target.bootstrap).list_topics(timeout=10).brokers[leader]
    return (broker.host, broker.port), target.pid_of(leader)


def run(address: tuple[str, int], topic: str, acks: int, leader_pid: int | None, pids: tuple[int, ...],
        seconds: float = 10.0, warmup_s: float = 2.0, inflight: int = 16, profile: bool = False
        ) -> RequestRateResult:
    """Measure the leader at `address` (process `leader_pid`) of `topic`'s partition 0; `pids` are every node's."""
    assert seconds > 0 and warmup_s >= 0
    pipeline = _Pipeline(address, produce_frame(topic, acks), inflight)
    try:
        if warmup_s:
            pipeline.run_for(warmup_s)
        leader_before, cluster_before = server_cpu_s((leader_pid,) if leader_pid else ()), server_cpu_s(pids)
        started = time.monotonic()
        served = pipeline.run_for(seconds)
        elapsed = time.monotonic() - started
        leader_after, cluster_after = server_cpu_s((leader_pid,) if leader_pid else ()), server_cpu_s(pids)
        result = RequestRateResult(acks, inflight, round(elapsed, 3), served, round(served / elapsed, 1),
                                   _per_request(leader_before, leader_after, served),
                                   _per_request(cluster_before, cluster_after, served))
        if profile and leader_pid:
            result = _profiled(result, pipeline, leader_pid, seconds)
    finally:
        pipeline.close()
    return result


def _per_request(before: float | None, after: float | None, requests: int) -> float | None:
    if before is None or after is None or requests <= 0:
        return None
    return round((after - before) * 1000 / requests, 4)


def _profiled(result: RequestRateResult, pipeline: _Pipeline, pid: int, seconds: float) -> RequestRateResult:
    """`result` with the leader's CPU ms per request over a py-spy window of `seconds` on process `pid`, shared
    out by the categories of its samples. (py-spy's own count of busy samples is no measure of CPU: a thread
    waiting for a core on a loaded machine is runnable, so it counts as busy.)"""
    with tempfile.TemporaryDirectory(prefix="insync-spy-") as directory:
        raw = Path(directory) / "spy.txt"
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-d",
                                str(int(seconds)), "-r", str(SPY_RATE_HZ), "-f", "raw", "-o", str(raw)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(SPY_ATTACH_S)
        before = server_cpu_s((pid,))
        served = pipeline.run_for(int(seconds) - 2 * SPY_ATTACH_S)
        cpu_ms = _per_request(before, server_cpu_s((pid,)), served)
        spy.wait(timeout=seconds + SOCKET_TIMEOUT_S)
        if not raw.exists() or cpu_ms is None:
            return result
        counts = breakdown(raw.read_text().splitlines())
    samples = sum(counts.values())
    per_category = {name: round(cpu_ms * count / samples, 4) for name, count in counts.items()} if samples else {}
    return replace(result, profiled_requests=served, python_ms_per_request=cpu_ms, breakdown_ms=per_category)


def breakdown(lines: Iterable[str]) -> dict[str, int]:
    """Busy samples of py-spy's raw output (`frame;frame;... count`, root first) by where the time went:
    - core: under the broker's sans-IO core (`BrokerCore.`) or replication's fetcher callbacks;
    - encode: building or writing a response or a request body (codec's `encode_*`, a `wire` encoder);
    - decode: parsing a request or a response (codec's `decode_*`, a `wire` decoder);
    - syscalls: the leaf is asyncio's socket transport (send, recv: their C calls and the Python around them);
    - poll: the leaf is the selector (epoll; py-spy counts a wait that returns at once as busy);
    - asyncio: any other leaf in asyncio (tasks, futures, handles, timers);
    - other: insync's server glue (listener, `call`, `_feed`, metrics, event log) and the rest.
    A thread of its own waiting in its selector (the metrics endpoint's HTTP server) is idle, whatever py-spy
    says, and not counted."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if frames[0].startswith("Thread._bootstrap") and "selectors.py" in frames[-1]:
            continue
        counts[_category(frames)] += int(count)
    return counts


def _category(frames: list[str]) -> str:
    assert frames, "a sample has frames"
    names = [frame.partition(" (")[0] for frame in frames]
    if any(name.startswith("BrokerCore.") for name in names):
        return "core"
    coded = [name for frame, name in zip(frames, names, strict=True)
             if ("insync/wire/" in frame or "insync/protocol/codec.py" in frame)
             and ("encode" in name or "decode" in name)]
    if coded:
        return "decode" if "decode" in coded[0] else "encode"
    leaf = frames[-1]
    if "selectors.py" in leaf:
        return "poll"
    if "selector_events.py" in leaf or "socket.py" in leaf:
        return "syscalls"
    if "asyncio/" in leaf:
        return "asyncio"
    return "other"
