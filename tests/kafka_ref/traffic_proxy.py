"""A recording proxy: a TCP proxy on 127.0.0.1 in front of one broker that keeps every request frame a client
sends and the response to it, in order, per connection.

The broker advertises the proxy's address (`advertised.listeners`), so a client that learns the broker from
Metadata or FindCoordinator keeps talking through the proxy. Frames are forwarded as they are; each request is
stamped with a global event number when it passes, and its response with another when it comes back, so a
replay can keep the order the clients saw: a request is sent only after every response the client had before
sending it. Only connections opened while a `workload` is named are kept (cluster set-up traffic is not), and the
recording is bounded in exchanges and bytes: past a bound the proxy keeps forwarding and marks it `truncated`.
Responses are matched to requests in order, as Kafka answers them; a Produce with acks=0 gets no answer."""

from __future__ import annotations

import asyncio
import collections
import struct
import threading
from dataclasses import dataclass, field

from insync.protocol.codec import decode_request, peek
from insync.protocol.framing import FrameDecoder

EXCHANGES_MAX = 20_000
RECORDED_BYTES_MAX = 64 << 20
FRAME_BYTES_MAX = 100 << 20
READ_BYTES = 1 << 16
START_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
PRODUCE_KEY = 0
ALL_VERSIONS = {key: (0, 0x7FFF) for key in range(0x7FFF)}  # decode whatever a client sends; the broker judges


@dataclass(slots=True)
class Exchange:
    """One request and the response to it (None while unanswered, or when none came: acks=0, a closed link)."""

    connection: int
    workload: str  # what the client was doing (the recording's label when the connection opened)
    request: bytes  # the frame without its size prefix: header and body as the client wrote them
    sent_at: int  # global event number when the request passed the proxy
    answered_at: int | None = None
    response: bytes | None = None  # without its size prefix

    @property
    def api_key(self) -> int:
        return peek(self.request)[0]

    @property
    def api_version(self) -> int:
        return peek(self.request)[1]

    @property
    def expects_answer(self) -> bool:
        if self.api_key != PRODUCE_KEY:
            return True
        return int(decode_request(self.request, ALL_VERSIONS).body.acks) != 0


@dataclass
class Recording:
    exchanges: list[Exchange] = field(default_factory=list)
    connections: int = 0
    recorded_bytes: int = 0
    truncated: bool = False


class RecordingProxy:
    """The proxy in its own thread and event loop; `upstream` is set once the broker's address is known."""

    def __init__(self) -> None:
        self.upstream: str | None = None
        self.workload: str | None = None  # connections opened while it is set are recorded, with it as label
        self.recording = Recording()
        self.port = 0
        self._events = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recording-proxy", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RecordingProxy:
        self._thread.start()
        assert self._ready.wait(START_TIMEOUT_S), "the recording proxy did not start"
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)
        assert not self._thread.is_alive(), "the recording proxy did not stop"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            self._loop.run_until_complete(self._server.wait_closed())
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.close()

    def _tick(self) -> int:
        self._events += 1
        return self._events

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        connection = None
        workload = self.workload
        if workload is not None:
            self.recording.connections += 1
            connection = self.recording.connections
        try:
            if self.upstream is None:
                return
            host, port = self.upstream.rsplit(":", 1)
            broker_in, broker_out = await asyncio.wait_for(asyncio.open_connection(host, int(port)),
                                                           CONNECT_TIMEOUT_S)
            try:
                pending: collections.deque[Exchange | None] = collections.deque()
                await asyncio.gather(self._requests(connection, workload, client_in, broker_out, pending),
                                     self._responses(broker_in, client_out, pending))
            finally:
                broker_out.close()
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # either side hung up: the client sees its link closed, as it would without the proxy
        finally:
            client_out.close()

    async def _requests(self, connection: int | None, workload: str | None, client_in: asyncio.StreamReader,
                        broker_out: asyncio.StreamWriter, pending: collections.deque[Exchange | None]) -> None:
        decoder = FrameDecoder(FRAME_BYTES_MAX)
        try:
            while data := await client_in.read(READ_BYTES):  # bounded: ends when the client hangs up
                for frame in decoder.feed(data):
                    exchange = self._keep(connection, workload, frame)
                    if exchange is None or exchange.expects_answer:
                        pending.append(exchange)
                    broker_out.write(struct.pack(">i", len(frame)) + frame)
                await broker_out.drain()
        finally:
            broker_out.close()

    def _keep(self, connection: int | None, workload: str | None, frame: bytes) -> Exchange | None:
        recording = self.recording
        if connection is None or workload is None or recording.truncated:
            return None
        if len(recording.exchanges) >= EXCHANGES_MAX or recording.recorded_bytes + len(frame) > RECORDED_BYTES_MAX:
            recording.truncated = True
            return None
        exchange = Exchange(connection, workload, frame, self._tick())
        recording.exchanges.append(exchange)
        recording.recorded_bytes += len(frame)
        return exchange

    async def _responses(self, broker_in: asyncio.StreamReader, client_out: asyncio.StreamWriter,
                         pending: collections.deque[Exchange | None]) -> None:
        decoder = FrameDecoder(FRAME_BYTES_MAX, 0)
        while data := await broker_in.read(READ_BYTES):  # bounded: ends when the broker hangs up
            for frame in decoder.feed(data):
                exchange = pending.popleft() if pending else None
                if exchange is not None and not self.recording.truncated:
                    exchange.response, exchange.answered_at = frame, self._tick()
                    self.recording.recorded_bytes += len(frame)
                client_out.write(struct.pack(">i", len(frame)) + frame)
            await client_out.drain()
        client_out.close()
