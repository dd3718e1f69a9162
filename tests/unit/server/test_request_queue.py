"""The node's request queue (`queued.max.requests`, `queued.max.request.bytes`): room, waiting readers in order,
cancellation without leaks. A listener with a small queue: tests/unit/server/test_listener.py."""

from __future__ import annotations

import asyncio

import pytest

from insync.server.request_queue import RequestQueue

pytestmark = pytest.mark.timeout(20)


def test_requests_enter_while_there_is_room_and_wait_in_order_after() -> None:
    async def body() -> None:
        queue = RequestQueue(max_requests=2)
        first, second = queue.try_enter(10), queue.try_enter(10)
        assert first is not None and second is not None and queue.try_enter(10) is None
        entered: list[str] = []

        async def reader(name: str) -> None:
            ticket = await queue.enter(5)
            entered.append(name)
            ticket.leave()

        waiting = [asyncio.create_task(reader(n)) for n in ("a", "b", "c")]
        await asyncio.sleep(0)
        assert entered == [] and queue.size == 2
        first.leave()
        first.leave()  # a second leave gives nothing back
        await asyncio.gather(*waiting)
        assert entered == ["a", "b", "c"]
        assert (queue.size, queue.bytes, queue.high_water) == (1, 10, 2)
        second.leave()
        assert (queue.size, queue.bytes) == (0, 0)

    asyncio.run(body())


def test_a_reader_that_arrives_while_others_wait_queues_behind_them() -> None:
    async def body() -> None:
        queue = RequestQueue(max_requests=1)
        held = queue.try_enter(1)
        assert held is not None
        early = asyncio.create_task(queue.enter(1))
        await asyncio.sleep(0)
        held.leave()  # room for `early`, counted in before it runs
        assert queue.try_enter(1) is None
        (await early).leave()
        assert queue.try_enter(1) is not None

    asyncio.run(body())


def test_the_byte_bound_lets_a_request_in_while_any_bytes_are_left() -> None:
    async def body() -> None:
        queue = RequestQueue(max_requests=100, max_bytes=1000)
        big = queue.try_enter(900)
        assert big is not None
        over = queue.try_enter(500)  # 100 bytes were left: in, as Kafka's non-strict pool
        assert over is not None and queue.bytes == 1400
        assert queue.try_enter(1) is None
        big.leave()
        assert queue.bytes == 500 and queue.try_enter(1) is not None

    asyncio.run(body())


def test_a_cancelled_reader_leaks_no_room() -> None:
    async def body() -> None:
        queue = RequestQueue(max_requests=1)
        held = queue.try_enter(1)
        assert held is not None
        waiting = asyncio.create_task(queue.enter(1))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        held.leave()
        assert (queue.size, queue.bytes) == (0, 0)
        # granted, then cancelled before it ran: the room goes to the next reader
        held = queue.try_enter(1)
        assert held is not None
        granted, after = asyncio.create_task(queue.enter(1)), asyncio.create_task(queue.enter(1))
        await asyncio.sleep(0)
        held.leave()
        granted.cancel()
        await asyncio.gather(granted, return_exceptions=True)
        (await after).leave()
        assert (queue.size, queue.bytes) == (0, 0)

    asyncio.run(body())
