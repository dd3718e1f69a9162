"""The listener against a dispatcher that answers ApiVersions and echoes a delay, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import struct
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from insync.protocol.codec import DecodedRequest, decode_response, encode_request
from insync.server.listener import Listener
from insync.server.request_queue import RequestQueue
from insync.server.session import Session

pytestmark = pytest.mark.timeout(20)


class ApiVersionsOnly:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return {18: (0, 3)}

    async def handle(self, request: DecodedRequest, session: Session) -> Any:
        self.seen.append(request.correlation_id)
        # Later requests finish first unless the listener serialises them.
        await asyncio.sleep(0.05 if request.correlation_id % 2 == 0 else 0)
        schema = load_response_schema(18, request.api_version)
        return schema(error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0))

    def unsupported_response(self, api_key: int, api_version: int) -> Any:
        assert api_key == 18, api_key
        schema = load_response_schema(18, 0)
        return schema(error_code=ErrorCode.unsupported_version,
                      api_keys=(ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(3)),))


def api_versions(version: int, correlation_id: int) -> bytes:
    schema = load_request_schema(18, version)
    body = schema(client_software_name="t", client_software_version="1") if version >= 3 else schema()
    return encode_request(body, correlation_id)


async def read_response(reader: asyncio.StreamReader, version: int) -> tuple[int, Any]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return decode_response(18, version, await reader.readexactly(size))


async def a_new_connection_is_served(port: int) -> None:
    """After a connection was closed on a bad frame or a handler's bug, the broker still serves others."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(api_versions(3, 2))
    assert (await read_response(reader, 3))[0] == 2
    writer.close()


async def with_listener(dispatcher: Any, body: Any, idle_ms: int = 600_000) -> None:
    listener = Listener(dispatcher, "127.0.0.1", 0, max_request_bytes=1024, idle_ms=idle_ms)
    await listener.start()
    try:
        await body(listener.port)
    finally:
        await listener.stop(deadline_s=1.0)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(3, cid) for cid in range(6)))
        ids = [(await read_response(reader, 3))[0] for _ in range(6)]
        assert ids == list(range(6))
        writer.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


class Gated(ApiVersionsOnly):
    """Requests with an even correlation id wait for the gate; the others are answered at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def handle(self, request: DecodedRequest, session: Session) -> Any:
        self.seen.append(request.correlation_id)
        if request.correlation_id % 2 == 0:
            await self.gate.wait()
        schema = load_response_schema(18, request.api_version)
        return schema(error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0))


async def until(predicate: Any) -> None:
    for _ in range(200):  # bounded: 2 s
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached within 2 s")


def test_a_waiting_request_does_not_hold_back_the_handling_of_the_next() -> None:
    """Issue 17: an acks=all produce waits for the followers; the requests pipelined behind it on its connection are
    handled meanwhile (a one-at-a-time connection made the queue grow without end), and answered in order."""
    dispatcher = Gated()

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(3, cid) for cid in (0, 1, 2, 3)))
        await until(lambda: dispatcher.seen == [0, 1, 2, 3])
        dispatcher.gate.set()
        assert [(await read_response(reader, 3))[0] for _ in range(4)] == [0, 1, 2, 3]
        writer.close()

    asyncio.run(with_listener(dispatcher, body))


def test_requests_in_flight_on_a_connection_are_bounded() -> None:
    from insync.limits import INFLIGHT_REQUESTS_PER_CONNECTION_MAX as limit

    dispatcher = Gated()
    count = limit + 50

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(api_versions(3, 2 * cid) for cid in range(count)))  # every one waits
        await until(lambda: len(dispatcher.seen) >= limit)
        await asyncio.sleep(0.1)
        assert len(dispatcher.seen) == limit
        dispatcher.gate.set()
        assert [(await read_response(reader, 3))[0] for _ in range(count)] == [2 * c for c in range(count)]
        writer.close()

    asyncio.run(with_listener(dispatcher, body))


def test_a_bad_frame_closes_the_connection_after_what_came_before_is_answered() -> None:
    dispatcher = Gated()

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(3, 0) + struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1) + api_versions(3, 1))
        await until(lambda: dispatcher.seen == [0])
        dispatcher.gate.set()
        assert (await read_response(reader, 3))[0] == 0
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed: request 1 never handled
        assert dispatcher.seen == [0]
        writer.close()

    asyncio.run(with_listener(dispatcher, body))


class Buggy(ApiVersionsOnly):
    async def handle(self, request: DecodedRequest, session: Session) -> Any:
        if request.correlation_id == 1:
            raise RuntimeError("a bug in a handler")
        return await super().handle(request, session)


def test_a_handlers_bug_closes_its_connection_at_once() -> None:
    """The client waiting for its answer sees the connection close (it would otherwise wait out its own timeout);
    the requests before the failing one are answered, and the broker serves new connections."""

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(3, 0) + api_versions(3, 1))
        assert (await read_response(reader, 3))[0] == 0
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        writer.close()
        await a_new_connection_is_served(port)

    asyncio.run(with_listener(Buggy(), body))


def test_too_high_api_versions_gets_error_35_with_v0_body() -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(4, 11))
        correlation_id, response = await read_response(reader, 0)
        assert correlation_id == 11
        assert response.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]
        writer.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 5000) + b"x" * 10,  # over socket.request.max.bytes
        struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1),  # unknown api key
        api_versions(3, 1)[:-2],  # torn body: size says more than is sent, then EOF
        struct.pack(">i", 9) + struct.pack(">hhi", 18, 3, 1) + b"\xff",  # body does not parse
    ],
)
def test_bad_frames_close_only_their_connection(garbage: bytes) -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(garbage)
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        writer.close()
        await a_new_connection_is_served(port)

    asyncio.run(with_listener(ApiVersionsOnly(), body))


IDLE_MS = 300


def test_a_connection_idle_for_connections_max_idle_ms_is_closed_and_others_are_served() -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(3, 0))
        assert (await read_response(reader, 3))[0] == 0
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # the broker closed it
        writer.close()
        await a_new_connection_is_served(port)

    asyncio.run(with_listener(ApiVersionsOnly(), body, IDLE_MS))


def test_a_frame_trickled_a_byte_at_a_time_does_not_keep_its_connection_open() -> None:
    """A slowloris client: its frame never completes, so it is idle however often a byte arrives (Kafka counts
    every byte as activity and would keep it open for good)."""
    frame = struct.pack(">i", 1000) + b"x" * 996

    async def trickle(writer: asyncio.StreamWriter) -> None:
        for byte in frame:  # bounded: 1,000 bytes, far longer than the idle time
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(IDLE_MS / 10_000)

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sender = asyncio.create_task(trickle(writer))
        try:
            assert await asyncio.wait_for(reader.read(), timeout=5) == b""
            assert not sender.done()  # closed while the bytes were still coming
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender
            writer.close()
        await a_new_connection_is_served(port)

    asyncio.run(with_listener(ApiVersionsOnly(), body, IDLE_MS))


def test_a_connection_waiting_for_its_answer_is_not_idle() -> None:
    """A request in flight longer than the idle time (a long fetch wait, an acks=all produce) keeps its connection;
    a connection idle since later is closed meanwhile, which shows the idle check ran past the first one."""
    dispatcher = Gated()

    async def body(port: int) -> None:
        waiting_reader, waiting_writer = await asyncio.open_connection("127.0.0.1", port)
        waiting_writer.write(api_versions(3, 0))  # even: held at the gate
        await asyncio.wait_for(until(lambda: dispatcher.seen == [0]), timeout=5)
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(idle_reader.read(), timeout=5) == b""
        dispatcher.gate.set()
        assert (await asyncio.wait_for(read_response(waiting_reader, 3), timeout=5))[0] == 0
        assert await asyncio.wait_for(waiting_reader.read(), timeout=5) == b""  # idle once answered
        idle_writer.close()
        waiting_writer.close()

    asyncio.run(with_listener(dispatcher, body, IDLE_MS))


def test_a_size_above_socket_request_max_bytes_closes_its_connection_at_once_and_only_it() -> None:
    """As Kafka's InvalidReceiveException: the size alone closes the connection, before any of the body."""

    async def body(port: int) -> None:
        other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 1025))  # no body, no end of stream
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        other_writer.write(api_versions(3, 7))
        assert (await read_response(other_reader, 3))[0] == 7
        writer.close()
        other_writer.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


def test_client_pipelines_and_reconnects() -> None:
    from insync.server.client import KafkaConnection

    async def body(port: int) -> None:
        connection = KafkaConnection("127.0.0.1", port)
        schema = load_request_schema(18, 3)
        request = schema(client_software_name="t", client_software_version="1")
        responses = await asyncio.gather(*(connection.request(request, timeout_s=5) for _ in range(8)))
        assert all(r.error_code == ErrorCode.none for r in responses)
        await connection.close()
        assert (await connection.request(request, timeout_s=5)).error_code == ErrorCode.none
        await connection.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


def test_client_fails_waiters_when_the_connection_drops() -> None:
    from insync.server.client import KafkaConnection

    async def body(port: int) -> None:
        connection = KafkaConnection("127.0.0.1", port)
        unsupported = load_request_schema(18, 4)(client_software_name="t", client_software_version="1")
        # v4 is not in the table: the listener answers with a v0 body that a v4 reader cannot parse, so the
        # connection is dropped and the waiter gets a ConnectionError instead of hanging.
        with pytest.raises(ConnectionError):
            await connection.request(unsupported, timeout_s=5)
        await connection.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


def test_accepted_connections_get_the_configured_send_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from insync.server import listener as listener_module

    seen: list[tuple[int, int]] = []
    real = listener_module.set_send_buffer

    def recording(sock: Any, size: int) -> None:
        real(sock, size)
        seen.append((size, sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)))

    monkeypatch.setattr(listener_module, "set_send_buffer", recording)

    async def main() -> None:
        listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, max_request_bytes=1024, send_buffer_bytes=65536)
        await listener.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
            writer.write(api_versions(3, 1))
            assert (await read_response(reader, 3))[0] == 1
            writer.close()
        finally:
            await listener.stop(deadline_s=1.0)

    asyncio.run(main())
    # Linux doubles the size asked for (bookkeeping); an autotuned socket would not report it.
    assert seen == [(65536, 2 * 65536)]


def test_send_buffer_minus_one_leaves_the_os_default() -> None:
    import socket

    from insync.server.listener import set_send_buffer

    with socket.socket() as sock:
        before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        set_send_buffer(sock, -1)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == before
        set_send_buffer(sock, 100_000)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 200_000


def test_failover_connection_skips_a_voter_that_refuses_within_the_same_call() -> None:
    import socket

    from insync.server.client import FailoverConnection

    with socket.socket() as closed:  # a port nobody listens on: a dead controller
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]

    async def body(port: int) -> None:
        voters = FailoverConnection([("127.0.0.1", dead), ("127.0.0.1", port)])
        try:
            response = await voters.request(load_request_schema(18, 3)(client_software_name="t",
                                                                       client_software_version="1"), 5.0)
            assert response.error_code == ErrorCode.none
            assert voters.address == f"127.0.0.1:{port}"
        finally:
            await voters.close()
        only_dead = FailoverConnection([("127.0.0.1", dead), ("127.0.0.1", dead)])
        with pytest.raises(ConnectionRefusedError):
            await only_dead.request(load_request_schema(18, 3)(client_software_name="t", client_software_version="1"))
        await only_dead.close()

    asyncio.run(with_listener(ApiVersionsOnly(), body))


def test_client_disconnects_a_timed_out_connection_and_the_next_request_reconnects() -> None:
    """A peer that goes silent (a network partition drops its packets, no reset) must not hold later requests:
    a timed-out request drops the connection, as Kafka's NetworkClient does, and the next one connects anew."""
    from insync.server.client import KafkaConnection

    connections: list[int] = []

    async def silent_then_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.read()  # reads the request and never answers; ends when the client disconnects
        writer.close()

    async def main() -> None:
        silent = await asyncio.start_server(silent_then_gone, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        connection = KafkaConnection("127.0.0.1", port)
        request = load_request_schema(18, 3)(client_software_name="t", client_software_version="1")
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await connection.request(request, timeout_s=0.2)
        await connection.close()
        silent.close()
        await silent.wait_closed()
        assert connections == [0, 1]  # the second request did not queue on the first, dropped connection

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_request_whose_send_cannot_finish_times_out_and_drops_the_connection() -> None:
    """A peer that stops reading fills the socket's buffers: the send waits, and it must be inside the request's
    deadline (not before it), or the request would hold its slot forever."""
    from insync.server.client import KafkaConnection

    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(never_reads, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connection = KafkaConnection("127.0.0.1", port)
        # 32 MB in one request, more than the socket buffers of both ends hold: its send never finishes.
        big = load_request_schema(18, 3)(client_software_name="t" * (32 << 20), client_software_version="1")
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await connection.request(big, timeout_s=0.3)
        assert asyncio.get_running_loop().time() - started < 5
        await connection.close()
        server.close()

    asyncio.run(asyncio.wait_for(main(), 10))


@pytest.mark.parametrize("max_requests", [1, 3])
def test_a_listener_with_a_small_queue_answers_every_pipelined_request_in_order(max_requests: int) -> None:
    queue = RequestQueue(max_requests=max_requests)
    count = 40

    async def body() -> None:
        listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, max_request_bytes=1024, queue=queue)
        await listener.start()
        try:
            connections = [await asyncio.open_connection("127.0.0.1", listener.port) for _ in range(2)]
            for _, writer in connections:
                writer.write(b"".join(api_versions(3, cid) for cid in range(count)))
            for reader, writer in connections:
                assert [(await read_response(reader, 3))[0] for _ in range(count)] == list(range(count))
                writer.close()
        finally:
            await listener.stop(deadline_s=1.0)

    asyncio.run(body())
    assert queue.high_water == max_requests and (queue.size, queue.bytes) == (0, 0)


def test_with_kafkas_default_queue_a_burst_is_decoded_in_one_turn() -> None:
    """The bound above is what held the readers back: with room, one read's frames all enter at once."""
    queue = RequestQueue()

    async def body() -> None:
        listener = Listener(ApiVersionsOnly(), "127.0.0.1", 0, max_request_bytes=1024, queue=queue)
        await listener.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
            writer.write(b"".join(api_versions(3, cid) for cid in range(40)))
            assert [(await read_response(reader, 3))[0] for _ in range(40)] == list(range(40))
            writer.close()
        finally:
            await listener.stop(deadline_s=1.0)

    asyncio.run(body())
    assert queue.high_water > 3 and queue.size == 0
