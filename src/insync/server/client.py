"""An asyncio Kafka connection for insync's own traffic: follower fetches, broker-to-controller RPCs, tools.

One `KafkaConnection` is one TCP connection to one node. Requests are pipelined: `request()` writes the frame
and awaits the response matched by correlation id, which a single reader task (cancelled in `close()`) delivers.
In-flight requests are bounded; each has a timeout; when the connection drops, every waiting request fails with
`ConnectionError` and the next `request()` reconnects. With an `ssl.SSLContext` it speaks TLS, checking the
server's host name when the context says so. With `SaslCredentials` each new connection authenticates first
(SaslHandshake v1, then SaslAuthenticate v2 with `security.sasl_client`'s tokens); a refusal is a
`ConnectionError` and the caller backs off. When the broker gives the session a lifetime
(`connections.max.reauth.ms`), the connection is replaced once the session is over and nothing is in flight,
where Kafka's clients re-authenticate on the same connection (KIP-368): either way no request is refused for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
import time
from typing import Any

from insync import limits
from insync.protocol.codec import decode_response, encode_request, request_key
from insync.security.sasl_client import SaslCredentials
from insync.wire import sasl_exchange

log = logging.getLogger("insync.client")

_SIZE = struct.Struct(">i")
RESPONSE_BYTES_MAX = 256 * 1024 * 1024


class KafkaConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "insync", connect_timeout_s: float = 5.0,
                 tls: ssl.SSLContext | None = None, sasl: SaslCredentials | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.sasl = sasl
        self._session_end_s: float | None = None  # when the broker's SASL session of this connection ends
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(limits.INFLIGHT_REQUESTS_PER_CONNECTION_MAX)
        self._connect_lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def request(self, body: Any, timeout_s: float = 30.0) -> Any:
        """Send a kio request body and return the kio response body."""
        async with self._slots:
            writer = await self._connect()
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = (*request_key(body), future)
            try:
                writer.write(encode_request(body, correlation_id, self.client_id))
                if writer.transport.get_write_buffer_size():
                    # The socket did not take it all: the send waits inside the deadline too, since a peer that
                    # stops reading (or a link that drops its ACKs) would hold an unbounded drain forever.
                    return await asyncio.wait_for(_sent_then_answered(writer, future), timeout_s)
                return await asyncio.wait_for(future, timeout_s)  # no task per request on the fetch path
            except TimeoutError:
                # As Kafka's NetworkClient, a timed-out request disconnects: a peer cut off by a network partition
                # (packets dropped, no reset) leaves a connection that would hold every later request as well, and
                # after the partition heals TCP's retransmission backoff takes many seconds to notice.
                if self._writer is writer:
                    log.info("Disconnecting from %s: request timed out after %.1f s", self.address, timeout_s)
                    self._drop(TimeoutError(f"request to {self.address} timed out"))
                raise
            finally:
                self._pending.pop(correlation_id, None)

    async def send_without_response(self, body: Any) -> None:
        """For Produce with acks=0, which Kafka never answers."""
        writer = await self._connect()
        writer.write(encode_request(body, next(self._correlation) & 0x7FFFFFFF, self.client_id))
        await writer.drain()

    async def close(self) -> None:
        task, self._reader_task = self._reader_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._drop(ConnectionError(f"connection to {self.address} closed"))

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._session_end_s is not None and time.monotonic() >= self._session_end_s and not self._pending:
                self._drop(ConnectionError(f"SASL session with {self.address} over"))
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self.tls,
                                        server_hostname=self.host if self.tls is not None else None),
                timeout=self.connect_timeout_s)
            if self.sasl is not None:
                try:
                    await asyncio.wait_for(self._authenticate(reader, writer, self.sasl), self.connect_timeout_s)
                except asyncio.IncompleteReadError:
                    writer.close()
                    raise ConnectionError(f"{self.address} closed the connection during SASL authentication") from None
                except BaseException:
                    writer.close()
                    raise
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer), name=f"kafka-read-{self.address}")
            return writer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            credentials: SaslCredentials) -> None:
        """The SASL exchange (wire.sasl_exchange) on a new connection, before anything else is sent on it; the
        connection is replaced before the session lifetime the broker granted is over."""
        steps = sasl_exchange.exchange(credentials)
        try:
            body = next(steps)
            for _ in range(sasl_exchange.SASL_ROUNDS_MAX + 1):  # bounded: the handshake and the rounds
                body = steps.send(await self._exchange(reader, writer, body))
        except StopIteration as done:
            lifetime_s = float(done.value)
            self._session_end_s = time.monotonic() + lifetime_s * 0.9 if lifetime_s > 0 else None
            return
        except sasl_exchange.SaslRefused as exc:
            log.warning("%s %s", self.address, exc)
            raise ConnectionError(f"{self.address} {exc}") from None
        raise AssertionError("the exchange bounds its own rounds")

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: Any) -> Any:
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        writer.write(encode_request(body, correlation_id, self.client_id))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        if not 4 <= size <= RESPONSE_BYTES_MAX:
            raise ConnectionError(f"response of {size} bytes from {self.address}")
        answered, response = decode_response(*request_key(body), await reader.readexactly(size))
        if answered != correlation_id:
            raise ConnectionError(f"{self.address} answered correlation id {answered}, not {correlation_id}")
        return response

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: BaseException = ConnectionError(f"connection to {self.address} lost")
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                if not 4 <= size <= RESPONSE_BYTES_MAX:
                    raise ConnectionError(f"response of {size} bytes from {self.address}")
                payload = await reader.readexactly(size)
                (correlation_id,) = _SIZE.unpack_from(payload, 0)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue  # its requester timed out
                api_key, api_version, future = entry
                if not future.done():
                    future.set_result(decode_response(api_key, api_version, payload)[1])
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            error = ConnectionError(f"connection to {self.address} lost: {exc}")
        except Exception as exc:  # an undecodable response: fail the waiters, drop the connection
            log.warning("Bad response from %s: %r", self.address, exc)
            error = ConnectionError(f"bad response from {self.address}: {exc!r}")
        finally:
            if self._writer is writer:  # not a connection already dropped (a timeout) and replaced since
                self._drop(error)

    def _drop(self, error: BaseException) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        for _, _, future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()


async def _sent_then_answered(writer: asyncio.StreamWriter, answer: asyncio.Future[Any]) -> Any:
    await writer.drain()
    return await answer


class FailoverConnection:
    """A connection to whichever of several nodes answers: the controller voters of `controller.quorum.voters`.
    Only the active controller listens (standbys campaign in ZooKeeper without a listener), so a request that
    fails to connect, loses its connection or times out moves on to the next voter; the caller retries as it would
    after any connection error. A refused connection (nobody listens there: a dead or standby voter) means the
    request was never sent, so it goes to the next voter at once, each voter tried once a call: a forward right
    after a failover reaches the new controller instead of failing. With one voter this is a `KafkaConnection`."""

    def __init__(self, addresses: list[tuple[str, int]], *, client_id: str = "insync",
                 tls: ssl.SSLContext | None = None, sasl: SaslCredentials | None = None) -> None:
        assert addresses, "at least one address"
        self._connections = [KafkaConnection(host, port, client_id=client_id, tls=tls, sasl=sasl)
                             for host, port in addresses]
        self._current = 0

    @property
    def address(self) -> str:
        return self._connections[self._current].address

    async def request(self, body: Any, timeout_s: float = 30.0) -> Any:
        for attempt in range(len(self._connections)):  # bounded: each voter once
            index = self._current
            try:
                return await self._connections[index].request(body, timeout_s)
            except (ConnectionError, OSError, TimeoutError) as exc:
                if len(self._connections) > 1 and self._current == index:
                    await self._connections[index].close()
                    self._current = (index + 1) % len(self._connections)
                    log.debug("Controller %s did not answer; trying %s next", self._connections[index].address,
                              self.address)
                if not isinstance(exc, ConnectionRefusedError) or attempt == len(self._connections) - 1:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()
