"""A seeded, single-threaded event scheduler with a virtual clock (FoundationDB-style simulation).

Everything that happens in a simulation is a callback scheduled at a virtual time. `run_until` pops the earliest
callback, jumps the clock to its time and runs it; nothing ever sleeps, so a quiet minute costs nothing. Ties at
the same millisecond run in scheduling order (a sequence number breaks them), and every random choice in the
simulation comes from the one `random.Random(seed)` held here, so a run is a pure function of its seed.

Cancelling is lazy: a cancelled `Timer` stays in the heap and is skipped when popped, which keeps cancel O(1).
An observer (`after_event`) runs after every callback: the checker hangs its incremental invariants there.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

# A run that schedules more than this many callbacks in total is assumed to loop (a zero-delay cycle).
EVENTS_PER_RUN_MAX = 200_000_000
# Callbacks pending at once; a simulation of a handful of nodes never needs more.
PENDING_TIMERS_MAX = 5_000_000

# Virtual time starts at a realistic wall-clock value, so that 0 keeps meaning "never" in the cores.
START_MS = 1_700_000_000_000

Action = Callable[[], None]


@dataclass(slots=True, eq=False)
class Timer:
    """A handle on one scheduled callback; `cancel()` makes the scheduler skip it."""

    time_ms: int
    action: Action | None = field(repr=False)

    def cancel(self) -> None:
        self.action = None

    @property
    def cancelled(self) -> bool:
        return self.action is None


class Scheduler:
    """The virtual clock and the queue of everything that will happen."""

    def __init__(self, seed: int, start_ms: int = START_MS) -> None:
        assert start_ms >= 0
        self.seed = seed
        self.start_ms = start_ms
        self.rng = random.Random(seed)
        self._now_ms = start_ms
        self._heap: list[tuple[int, int, Timer]] = []
        self._sequence = 0
        self.events_run = 0
        self.after_event: Action | None = None

    @property
    def now_ms(self) -> int:
        return self._now_ms

    @property
    def elapsed_ms(self) -> int:
        """Virtual time since the start of the run; scenario files speak in these terms."""
        return self._now_ms - self.start_ms

    def at(self, time_ms: int, action: Action) -> Timer:
        """Run `action` at virtual time `time_ms` (never in the past)."""
        assert time_ms >= self._now_ms, f"cannot schedule in the past: {time_ms} < {self._now_ms}"
        assert len(self._heap) < PENDING_TIMERS_MAX, "too many pending timers"
        timer = Timer(time_ms, action)
        self._sequence += 1
        heapq.heappush(self._heap, (time_ms, self._sequence, timer))
        return timer

    def after(self, delay_ms: int, action: Action) -> Timer:
        assert delay_ms >= 0, delay_ms
        return self.at(self._now_ms + delay_ms, action)

    def next_time_ms(self) -> int | None:
        """When the next live callback is due, or None when nothing is scheduled."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_until(self, end_ms: int) -> int:
        """Run every callback due at or before `end_ms`, then leave the clock at `end_ms`. Returns how many ran."""
        assert end_ms >= self._now_ms, (end_ms, self._now_ms)
        heap = self._heap
        ran = 0
        while heap and heap[0][0] <= end_ms:
            time_ms, _, timer = heapq.heappop(heap)
            action = timer.action
            if action is None:
                continue
            timer.action = None
            self._now_ms = time_ms
            action()
            ran += 1
            if self.after_event is not None:
                self.after_event()
        self._now_ms = end_ms
        self.events_run += ran
        assert self.events_run < EVENTS_PER_RUN_MAX, "simulation does not make progress"
        return ran

    def uniform_ms(self, low_ms: int, high_ms: int) -> int:
        """A random whole millisecond in [low_ms, high_ms]."""
        assert 0 <= low_ms <= high_ms, (low_ms, high_ms)
        return low_ms if low_ms == high_ms else self.rng.randint(low_ms, high_ms)

    def chance(self, probability: float) -> bool:
        assert 0.0 <= probability <= 1.0, probability
        return probability > 0.0 and self.rng.random() < probability


class SchedulerClock:
    """The `Clock` the storage layer reads, showing virtual time."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def now_ms(self) -> int:
        return self._scheduler.now_ms

    def monotonic_ms(self) -> int:
        return self._scheduler.now_ms
