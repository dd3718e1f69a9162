"""A client connection as request handlers see it: where it comes from, the listener it came in on, and who it is.

The listener makes one `Session` per connection and hands it with every request. `principal` is the one field that
changes: ANONYMOUS until authentication says otherwise (a TLS client certificate at accept, SASL once its
exchange completes), then read by every handler (the authorizer, the logs). It is the same object for the
connection's whole life, so a handler holding it sees a re-authentication. `appends` keeps the connection's
transactional produce requests appending in the order they came (`AppendTurns`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from insync.security.listeners import Endpoint
from insync.security.principal import ANONYMOUS, KafkaPrincipal


class AppendTurns:
    """Kafka reads a connection's next request only once it has answered this one; insync reads on and answers in
    order. A produce that waits for the transaction coordinator before appending would then let a later request
    of the same producer append first, out of sequence. So such a request takes a turn as it starts (handlers
    start in arrival order) and appends only once every earlier turn has appended or given up."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    @contextlib.contextmanager
    def turn(self) -> Iterator[Callable[[], Awaitable[None]]]:
        """A turn for the block; what it yields waits for the turns before it. Leaving the block ends the turn,
        but a turn that leaves early still ends after the turns before it, so none is overtaken."""
        before, mine = self._last, asyncio.get_running_loop().create_future()
        self._last = mine

        async def earlier_done() -> None:
            if before is not None and not before.done():
                await asyncio.wait((before,))  # not `await before`: a cancelled waiter must not cancel the turn

        try:
            yield earlier_done
        finally:
            if before is None or before.done():
                mine.set_result(None)
                if self._last is mine:
                    self._last = None
            else:
                before.add_done_callback(lambda _: mine.set_result(None))


@dataclass(slots=True)
class Session:
    peer: str  # host:port of the client
    listener: Endpoint  # the listener's bound endpoint (its name picks the advertised address Metadata answers)
    principal: KafkaPrincipal = ANONYMOUS
    appends: AppendTurns = field(default_factory=AppendTurns)

    @property
    def client_host(self) -> str:
        """The client's address without its port, as Kafka shows a member's host (`/127.0.0.1`)."""
        return "/" + self.peer.rpartition(":")[0]
