"""The scale rows' arithmetic: CPU as % of a core, and when a topic's partitions are all led or all whole."""

from __future__ import annotations

from insync.bench import scale


def test_cpu_percent_of_one_core() -> None:
    assert scale.cpu_percent(10.0, 10.5, 10.0) == 5.0
    assert scale.cpu_percent(None, 10.5, 10.0) is None


def test_largest_needs_every_reading() -> None:
    assert scale.largest([3.0, 7.5, 1.0]) == 7.5
    assert scale.largest([3.0, None]) is None
    assert scale.largest([]) is None


def test_all_led_wants_every_partition_with_a_live_leader() -> None:
    states = [(0, 1, (1, 2, 3), (1, 2, 3)), (1, 2, (2, 3, 1), (2, 3))]
    assert scale.all_led(states, 2, dead=3)
    assert not scale.all_led(states, 2, dead=2)  # partition 1 still names the dead broker
    assert not scale.all_led(states, 3, dead=None)  # a partition missing from the metadata
    assert not scale.all_led([(0, -1, (1, 2, 3), (1,))], 1, dead=None)


def test_isr_whole_wants_every_replica_in_every_isr() -> None:
    assert scale.isr_whole([(0, 1, (1, 2, 3), (3, 1, 2))], 1)
    assert not scale.isr_whole([(0, 1, (1, 2, 3), (1, 2))], 1)
    assert not scale.isr_whole([], 1)


def test_timed_counts_until_the_condition_holds_and_gives_up_at_the_timeout() -> None:
    answers = iter([False, False, True])
    took = scale.timed(lambda: next(answers), timeout_s=10)
    assert took is not None and 2 * scale.POLL_S <= took < 10
    assert scale.timed(lambda: False, timeout_s=0.3) is None
