"""A real broker's acceptor and Kafka's connection quotas: the listener listens with `socket.listen.backlog.size`;
2,000 connections opened one after another, each sending an ApiVersions request at once and read in waves of
`WAVE`, none waiting out a SYN retransmission, every one answered; and `max.connections.per.ip.overrides` closing
the connection beyond a client address's maximum, with Kafka's log line, while other addresses connect as before.
Counts, not timings.

The backlog is 512 here, not Kafka's 50, and the answers are read every `WAVE` connections (a pool connecting in
waves, not a loop opening twenty thousand connections a second): on a loaded two-core machine any acceptor thread,
Kafka's too, can wait longer to be scheduled (or, in Python, for a garbage collection to end) than such a loop
takes to fill 50 places. How the acceptor keeps accepting while the event loop is blocked is
`tests/unit/server/test_acceptor.py`'s."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import start, wait_until
from insync.chaos import cluster
from insync.protocol.codec import encode_request
from insync.protocol.framing import FrameDecoder
from insync.protocol.kio import request_class

pytestmark = pytest.mark.timeout(300)

CONNECTIONS = 2_000
BACKLOG = 512
WAVE = 256
LIMITED_IP, LIMIT = "127.0.0.2", 5  # all of 127/8 is this host: a second client address without a second host
ANSWER_TIMEOUT_S = 60.0
SYN_RETRANSMIT_S = 0.9  # Linux resends a dropped SYN after a second


def api_versions_frame() -> bytes:
    return encode_request(request_class(18, 3)(client_software_name="t", client_software_version="1"), 0)


def connect(address: tuple[str, int], source: str = "127.0.0.1") -> tuple[socket.socket, float]:
    began = time.monotonic()
    sock = socket.create_connection(address, timeout=30, source_address=(source, 0))
    return sock, time.monotonic() - began


def listen_backlog(port: int) -> int:
    """The backlog of the socket listening on `port`, as `ss` reports it (its Send-Q)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True,
                         timeout=10).stdout.split()
    assert out[0] == "LISTEN", out
    return int(out[2])


def answered(sock: socket.socket) -> bool:
    """Whether the broker answers the ApiVersions request already sent on `sock` (False: it closed it)."""
    frames = FrameDecoder(1 << 20, min_frame_bytes=0)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            return False
        if not data:
            return False
        if any(True for _ in frames.feed(data)):
            return True
    raise TimeoutError("no answer")


def test_thousands_of_connections_in_a_row_and_the_per_ip_limit(tmp_path: Path) -> None:
    spec = start(tmp_path, brokers=1, extra=[f"max.connections.per.ip.overrides={LIMITED_IP}:{LIMIT}",
                                             f"socket.listen.backlog.size={BACKLOG}"])
    opened: list[socket.socket] = []
    try:
        broker = spec.brokers[0]
        address = (broker.host, broker.port)
        assert listen_backlog(broker.port) == BACKLOG
        frame = api_versions_frame()
        slow, answers, read = [], 0, 0
        for index in range(CONNECTIONS):
            sock, took_s = connect(address)
            opened.append(sock)
            if took_s >= SYN_RETRANSMIT_S:
                slow.append(index)
            sock.sendall(frame)
            if len(opened) % WAVE == 0 or len(opened) == CONNECTIONS:
                answers += sum(answered(sock) for sock in opened[read:])
                read = len(opened)
        assert slow == [], f"{len(slow)} connects waited out a SYN retransmission"
        assert answers == CONNECTIONS

        limited = [connect(address, LIMITED_IP)[0] for _ in range(LIMIT + 1)]
        opened += limited
        for sock in limited:
            sock.sendall(frame)
        assert [answered(sock) for sock in limited] == [True] * LIMIT + [False]
        log = Path(broker.directory) / "stdout.log"
        wait_until(lambda: f"Rejected connection from {LIMITED_IP}, address already has the configured maximum of "
                           f"{LIMIT} connections." in log.read_text(), 10, "the rejection logged")
        extra, _ = connect(address)  # other addresses are not limited
        opened.append(extra)
        extra.sendall(frame)
        assert answered(extra)
    finally:
        for sock in opened:
            sock.close()
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)

