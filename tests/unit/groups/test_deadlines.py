"""GroupDeadlines, the heap of group deadlines behind GroupMembership.tick and next_deadline_ms."""

from __future__ import annotations

from insync.groups.deadlines import GroupDeadlines


def test_the_earliest_deadline_is_due_first_and_each_group_once() -> None:
    deadlines = GroupDeadlines()
    now = {"a": 300, "b": 100, "c": None}
    for group_id, deadline_ms in now.items():
        deadlines.arm(group_id, deadline_ms)
    assert deadlines.next_deadline_ms(now.get) == 100
    assert deadlines.pop_due(99) == []
    assert deadlines.pop_due(300) == ["b", "a"]
    assert deadlines.next_deadline_ms(now.get) is None  # due groups are disarmed until armed again


def test_a_deadline_moved_later_is_corrected_when_it_reaches_the_top() -> None:
    deadlines = GroupDeadlines()
    now = {"a": 100, "b": 200}
    deadlines.arm("a", 100)
    deadlines.arm("b", 200)
    now["a"] = 500  # a heartbeat: arming with a later deadline pushes nothing
    deadlines.arm("a", 500)
    assert deadlines.next_deadline_ms(now.get) == 200
    assert deadlines.pop_due(200) == ["b"]
    assert deadlines.next_deadline_ms(now.get) == 500


def test_an_earlier_deadline_supersedes_and_a_forgotten_group_is_never_due() -> None:
    deadlines = GroupDeadlines()
    deadlines.arm("a", 500)
    deadlines.arm("a", 100)
    deadlines.arm("b", 50)
    deadlines.forget("b")
    assert deadlines.pop_due(1_000) == ["a"]  # once, at its earliest deadline; b's entry is dropped
    assert deadlines.pop_due(1_000) == []


def test_superseded_entries_are_bounded() -> None:
    deadlines = GroupDeadlines()
    for deadline_ms in range(10_000, 0, -1):  # each arm supersedes the last: the heap is rebuilt, not grown
        deadlines.arm("a", deadline_ms)
    assert len(deadlines._heap) <= 2 + 64
    assert deadlines.pop_due(1) == ["a"]
