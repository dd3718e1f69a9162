"""A replica's leader-epoch history read back from OffsetForLeaderEpoch answers (what the dry run relies on)."""

from __future__ import annotations

import pytest

from insync.admin_requests import history_from_answers
from insync.storage.disk import MemoryDisk
from insync.storage.leader_epoch import LeaderEpochCache


@pytest.mark.parametrize(("log_start", "entries", "log_end"), [
    (0, [(0, 0), (1, 100), (4, 130)], 150),
    (100, [(3, 100), (5, 150)], 200),
    (0, [(3, 0), (5, 150), (6, 200)], 200),  # the latest epoch has no records yet
    (0, [], 0),  # an empty log
    (30, [(2, 0), (7, 40)], 90),  # retention moved the start into the first epoch
])
def test_the_history_comes_back_from_the_answers(log_start: int, entries: list[tuple[int, int]],
                                                 log_end: int) -> None:
    cache = LeaderEpochCache(MemoryDisk(), "leader-epoch-checkpoint", entries)
    answers = [(epoch, *cache.end_offset_for(epoch, log_end)) for epoch in range(0, 9)]
    end, history = history_from_answers(log_start, answers)
    assert end == log_end
    assert [e for e, _ in history] == [e for e, _ in entries]
    assert [s for _, s in history][1:] == [s for _, s in entries][1:]  # the first starts at the log start or its own
