"""Kafka's connection quotas and the acceptor thread: the per-IP maximum closes the connection beyond it with
Kafka's log line, `max.connections` holds the next connection unaccepted until one closes (not on the protected
listener), overrides and the listen backlog come from the config; listeners on 127.0.0.1."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import struct
import threading
import time
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from insync.config import BrokerConfig, ConfigError
from insync.protocol.codec import decode_response, encode_request
from insync.server.acceptor import ConnectionQuotas, TooManyConnections, listening_socket, peer_ip
from insync.server.listener import Listener
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(30)


def test_quotas_count_by_ip_and_refuse_beyond_the_maximum_or_its_override() -> None:
    quotas = ConnectionQuotas(max_per_ip=2, overrides={"10.0.0.9": 3})
    stopping = threading.Event()
    assert quotas.admit("10.0.0.1", False, stopping) and quotas.admit("10.0.0.1", False, stopping)
    with pytest.raises(TooManyConnections, match=r"^Too many connections from 10\.0\.0\.1 \(maximum = 2\)$"):
        quotas.admit("10.0.0.1", False, stopping)
    assert [quotas.admit("10.0.0.9", False, stopping) for _ in range(3)] == [True, True, True]
    with pytest.raises(TooManyConnections):
        quotas.admit("10.0.0.9", False, stopping)
    assert (quotas.count("10.0.0.1"), quotas.count("10.0.0.9"), quotas.total) == (2, 3, 5)
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.1", False, stopping)
    assert quotas.total == 5


def test_max_connections_waits_for_a_slot_except_on_the_protected_listener() -> None:
    quotas = ConnectionQuotas(max_connections=1)
    stopping = threading.Event()
    assert quotas.admit("10.0.0.1", False, stopping)
    assert quotas.admit("10.0.0.2", True, stopping)  # the inter-broker listener goes beyond
    admitted: list[bool] = []
    waiter = threading.Thread(target=lambda: admitted.append(quotas.admit("10.0.0.3", False, stopping)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and admitted == []
    quotas.release("10.0.0.1")
    quotas.release("10.0.0.2")
    waiter.join(5)
    assert admitted == [True] and quotas.total == 1


def test_a_stopping_acceptor_gives_up_its_wait_for_a_slot() -> None:
    quotas = ConnectionQuotas(max_connections=0)
    stopping = threading.Event()
    stopping.set()
    assert quotas.admit("10.0.0.1", False, stopping) is False
    assert quotas.total == 0


def test_releasing_what_was_never_admitted_is_a_programmer_error() -> None:
    with pytest.raises(AssertionError):
        ConnectionQuotas().release("10.0.0.1")


def test_the_config_gives_kafkas_defaults_and_parses_overrides() -> None:
    sockets = BrokerConfig({}).sockets
    assert (sockets.listen_backlog_size, sockets.max_connections, sockets.max_connections_per_ip,
            sockets.max_connections_per_ip_overrides, sockets.connections_max_idle_ms) == (
        50, 2**31 - 1, 2**31 - 1, (), 600_000)
    assert BrokerConfig({"connections.max.idle.ms": "1500"}).sockets.connections_max_idle_ms == 1500
    sockets = BrokerConfig({"max.connections.per.ip": "0",
                            "max.connections.per.ip.overrides": "localhost:100, 127.0.0.2:200"}).sockets
    assert sockets.max_connections_per_ip_overrides == (("localhost", 100), ("127.0.0.2", 200))
    quotas = ConnectionQuotas.from_config(sockets)
    assert (quotas.max_per_ip, quotas.overrides) == (0, {"127.0.0.1": 100, "127.0.0.2": 200})
    with pytest.raises(ConfigError, match="^Error parsing configuration property 'max.connections.per.ip.overrides'"):
        BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.1:many"})
    with pytest.raises(ConfigError, match="^Invalid value 0 for configuration socket.listen.backlog.size"):
        BrokerConfig({"socket.listen.backlog.size": "0"})


def test_the_listening_socket_holds_the_backlog_asked_for_and_no_more() -> None:
    """Nobody accepts: Linux completes backlog + 1 handshakes into the accept queue and drops the next SYN."""
    sock = listening_socket("127.0.0.1", 0, 2)
    clients: list[socket.socket] = []
    try:
        assert sock.getblocking() is False
        address = sock.getsockname()
        clients = [socket.create_connection(address, timeout=2) for _ in range(3)]
        with pytest.raises(TimeoutError):
            clients.append(socket.create_connection(address, timeout=0.5))
    finally:
        for client in clients:
            client.close()
        sock.close()


class ApiVersionsOnly:
    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return {18: (0, 3)}

    async def handle(self, request: Any, session: Any) -> Any:
        schema: Any = load_response_schema(18, request.api_version)
        return schema(error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0))

    def unsupported_response(self, api_key: int, api_version: int) -> Any:
        return None


def api_versions(correlation_id: int) -> bytes:
    schema: Any = load_request_schema(18, 3)
    return encode_request(schema(client_software_name="t", client_software_version="1"),
                          correlation_id)


def answered(sock: socket.socket, correlation_id: int) -> bool:
    """Whether `sock` answers an ApiVersions request (False: the broker closed it)."""
    try:
        sock.sendall(api_versions(correlation_id))
        head = sock.recv(4)
        if len(head) < 4:
            return False
        (size,) = struct.unpack(">i", head)
        payload = b""
        while len(payload) < size:
            chunk = sock.recv(size - len(payload))
            if not chunk:
                return False
            payload += chunk
    except (ConnectionResetError, BrokenPipeError):
        return False
    return decode_response(18, 3, payload)[0] == correlation_id


def serve_in_thread(listener: Listener) -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    """The listener on an event loop of its own thread, so the test's blocking sockets can talk to it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result(5)
    return thread, loop


def stop(listener: Listener, thread: threading.Thread, loop: asyncio.AbstractEventLoop) -> None:
    asyncio.run_coroutine_threadsafe(listener.stop(deadline_s=1.0), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_the_connection_beyond_the_per_ip_maximum_is_closed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, 1024, quotas=ConnectionQuotas(max_per_ip=3))
    thread, loop = serve_in_thread(listener)
    caplog.set_level(logging.INFO, "insync.server")
    try:
        allowed = [socket.create_connection(("127.0.0.1", listener.port), timeout=5) for _ in range(3)]
        refused = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
        assert [answered(sock, i) for i, sock in enumerate(allowed)] == [True, True, True]
        assert answered(refused, 9) is False
        assert ("Rejected connection from 127.0.0.1, address already has the configured maximum of 3 connections."
                in caplog.messages)
        allowed[0].close()
        wait_until(lambda: listener.quotas.count("127.0.0.1") < 3, 5, "the listener to see the close",
                   interval_s=0.01)
        again = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
        assert answered(again, 10)
        for sock in (*allowed, refused, again):
            sock.close()
    finally:
        stop(listener, thread, loop)
    assert listener.quotas.total == 0


def test_max_connections_leaves_the_next_connection_unaccepted_until_one_closes() -> None:
    """Three connections made at once, likely one accept batch: the two admitted are served while the acceptor
    waits with the third."""
    listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, 1024, quotas=ConnectionQuotas(max_connections=2))
    thread, loop = serve_in_thread(listener)
    try:
        first, second, waiting = (socket.create_connection(("127.0.0.1", listener.port), timeout=5)
                                  for _ in range(3))
        assert answered(first, 1) and answered(second, 2)
        waiting.sendall(api_versions(3))
        waiting.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.recv(4)
        first.close()
        waiting.settimeout(5)
        assert len(waiting.recv(4)) == 4  # accepted and answered once a slot freed
        for sock in (second, waiting):
            sock.close()
    finally:
        stop(listener, thread, loop)


def test_connections_are_accepted_while_the_event_loop_is_busy() -> None:
    """The loop blocked for seconds: the acceptor thread still takes the connections off the backlog, so five
    backlogs' worth connect without a SYN retransmission. They come in bursts of half a backlog, so the thread has
    a few milliseconds to be scheduled on a loaded machine; an accept on the loop would take none of them."""
    backlog, burst, bursts = 64, 32, 10
    listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, 1024, backlog=backlog)
    thread, loop = serve_in_thread(listener)
    clients: list[socket.socket] = []
    try:
        loop.call_soon_threadsafe(time.sleep, 3.0)  # the loop is busy from now on
        time.sleep(0.1)
        slow = 0
        for _ in range(bursts):
            for _ in range(burst):
                began = time.monotonic()
                clients.append(socket.create_connection(("127.0.0.1", listener.port), timeout=5))
                slow += time.monotonic() - began >= 0.9  # a dropped SYN is sent again after a second
            time.sleep(0.02)
        assert slow == 0 and len(clients) > backlog + 1
        assert [answered(sock, i) for i, sock in enumerate(clients)] == [True] * len(clients)
    finally:
        for sock in clients:
            sock.close()
        stop(listener, thread, loop)


def test_the_peer_address_is_read_from_ipv4_and_ipv6_sockaddrs() -> None:
    v4 = struct.pack("=H", socket.AF_INET) + struct.pack("!H4s", 9092, socket.inet_aton("10.1.2.3")) + bytes(8)
    v6 = (struct.pack("=H", socket.AF_INET6) + struct.pack("!HI16sI", 9092, 0, socket.inet_pton(socket.AF_INET6,
                                                                                           "fd00::7"), 0))
    assert (peer_ip(v4), peer_ip(v6)) == ("10.1.2.3", "fd00::7")
