"""The cores' steady time: wall time at start, then monotonic, so a step of the wall clock moves no timer."""

from __future__ import annotations

from insync.server.role import steady_now


class SteppedClock:
    """A wall clock that an operator (or NTP) can step, beside a monotonic clock that only moves forward."""

    def __init__(self) -> None:
        self.wall_ms, self.mono_ms = 1_700_000_000_000, 5_000

    def now_ms(self) -> int:
        return self.wall_ms

    def monotonic_ms(self) -> int:
        return self.mono_ms

    def run(self, elapsed_ms: int) -> None:
        self.wall_ms += elapsed_ms
        self.mono_ms += elapsed_ms


def test_steps_of_the_wall_clock_change_no_interval() -> None:
    clock = SteppedClock()
    now = steady_now(clock)
    assert now() == 1_700_000_000_000  # reads as wall time
    clock.run(1_000)
    clock.wall_ms += 300_000  # stepped forward five minutes
    assert now() == 1_700_000_001_000
    clock.run(1_000)
    clock.wall_ms -= 600_000  # then back ten: the cores' time neither stalls nor goes backwards
    assert now() == 1_700_000_002_000
    clock.run(500)
    assert now() == 1_700_000_002_500
