"""A node's request queue: requests read and decoded whose handler has not started yet, bounded as Kafka bounds its
request channel, by `queued.max.requests` and `queued.max.request.bytes` (-1: no bound on bytes; as Kafka's
non-strict memory pool, a request is let in while any bytes are left). A connection's reader waits for room before
it hands a request on, so a burst over many connections stops the reading instead of growing the queue; waiting
readers get room first come, first served. A handler leaves the queue as it starts (asyncio starts it at the
loop's next turn), and a handler cancelled before it started leaves it too.
"""

from __future__ import annotations

import asyncio
from collections import deque

QUEUED_MAX_REQUESTS = 500  # queued.max.requests's default
QUEUED_MAX_REQUEST_BYTES = -1  # queued.max.request.bytes's default: no bound


class Ticket:
    """One request's place in the queue; `leave` gives it back, once, however often it is called."""

    __slots__ = ("nbytes", "queue")

    def __init__(self, queue: RequestQueue, nbytes: int) -> None:
        self.queue: RequestQueue | None = queue
        self.nbytes = nbytes

    def leave(self, _task: object = None) -> None:
        """Also a task's done callback, for a handler cancelled before its first step."""
        if self.queue is not None:
            queue, self.queue = self.queue, None
            queue.release(self.nbytes)


class RequestQueue:
    def __init__(self, max_requests: int = QUEUED_MAX_REQUESTS, max_bytes: int = QUEUED_MAX_REQUEST_BYTES) -> None:
        assert max_requests >= 1 and (max_bytes == -1 or max_bytes >= 1), (max_requests, max_bytes)
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.size = 0
        self.bytes = 0
        self.high_water = 0  # the largest size seen, for tests and operators
        self._waiting: deque[tuple[asyncio.Future[None], int]] = deque()

    def try_enter(self, nbytes: int) -> Ticket | None:
        """A ticket at once when there is room and nobody waits before this request; None otherwise."""
        if self._waiting or not self._has_room():
            return None
        return self._admit(nbytes)

    async def enter(self, nbytes: int) -> Ticket:
        """A ticket once there is room, after the readers that waited before this one."""
        ticket = self.try_enter(nbytes)
        if ticket is not None:
            return ticket
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append((waiter, nbytes))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # room was given just before the cancellation: hand it on
                self.release(nbytes)
            elif (waiter, nbytes) in self._waiting:
                self._waiting.remove((waiter, nbytes))
            raise
        return Ticket(self, nbytes)  # `_wake` counted it in

    def _has_room(self) -> bool:
        return self.size < self.max_requests and (self.max_bytes < 0 or self.bytes < self.max_bytes)

    def _admit(self, nbytes: int) -> Ticket:
        self._count_in(nbytes)
        return Ticket(self, nbytes)

    def _count_in(self, nbytes: int) -> None:
        self.size += 1
        self.bytes += nbytes
        self.high_water = max(self.high_water, self.size)

    def release(self, nbytes: int) -> None:
        self.size -= 1
        self.bytes -= nbytes
        assert self.size >= 0 and self.bytes >= 0, (self.size, self.bytes)
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self._has_room():
            waiter, nbytes = self._waiting.popleft()
            if not waiter.done():
                self._count_in(nbytes)
                waiter.set_result(None)
