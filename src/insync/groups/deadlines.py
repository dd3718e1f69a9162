"""When the group coordinator must next look at a group: its deadlines, indexed by group in a heap.

The heap holds one live entry per group, never later than the group's earliest deadline (`arm` after every
change). A heartbeat only moves a deadline later, so it pushes nothing; an entry made stale that way is corrected
when it reaches the top (`next_deadline_ms`), and entries superseded by an earlier one are dropped as they surface
or when the heap is rebuilt. Sans-IO: the caller passes the times and says what each group's deadline is now.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

_STALE_ENTRIES_MAX = 64  # superseded entries tolerated beyond twice the live ones before a rebuild


class GroupDeadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[int, str]] = []  # (deadline ms, group id)
        self._armed: dict[str, int] = {}  # group id -> deadline of its live heap entry

    def arm(self, group_id: str, deadline_ms: int | None) -> None:
        """Keep the group's entry no later than `deadline_ms`, its earliest deadline now (None: it has none)."""
        armed_ms = self._armed.get(group_id)
        if deadline_ms is None or (armed_ms is not None and armed_ms <= deadline_ms):
            return
        self._armed[group_id] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, group_id))
        if len(self._heap) > 2 * len(self._armed) + _STALE_ENTRIES_MAX:  # rebuild from the live entries
            self._heap = [(armed, group_id) for group_id, armed in self._armed.items()]
            heapq.heapify(self._heap)

    def forget(self, group_id: str) -> None:
        """The group is gone: its entry, if any, is dropped when it surfaces."""
        self._armed.pop(group_id, None)

    def pop_due(self, now_ms: int) -> list[str]:
        """The groups whose live entry is due by `now_ms`, disarmed (arm them again after handling them)."""
        due: dict[str, None] = {}
        for _ in range(len(self._heap)):
            if not self._heap or self._heap[0][0] > now_ms:
                break
            deadline_ms, group_id = heapq.heappop(self._heap)
            if self._armed.get(group_id) == deadline_ms:
                del self._armed[group_id]
                due[group_id] = None
        return list(due)

    def next_deadline_ms(self, deadline_of: Callable[[str], int | None]) -> int | None:
        """The earliest deadline of any group, exact: `deadline_of(group_id)` says what a group's is now."""
        # Bounded: each turn drops a stale entry or corrects a live one, and a corrected entry is exact.
        for _ in range(len(self._heap) + 1):
            if not self._heap:
                return None
            deadline_ms, group_id = self._heap[0]
            if self._armed.get(group_id) != deadline_ms:
                heapq.heappop(self._heap)
                continue
            current_ms = deadline_of(group_id)
            if current_ms == deadline_ms:
                return deadline_ms
            heapq.heappop(self._heap)
            del self._armed[group_id]
            self.arm(group_id, current_ms)
        raise AssertionError("the deadline heap did not settle")
