"""When each queued packet is let go: netem's delay, jitter and loss as a schedule the daemon consults.

A packet admitted at `now_ms` is due at `now_ms + delay_ms + U(-jitter_ms, +jitter_ms)` (netem's default
distribution is uniform too), or is dropped at once with probability `loss_percent`. Departure from netem: with
jitter, netem lets a later packet overtake an earlier one of the same connection; here a packet is never due
before the one its flow (protocol, addresses, ports) sent before it, since reordered TCP segments mostly add
duplicate acknowledgements and retransmissions rather than the varying delay a slow network has. The held
packets are a heap of due times, at most `held_max` of them (the kernel's queue length: it lets the rest through
unqueued when full, so a packet beyond it is accepted at once here as well). Time is an argument: no clock here.
"""

from __future__ import annotations

import enum
import heapq
import random
from dataclasses import dataclass

from insync.config import ConfigError


@dataclass(frozen=True, slots=True)
class Delay:
    delay_ms: int
    jitter_ms: int = 0
    loss_percent: float = 0.0

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or not 0 <= self.jitter_ms <= self.delay_ms or not 0 <= self.loss_percent <= 100:
            raise ConfigError(f"a delay needs 0 <= jitter <= delay and a loss within 0..100, got {self}")


class Fate(enum.Enum):
    HOLD = "hold"  # released later by `due`
    DROP = "drop"
    ACCEPT = "accept"  # at once: the schedule is full


class Schedule:
    __slots__ = ("_delay", "_random", "_held_max", "_heap", "_flows", "_order")

    def __init__(self, delay: Delay, rng: random.Random, held_max: int) -> None:
        assert held_max > 0
        self._delay = delay
        self._random = rng
        self._held_max = held_max
        self._heap: list[tuple[float, int, int, bytes]] = []  # (due_ms, admission order, packet id, flow)
        self._flows: dict[bytes, tuple[float, int]] = {}  # flow -> (latest due_ms, packets held)
        self._order = 0

    @property
    def held(self) -> int:
        return len(self._heap)

    def admit(self, packet_id: int, flow: bytes, now_ms: float) -> Fate:
        if self._delay.loss_percent and self._random.random() * 100 < self._delay.loss_percent:
            return Fate.DROP
        if len(self._heap) >= self._held_max:
            return Fate.ACCEPT
        jitter = self._random.uniform(-self._delay.jitter_ms, self._delay.jitter_ms) if self._delay.jitter_ms else 0
        latest, count = self._flows.get(flow, (now_ms, 0))
        due_ms = max(now_ms + self._delay.delay_ms + jitter, latest)
        self._flows[flow] = (due_ms, count + 1)
        self._order += 1
        heapq.heappush(self._heap, (due_ms, self._order, packet_id, flow))
        return Fate.HOLD

    def next_due_ms(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now_ms: float) -> list[int]:
        """The ids of the packets due by `now_ms`, in due order (removed from the schedule)."""
        released = []
        while self._heap and self._heap[0][0] <= now_ms:
            released.append(self._pop())
        return released

    def release_all(self) -> list[int]:
        """Every held packet's id in due order: what a stopping daemon accepts before it goes."""
        return [self._pop() for _ in range(len(self._heap))]

    def _pop(self) -> int:
        _due, _order, packet_id, flow = heapq.heappop(self._heap)
        latest, count = self._flows[flow]
        assert count > 0
        if count == 1:
            del self._flows[flow]
        else:
            self._flows[flow] = (latest, count - 1)
        return packet_id
