"""The live consumer's report: a value acknowledged and never seen is missed only once the grace has passed, a
value seen twice is a duplicate, and the longest wait from acknowledgement to sight is kept."""

from __future__ import annotations

from collections import Counter

from insync.chaos.fuzz_workload import LIVE_GRACE_S, live_report

END = 1000.0


def test_everything_seen_once_is_clean() -> None:
    acked = {b"w-0": 10.0, b"w-1": 11.0}
    report = live_report(acked, Counter({b"w-0": 1, b"w-1": 1}), {b"w-0": 10.5, b"w-1": 13.0}, END)
    assert report == {"live_seen": 2, "live_missed": 0, "live_duplicated": 0, "live_gap_s_max": 2.0}


def test_a_value_unseen_is_missed_only_after_the_grace() -> None:
    acked = {b"old": END - LIVE_GRACE_S - 1, b"recent": END - LIVE_GRACE_S + 1}
    report = live_report(acked, Counter(), {}, END)
    assert (report["live_seen"], report["live_missed"]) == (0, 1)


def test_a_value_seen_twice_is_a_duplicate_acknowledged_or_not() -> None:
    seen = Counter({b"w-0": 2, b"w-unacked": 3, b"w-1": 1})
    report = live_report({b"w-0": 1.0, b"w-1": 1.0}, seen, {b"w-0": 2.0, b"w-unacked": 2.0, b"w-1": 2.0}, END)
    assert (report["live_seen"], report["live_duplicated"]) == (2, 2)


def test_seen_before_the_acknowledgement_is_no_gap() -> None:
    # A read_uncommitted consumer may read a value once replicated, before the producer hears it was acknowledged.
    report = live_report({b"w-0": 5.0}, Counter({b"w-0": 1}), {b"w-0": 4.0}, END)
    assert report["live_gap_s_max"] == 0.0 and report["live_seen"] == 1
