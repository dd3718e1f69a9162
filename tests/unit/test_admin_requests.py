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


def test_delete_group_offsets_follows_a_moving_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    """FindCoordinator, then OffsetDelete at the coordinator; a coordinator that moves or loads is looked up again,
    any other group error is returned at once."""
    from insync import admin_requests, errors
    from insync.protocol.kio import build, nested, response_class
    from insync.types import TopicPartition

    find_cls, delete_cls = response_class(10, 4), response_class(47, 0)

    def found(error: int, port: int) -> object:
        return build(find_cls, throttle_time=0, coordinators=(build(
            nested(find_cls, "Coordinator"), key="g", node_id=1, host="h", port=port, error_code=error,
            error_message=None),))

    def deleted(error: int, partitions: tuple[int, ...] = ()) -> object:
        topics = (build(nested(delete_cls, "OffsetDeleteResponseTopic"), name="t", partitions=tuple(
            build(nested(delete_cls, "OffsetDeleteResponsePartition"), partition_index=p, error_code=0)
            for p in partitions)),) if partitions else ()
        return build(delete_cls, throttle_time=0, error_code=error, topics=topics)

    script = [found(15, -1), found(0, 1), deleted(16), found(0, 2), deleted(0, (0, 1))]  # 15, 16: not available, not coordinator
    sent: list[tuple[str, int]] = []

    def fake(address: str, body: object, timeout_s: float) -> object:
        sent.append((address, int(body.__api_key__)))  # type: ignore[attr-defined]
        return script.pop(0)

    monkeypatch.setattr(admin_requests, "request", fake)
    monkeypatch.setattr(admin_requests.time, "sleep", lambda _: None)
    error, answers = admin_requests.delete_group_offsets("b:9", "g", [TopicPartition("t", 0), TopicPartition("t", 1)], 1)
    assert (error, answers) == (errors.NONE, [(TopicPartition("t", 0), errors.NONE), (TopicPartition("t", 1), errors.NONE)])
    assert sent == [("b:9", 10), ("b:9", 10), ("h:1", 47), ("b:9", 10), ("h:2", 47)]
    script[:] = [found(0, 1), deleted(69)]
    assert admin_requests.delete_group_offsets("b:9", "g", [TopicPartition("t", 0)], 1) == (
        errors.BY_NAME["GROUP_ID_NOT_FOUND"], [])
