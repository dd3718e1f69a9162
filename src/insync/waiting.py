"""Waiting for the outside world: `wait_until` polls a predicate until it holds, never longer than a timeout, and
says what it waited for when it gives up.

The harness (chaos/, demo/, the admin client), the Spark monitor and the tests wait through it. The cores never
wait (they take time as an argument), and server/ awaits on its event loop rather than block it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INTERVAL_S = 0.2


class WaitTimeout(TimeoutError):
    """`what` did not hold within `timeout_s`; `last` is the predicate's last answer, `error` the last exception
    it raised of those the wait retried (None if its last call answered)."""

    def __init__(self, what: str, timeout_s: float, last: object, error: Exception | None) -> None:
        # A bare False or None says nothing the message does not; any other answer is the state it was in.
        seen = f"; last error {error!r}" if error is not None else (
            "" if last is None or isinstance(last, bool) else f"; last seen {last!r}")
        super().__init__(f"not within {timeout_s:g} s: {what}{seen}")
        self.what, self.timeout_s, self.last, self.error = what, timeout_s, last, error


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str | Callable[[], str], *,
               interval_s: float = INTERVAL_S, retry_on: tuple[type[Exception], ...] = ()) -> T:
    """The predicate's first truthy answer, asked every `interval_s` for at most `timeout_s` (once more at the
    deadline); WaitTimeout naming `what` after that. An exception of a `retry_on` type counts as "not yet"; any
    other propagates at once, so a predicate can fail early (a process that exited will never listen). `what`
    may be a callable, asked at the timeout for the state as it is then."""
    assert timeout_s >= 0, timeout_s
    assert interval_s > 0, interval_s
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    error: Exception | None = None
    while True:  # bounded by the deadline
        try:
            last, error = predicate(), None
            if last:
                return last
        except retry_on as exc:
            error = exc
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise WaitTimeout(what if isinstance(what, str) else what(), timeout_s, last, error)
        time.sleep(min(interval_s, remaining_s))
