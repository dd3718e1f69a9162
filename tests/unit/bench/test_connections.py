"""The connection rows' arithmetic and client parts: response frames out of a byte stream, KiB per connection, the
ApiVersions request the idle clients send, and the storm client against a listening socket on 127.0.0.1."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from insync.bench import connections
from insync.protocol.codec import decode_request
from insync.wire.versions import BROKER_API_VERSIONS

pytestmark = pytest.mark.timeout(30)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _answer(conn: socket.socket) -> None:
    """Read one request frame whole and answer it with an empty one."""
    (size,) = struct.unpack(">i", conn.recv(4))
    while size > 0:
        size -= len(conn.recv(size))
    conn.sendall(frame(b""))


def test_response_frames_come_whole_however_the_bytes_are_cut() -> None:
    stream = frame(b"one") + frame(b"") + frame(b"three")
    decoder = connections.frames()
    assert [payload for i in range(len(stream)) for payload in decoder.feed(stream[i:i + 1])] == [
        b"one", b"", b"three"]


def test_kib_per_connection_and_the_mean_over_brokers() -> None:
    assert connections.kb_per_connection(100_000, 112_000, 1000) == 12.0
    assert connections.kb_per_connection(None, 112_000, 1000) is None
    assert connections.mean([12.0, 9.0, 10.5]) == 10.5
    assert connections.mean([12.0, None]) is None  # a broker without a reading makes no mean


def test_the_idle_clients_send_api_versions_v3() -> None:
    request = decode_request(connections.api_versions_frame(5)[4:], BROKER_API_VERSIONS)
    assert (request.api_key, request.api_version, request.correlation_id) == (18, 3, 5)


def test_a_storm_counts_every_client_answered() -> None:
    """A server that answers each connection's first frame with an empty frame."""
    server = socket.create_server(("127.0.0.1", 0), backlog=256)
    count = 50

    def serve() -> None:
        for _ in range(count):
            conn, _ = server.accept()
            with conn:
                _answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        answered, seconds, slow, retried = connections.connect_at_once(server.getsockname(), count, timeout_s=20)
    finally:
        thread.join(10)
        server.close()
    assert (answered, slow, retried) == (count, 0, 0) and seconds is not None


def test_a_storm_client_whose_connection_is_reset_connects_again() -> None:
    """The server resets the first connection it accepts (SO_LINGER 0) and answers the rest."""
    server = socket.create_server(("127.0.0.1", 0), backlog=16)
    count = 3

    def serve() -> None:
        for index in range(count + 1):
            conn, _ = server.accept()
            with conn:
                if index == 0:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                _answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        answered, seconds, _, retried = connections.connect_at_once(server.getsockname(), count, timeout_s=20)
    finally:
        thread.join(10)
        server.close()
    assert (answered, retried) == (count, 1) and seconds is not None
