"""The Kafka listener: accept connections, frame and decode requests, hand them to a dispatcher, write responses.

This is the only place a broker touches sockets. Each connection has a reader task that decodes each frame and
starts its handler at once, and a responder task that writes the responses in request order, at most
`INFLIGHT_REQUESTS_PER_CONNECTION_MAX` a connection. Kafka instead mutes a connection until its response is sent;
since an acks=all produce waits for the followers' next fetch, that would turn a librdkafka producer at
`linger.ms=0` (a request per record) into a queue that grows without end once a round trip outlasts the gap
between records. Handlers start in arrival order, so appends keep the client's order (`session.AppendTurns`
where a transaction's coordinator is asked first). A bad frame, an unknown api key or version (except ApiVersions)
or a body that does not parse closes only that connection. Responses are `encode_response_parts` parts: a Fetch
response's records go uncopied to the socket, and the 4 MiB `socket.send.buffer.bytes` sends one in one or two.
A TLS listener bounds its handshake by `ssl.handshake.timeout.ms`; the client certificate gives the principal.
A thread accepts (`server.acceptor`); idle connections are closed; a full `request_queue` pauses the reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from insync import limits
from insync.protocol.codec import (
    API_VERSIONS_KEY,
    Buffer,
    DecodedRequest,
    MalformedRequest,
    SupportedVersions,
    UnsupportedRequest,
    decode_request,
    encode_response_parts,
)
from insync.protocol.framing import FrameDecoder, FrameError
from insync.security.listeners import Endpoint
from insync.security.ssl_principal import NoRuleApplies
from insync.server.acceptor import Acceptor, ConnectionQuotas, listening_socket
from insync.server.request_queue import RequestQueue, Ticket
from insync.server.session import Session
from insync.server.tls import TlsServer

log = logging.getLogger("insync.server")

READ_CHUNK_BYTES = 256 * 1024
LISTEN_BACKLOG_SIZE = 50  # socket.listen.backlog.size's default
JOIN_PARTS_MAX_BYTES = 64 * 1024  # answers up to this are copied into one write
CONNECTIONS_MAX_IDLE_MS = 600_000  # connections.max.idle.ms's default
IDLE_CHECK_MAX_S = 1.0  # how often idle connections are looked for, at most (a quarter of the idle time if shorter)


class Dispatcher(Protocol):
    """What the listener needs from the broker: the version table and one coroutine per request."""

    def supported_versions(self) -> SupportedVersions: ...

    def handle(self, request: DecodedRequest, session: Session) -> Awaitable[Any | None]:
        """The kio response body, or None when no response is sent (Produce with acks=0)."""
        ...

    def unsupported_response(self, api_key: int, api_version: int) -> Any | None:
        """The body answering a request outside the table with error 35: ApiVersions v0 listing the table
        (REFERENCE 13), another API's own response; None closes the connection."""
        ...


class CloseAfter(FrameError):
    """Ends the connection once `parts`, the answer that says why, are written (a failed SASL exchange)."""

    def __init__(self, reason: str, parts: list[Buffer]) -> None:
        super().__init__(reason)
        self.parts = parts


class ConnectionGate(Protocol):
    """A connection's SASL authentication (`server.sasl_gate`): it answers a frame itself (the parts of a
    response, or a FrameError that closes the connection, a `CloseAfter` once its answer is written), or None to
    let the dispatcher have it."""

    def screen(self, payload: bytes) -> list[Buffer] | FrameError | None: ...


# A SASL listener's gate for each connection: (its session, whose principal the gate sets, its frame decoder)
GateFactory = Callable[[Session, FrameDecoder], ConnectionGate]


class Listener:
    def __init__(self, dispatcher: Dispatcher, host: str, port: int, max_request_bytes: int,
                 send_buffer_bytes: int = -1, *, name: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT",
                 tls: TlsServer | None = None, gate: GateFactory | None = None,
                 backlog: int = LISTEN_BACKLOG_SIZE, quotas: ConnectionQuotas | None = None,
                 protected: bool = False, idle_ms: int = CONNECTIONS_MAX_IDLE_MS,
                 queue: RequestQueue | None = None) -> None:
        """`quotas`: the node's, shared by its listeners (None: no limits); `protected`: the inter-broker
        listener, which accepts beyond `max.connections` as Kafka's does; `idle_ms`: connections.max.idle.ms;
        `queue`: the node's request queue, shared by its listeners (None: one of Kafka's default size)."""
        assert max_request_bytes > 0 and send_buffer_bytes >= -1 and backlog >= 1 and idle_ms > 0
        assert (tls is not None) == security_protocol.endswith("SSL"), (security_protocol, tls)
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.name = name
        self.security_protocol = security_protocol
        self.tls = tls
        self.gate = gate
        self.max_request_bytes = max_request_bytes
        self.send_buffer_bytes = send_buffer_bytes
        self.backlog = backlog
        self.quotas = quotas or ConnectionQuotas()
        self.queue = queue or RequestQueue()
        self.protected = protected
        self._acceptor: Acceptor | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # connections with a request being handled
        self.idle_s = idle_ms / 1000
        # each connection's last activity (monotonic s), the longest idle first: the reaper looks only at the front
        self._last_active: OrderedDict[asyncio.Task[None], float] = OrderedDict()
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = False
        self.ready = asyncio.Event()

    async def start(self) -> None:
        sock = listening_socket(self.host, self.port, self.backlog)
        self.port = sock.getsockname()[1]
        self._acceptor = Acceptor(sock, self.backlog, self.quotas, self.protected, asyncio.get_running_loop(),
                                  self._handed_over)
        self._acceptor.start()
        self._reaper = asyncio.create_task(self._close_idle())
        self.ready.set()
        log.info("Listening on %s", self.endpoint)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.name, self.host, self.port, self.security_protocol)

    async def stop(self, deadline_s: float) -> None:
        """Stop accepting; close idle connections at once; give requests in flight until the deadline; then
        cancel what is left."""
        self._stopping = True
        if self._reaper is not None:
            self._reaper.cancel()
        if self._acceptor is not None:
            await asyncio.to_thread(self._acceptor.stop)
        for task in self._connections - self._busy:
            task.cancel()
        pending = set(self._connections)
        if pending:
            _, still_running = await asyncio.wait(pending, timeout=deadline_s)
            for task in still_running:
                task.cancel()
            if still_running:
                await asyncio.wait(still_running, timeout=1.0)

    def _handed_over(self, batch: list[tuple[int, str]]) -> None:
        """On the loop: connections the acceptor admitted, each a descriptor and its peer's IP, to be served."""
        loop = asyncio.get_running_loop()
        for fd, ip in batch:
            sock = socket.socket(fileno=fd)
            if self._stopping:
                sock.close()
                self.quotas.release(ip)
                continue
            task = loop.create_task(self._accept(sock, ip))
            self._connections.add(task)

    async def _accept(self, sock: socket.socket, ip: str) -> None:
        task = asyncio.current_task()
        assert task is not None and task in self._connections
        try:
            reader, writer = await self._streams(sock)
        except BaseException as exc:
            self._connections.discard(task)
            self.quotas.release(ip)
            sock.close()
            if isinstance(exc, OSError):
                return  # the client went away before its transport was made
            raise
        self._touch(task)
        try:
            await self._serve_connection(reader, writer)
        finally:
            self._connections.discard(task)
            self._last_active.pop(task, None)
            self.quotas.release(ip)

    def _touch(self, connection: asyncio.Task[None]) -> None:
        """A request was read in full or an answer written on `connection`: its idle time starts again."""
        if connection in self._connections:
            self._last_active[connection] = time.monotonic()
            self._last_active.move_to_end(connection)

    async def _close_idle(self) -> None:
        """Close connections idle for `idle_s` with nothing in flight, as Kafka's Selector does. Idle here is no
        request read in full and no answer written: Kafka counts any bytes as activity, so a client trickling a
        frame a byte at a time would hold its connection for good. One in flight leaves the order; its answer
        puts it back."""
        interval_s = min(self.idle_s / 4, IDLE_CHECK_MAX_S)
        while not self._stopping:  # bounded: stop() cancels it
            await asyncio.sleep(interval_s)
            horizon = time.monotonic() - self.idle_s
            for _ in range(len(self._last_active)):  # bounded: each turn removes one
                connection, since = next(iter(self._last_active.items()))
                if since > horizon:
                    break
                del self._last_active[connection]
                if connection not in self._busy:
                    log.debug("Closing a connection idle for %.0f ms", (time.monotonic() - since) * 1000)
                    connection.cancel()

    async def _streams(self, sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """`sock` as a stream pair. A TLS listener stops the reading as the transport is made, before anything is
        read, so the client's first bytes (its ClientHello) reach the TLS handshake (`start_tls`), not the
        plaintext stream. (asyncio's own TLS server would handshake before the listener sees the connection, and
        fail it without a word.)"""
        made: list[asyncio.StreamWriter] = []

        def connection_made(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if self.tls is not None:
                transport = writer.transport
                assert isinstance(transport, asyncio.ReadTransport)  # a socket transport reads and writes
                transport.pause_reading()
            made.append(writer)

        reader = asyncio.StreamReader(limit=READ_CHUNK_BYTES)
        await asyncio.get_running_loop().connect_accepted_socket(
            functools.partial(asyncio.StreamReaderProtocol, reader, connection_made), sock)
        assert len(made) == 1, "the protocol saw its connection made"
        return reader, made[0]

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer_name(writer)
        try:
            set_send_buffer(writer.get_extra_info("socket"), self.send_buffer_bytes)
            session = Session(peer, self.endpoint)
            if self.tls is not None and not await self._handshake(writer, session):
                return
            await self._serve(reader, writer, session)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # idle, or shutdown past its deadline: the connection just closes
        except FrameError as exc:
            log.warning("Closing connection from %s: %s", peer, exc)
        except Exception:
            # A bug in a handler must cost one connection, never the broker.
            log.exception("Error handling a request from %s; closing the connection", peer)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handshake(self, writer: asyncio.StreamWriter, session: Session) -> bool:
        """TLS on an accepted connection, and the principal its certificate gives; False (logged) when it fails."""
        assert self.tls is not None
        try:
            await asyncio.wait_for(writer.start_tls(self.tls.context), self.tls.handshake_timeout_s)
            session.principal = self.tls.principal(writer.get_extra_info("ssl_object"))
            return True
        except TimeoutError:
            reason = f"SSL handshake not completed in {self.tls.handshake_timeout_s * 1000:.0f} ms"
        except (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError):
            # The peer went away without a TLS error of its own: a port probe (`cluster up` waits for the port so)
            # or a client giving up. Nothing was refused, so no warning.
            log.info("Connection from /%s closed during its TLS handshake (listener %s)", session.peer, self.name)
            return False
        except (ssl.SSLError, ConnectionError, OSError) as exc:
            reason = f"SSL handshake failed: {exc or type(exc).__name__}"
        except NoRuleApplies as exc:
            reason = str(exc)
        log.warning("Failed authentication with /%s (listener %s) (%s)", session.peer, self.name, reason)
        return False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Session) -> None:
        """Read frames and start handling each as it arrives; `_write_in_order` answers them in request order."""
        decoder = FrameDecoder(self.max_request_bytes)
        gate = self.gate(session, decoder) if self.gate is not None else None
        in_order: asyncio.Queue[_Answer | None] = asyncio.Queue()  # bounded by `slots`
        slots = asyncio.Semaphore(limits.INFLIGHT_REQUESTS_PER_CONNECTION_MAX)
        connection = asyncio.current_task()
        assert connection is not None
        responder = asyncio.create_task(self._write_in_order(connection, in_order, slots, writer))
        try:
            reading = True
            while reading and not self._stopping and not responder.done():
                data = await reader.read(READ_CHUNK_BYTES)
                reading = bool(data)
                for payload in decoder.feed(data):
                    self._touch(connection)
                    await slots.acquire()  # none free: the reading stops, back-pressure on the client
                    ticket = self.queue.try_enter(len(payload)) or await self.queue.enter(len(payload))
                    screened = gate.screen(payload) if gate is not None else None
                    answer = self._start(payload, session, ticket) if screened is None else screened
                    if not isinstance(answer, asyncio.Task):
                        ticket.leave()
                    self._busy.add(connection)
                    in_order.put_nowait(answer)
                    if isinstance(answer, FrameError) or self._stopping:
                        reading = False
                        break
        finally:
            if not responder.done():
                in_order.put_nowait(None)
            try:
                await responder
            finally:
                _cancel_unanswered(in_order)

    def _start(self, payload: bytes, session: Session, ticket: Ticket) -> _Answer:
        """Decode at once (a bad frame stops the reading) and start the handler, so handlers begin in arrival order
        (asyncio runs new tasks first come, first served) and a produce's append happens before the next's."""
        try:
            request = decode_request(payload, self.dispatcher.supported_versions())
        except UnsupportedRequest as exc:
            body = self.dispatcher.unsupported_response(exc.api_key, exc.api_version)
            if body is None:
                return FrameError(f"{exc} (correlation id {exc.correlation_id})")
            version = 0 if exc.api_key == API_VERSIONS_KEY else exc.api_version
            return encode_response_parts(exc.api_key, version, exc.correlation_id, body)
        except MalformedRequest as exc:
            return FrameError(f"malformed request: {exc}")
        task = asyncio.create_task(self._respond(request, session, ticket))
        task.add_done_callback(ticket.leave)  # a handler cancelled before its first step
        return task

    async def _respond(self, request: DecodedRequest, session: Session, ticket: Ticket) -> list[Buffer] | None:
        ticket.leave()  # started: out of the request queue
        body = await self.dispatcher.handle(request, session)
        if body is None:
            return None
        try:
            return encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
        except Exception as exc:  # a handler's bug: say which answer could not be written
            raise RuntimeError(f"the answer to api {request.api_key} v{request.api_version} cannot be encoded: "
                               f"{exc!r}") from exc

    async def _write_in_order(self, connection: asyncio.Task[None], in_order: asyncio.Queue[_Answer | None],
                              slots: asyncio.Semaphore, writer: asyncio.StreamWriter) -> None:
        """Write each answer when it is ready, in request order; a bad frame closes the connection once what came
        before it is answered. While the listener stops, the connection closes once nothing is in flight; a
        handler's bug closes it at once (the reader, waiting for more requests, sees the end of the stream)."""
        try:
            while True:
                answer = await in_order.get()
                if answer is None:
                    return
                if isinstance(answer, FrameError):
                    if isinstance(answer, CloseAfter):
                        await _write_parts(writer, answer.parts)
                    raise answer
                response = await answer if isinstance(answer, asyncio.Task) else answer
                if response is not None:
                    await _write_parts(writer, response)
                self._touch(connection)  # an acks=0 produce has no answer, but its handling was activity
                slots.release()
                if in_order.empty():
                    self._busy.discard(connection)
                    if self._stopping:
                        writer.close()  # the reader sees the end of the stream; nothing was left unanswered
                        return
        except BaseException:
            writer.close()
            raise


_Answer = asyncio.Task[list[Buffer] | None] | list[Buffer] | FrameError


def _cancel_unanswered(in_order: asyncio.Queue[_Answer | None]) -> None:
    """The connection is going (peer gone, bad frame, a handler's bug): handlers still running lose their waiter."""
    while not in_order.empty():
        answer = in_order.get_nowait()
        if isinstance(answer, asyncio.Task):
            answer.cancel()


async def _write_parts(writer: asyncio.StreamWriter, parts: list[Buffer]) -> None:
    # The transport sends each write at once while its buffer is empty: one write per answer is one syscall and one
    # wake-up of the peer, where a write per part would hand it partial frames. Large answers skip the copy.
    if len(parts) > 1 and sum(len(part) for part in parts) <= JOIN_PARTS_MAX_BYTES:
        writer.write(b"".join(parts))
    else:
        for part in parts:
            writer.write(part)
    await writer.drain()


def set_send_buffer(sock: Any, size: int) -> None:
    """SO_SNDBUF `size` on `sock`; -1 leaves the OS's autotuned size."""
    if size >= 0 and sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)

