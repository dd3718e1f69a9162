"""Replaying recorded client traffic (traffic_proxy.py) to other clusters, and comparing what they answer.

Each recorded connection becomes one connection per cluster, its requests sent in their recorded order with
their recorded correlation ids. Across connections the replay keeps the order the clients saw: a request goes
out only once every response its client had received before sending it has come back from the cluster being
replayed (the recording's event numbers say which), so a SyncGroup follows its JoinGroup's answer while
pipelined and long-polling requests still overlap as they did.

Only what each cluster assigns itself is rewritten, learned from that cluster's own earlier answers paired with
the recorded ones: topic ids (by topic name), consumer group member ids and generations (per group), producer
ids and epochs (patched into Produce batches, their CRC recomputed), and fetch session ids. A request that
needs none of this goes out as the very bytes the client wrote. After a CreateTopics or DeleteTopics answer the
replay waits until that cluster's own metadata shows the change: Kafka's broker learns it from the controller
shortly after answering, and a client asking at once would otherwise see a race, not a difference."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c
from differential import Connection, request
from traffic_proxy import ALL_VERSIONS, Exchange

from insync.protocol.codec import decode_request, decode_response, encode_request
from insync.waiting import wait_until

PRODUCE, FETCH, JOIN_GROUP, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID = 0, 1, 11, 19, 20, 22
UNKNOWN_TOPIC_OR_PARTITION = 3
SETTLE_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 30.0
REPLAY_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0
CLOSED = "<connection closed>"
NO_ANSWER = "<no answer expected>"
# A request the recording has after one its connection was closed on: the client would have reconnected and
# sent something else, so it is not compared.
AFTER_CLOSE = "<after its connection closed>"
GENERATION_FIELDS = frozenset({"generation_id", "generation_id_or_member_epoch"})
# v2 batch header offsets (Kafka's DefaultRecordBatch): CRC, the start of what it covers, producer id and epoch.
_CRC_AT, _ATTRIBUTES_AT, _PRODUCER_ID_AT, _PRODUCER_EPOCH_AT, _BATCH_HEADER_BYTES = 17, 21, 43, 51, 61
_SIZE = struct.Struct(">i")


def recorded_answer(exchange: Exchange) -> Any:
    """The recorded response body, or None when none was recorded."""
    if exchange.response is None:
        return None
    return decode_response(exchange.api_key, exchange.api_version, exchange.response)[1]


def topic_ids(body: Any) -> Iterator[tuple[str, uuid.UUID]]:
    """(name, id) of every entity in `body` that names a topic and carries its id."""
    if dataclasses.is_dataclass(body) and not isinstance(body, type):
        topic_id = getattr(body, "topic_id", None)
        name = getattr(body, "name", None) or getattr(body, "topic", None)
        if isinstance(topic_id, uuid.UUID) and topic_id.int and isinstance(name, str):
            yield name, topic_id
        for item in dataclasses.fields(body):
            yield from topic_ids(getattr(body, item.name))
    elif isinstance(body, tuple):
        for item in body:
            yield from topic_ids(item)


def rewritten(body: Any, swap: Callable[[str, Any], Any]) -> Any:
    """`body` with every field value `swap(name, value)` changes replaced, at any depth; `body` itself if none."""
    if dataclasses.is_dataclass(body) and not isinstance(body, type):
        changes = {}
        for item in dataclasses.fields(body):
            old = getattr(body, item.name)
            new = swap(item.name, old)
            if new is old:
                new = rewritten(old, swap)
            if new is not old:
                changes[item.name] = new
        return dataclasses.replace(body, **changes) if changes else body
    if isinstance(body, tuple):
        items = tuple(rewritten(item, swap) for item in body)
        return items if any(a is not b for a, b in zip(items, body, strict=True)) else body
    return body


def with_producer(records: bytes, producers: dict[int, tuple[int, int]]) -> bytes:
    """`records` with each batch's producer id and epoch replaced per `producers` (recorded id -> this side's id
    and epoch), each changed batch's CRC recomputed; the bytes unchanged when no batch needs it."""
    out = bytearray(records)
    pos = 0
    while pos + _BATCH_HEADER_BYTES <= len(out):  # bounded: advances by a whole batch
        size = 12 + _SIZE.unpack_from(out, pos + 8)[0]
        (producer_id,) = struct.unpack_from(">q", out, pos + _PRODUCER_ID_AT)
        if producer_id in producers:
            struct.pack_into(">qh", out, pos + _PRODUCER_ID_AT, *producers[producer_id])
            struct.pack_into(">I", out, pos + _CRC_AT, crc32c(out[pos + _ATTRIBUTES_AT:pos + size]))
        pos += size
    return records if out == records else bytes(out)


@dataclass
class SideIds:
    """What one cluster assigned, keyed by what the recorded cluster assigned in the same exchange."""

    recorded_topics: dict[uuid.UUID, str]  # the recorded cluster's topic ids -> names
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)  # name -> this side's id
    member_ids: dict[str, str] = field(default_factory=dict)
    generations: dict[tuple[str, int], int] = field(default_factory=dict)  # (group, recorded) -> this side's
    producers: dict[int, tuple[int, int]] = field(default_factory=dict)  # recorded id -> (id, epoch)
    sessions: dict[int, int] = field(default_factory=dict)

    def request_frame(self, exchange: Exchange) -> bytes:
        """The frame to send for `exchange`: the recorded bytes, or the request re-encoded where it names ids
        this side assigned differently."""
        decoded = decode_request(exchange.request, ALL_VERSIONS)
        group = getattr(decoded.body, "group_id", None)
        body = rewritten(decoded.body, lambda name, value: self._swap(decoded.api_key, group, name, value))
        if body is decoded.body:
            return _SIZE.pack(len(exchange.request)) + exchange.request
        return encode_request(body, decoded.correlation_id, decoded.client_id)

    def _swap(self, api_key: int, group: str | None, name: str, value: Any) -> Any:
        if name == "topic_id" and isinstance(value, uuid.UUID) and value in self.recorded_topics:
            return self.topic_ids.get(self.recorded_topics[value], value)
        if name == "member_id" and isinstance(value, str):
            return self.member_ids.get(value, value)
        if name in GENERATION_FIELDS and group is not None:
            return self.generations.get((group, value), value)
        if name == "session_id" and api_key == FETCH:
            return self.sessions.get(value, value)
        if name == "records" and api_key == PRODUCE and value:
            return with_producer(value, self.producers)
        return value

    def learn(self, exchange: Exchange, recorded: Any, answer: Any) -> None:
        """Pair what this side answered with what the recorded cluster answered to the same request."""
        self.topic_ids.update(topic_ids(answer))
        if recorded is None:
            return
        if exchange.api_key == JOIN_GROUP:
            group = decode_request(exchange.request, ALL_VERSIONS).body.group_id
            for name in ("member_id", "leader"):
                if getattr(recorded, name) and getattr(answer, name):
                    self.member_ids[getattr(recorded, name)] = getattr(answer, name)
            if recorded.generation_id >= 0 and answer.generation_id >= 0:
                self.generations[(group, recorded.generation_id)] = answer.generation_id
        elif exchange.api_key == INIT_PRODUCER_ID and recorded.producer_id >= 0 and answer.producer_id >= 0:
            self.producers[recorded.producer_id] = (answer.producer_id, answer.producer_epoch)
        elif exchange.api_key == FETCH and recorded.session_id and answer.session_id:
            self.sessions[recorded.session_id] = answer.session_id


class SideReplay:
    """The whole recording replayed to one broker; `answers[i]` is what it answered to `exchanges[i]`."""

    def __init__(self, address: str, exchanges: list[Exchange], ids: SideIds) -> None:
        self.address = address
        self.exchanges = exchanges
        self.ids = ids
        self.answers: list[Any] = [CLOSED] * len(exchanges)
        answered = sorted((e.answered_at, i) for i, e in enumerate(exchanges) if e.answered_at is not None)
        self._answered_order = [i for _, i in answered]
        times = [t for t, _ in answered]
        # How many of the recorded answers (in the order they came) the client had before sending each request.
        self._needed = [bisect.bisect_left(times, e.sent_at) for e in exchanges]
        self._done = [False] * len(exchanges)
        self._prefix = 0
        self._progress = asyncio.Condition()

    async def run(self) -> None:
        by_connection: dict[int, list[int]] = {}
        for i, exchange in enumerate(self.exchanges):
            by_connection.setdefault(exchange.connection, []).append(i)
        await asyncio.gather(*(self._connection(indices) for indices in by_connection.values()))

    async def _complete(self, i: int, answer: Any) -> None:
        self.answers[i], self._done[i] = answer, True
        async with self._progress:
            while self._prefix < len(self._answered_order) and self._done[self._answered_order[self._prefix]]:
                self._prefix += 1  # bounded by the number of exchanges
            self._progress.notify_all()

    async def _connection(self, indices: list[int]) -> None:
        host, port = self.address.rsplit(":", 1)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), CONNECT_TIMEOUT_S)
        in_flight: asyncio.Queue[int | None] = asyncio.Queue()
        responses = asyncio.create_task(self._responses(reader, in_flight))
        try:
            for i in indices:
                async with self._progress:
                    await self._progress.wait_for(lambda i=i: self._prefix >= self._needed[i])
                if responses.done():  # the broker closed the connection
                    await self._complete(i, AFTER_CLOSE)
                    continue
                try:
                    writer.write(self.ids.request_frame(self.exchanges[i]))
                    await writer.drain()
                except (OSError, ConnectionError):
                    await self._complete(i, CLOSED)
                    continue
                if self.exchanges[i].expects_answer:
                    in_flight.put_nowait(i)
                else:
                    await self._complete(i, NO_ANSWER)
            in_flight.put_nowait(None)
            await responses
        finally:
            responses.cancel()
            writer.close()

    async def _responses(self, reader: asyncio.StreamReader, in_flight: asyncio.Queue[int | None]) -> None:
        while (i := await in_flight.get()) is not None:  # bounded: one pass per request sent
            exchange = self.exchanges[i]
            try:
                size = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), ANSWER_TIMEOUT_S))[0]
                payload = await asyncio.wait_for(reader.readexactly(size), ANSWER_TIMEOUT_S)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                await self._complete(i, CLOSED)
                while not in_flight.empty():  # bounded: what is queued now; later requests see `done()`
                    if (rest := in_flight.get_nowait()) is not None:
                        await self._complete(rest, AFTER_CLOSE)
                return
            answer = decode_response(exchange.api_key, exchange.api_version, payload)[1]
            self.ids.learn(exchange, recorded_answer(exchange), answer)
            if exchange.api_key in (CREATE_TOPICS, DELETE_TOPICS):
                await asyncio.to_thread(settled, self.address, exchange.api_key == CREATE_TOPICS, answer)
            await self._complete(i, answer)


def settled(address: str, created: bool, answer: Any) -> None:
    """Wait until the broker's metadata shows the topics a CreateTopics created (a leader for each partition) or
    a DeleteTopics deleted (unknown): those its answer says succeeded."""
    names = [t.name for t in (answer.topics if created else answer.responses) if t.name and not int(t.error_code)]
    if not names:
        return
    connection = Connection(address)

    def shown() -> bool:
        answer = connection.send(request(3, 12, topics=[{"name": name} for name in names]))
        return all((int(t.error_code) == 0 and all(p.leader_id >= 0 for p in t.partitions)) if created else
                   int(t.error_code) == UNKNOWN_TOPIC_OR_PARTITION for t in answer.topics)

    try:
        wait_until(shown, SETTLE_TIMEOUT_S, f"{address}: the metadata after {names}", interval_s=0.1)
    finally:
        connection.close()


def replay(exchanges: list[Exchange], sides: dict[str, tuple[str, SideIds]]) -> dict[str, list[Any]]:
    """Every side's answers to the recording (side name -> answers in the recording's order), replayed to all
    sides at once."""
    replays = {name: SideReplay(address, exchanges, ids) for name, (address, ids) in sides.items()}

    async def everything() -> None:
        await asyncio.wait_for(asyncio.gather(*(r.run() for r in replays.values())), REPLAY_TIMEOUT_S)

    asyncio.run(everything())
    return {name: r.answers for name, r in replays.items()}
