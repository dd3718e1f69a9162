"""The monitor's per-partition rules (`spark.monitor.rules`), without Spark: each alert, once, with its evidence."""

from __future__ import annotations

from typing import Any

from insync.spark.monitor import rules
from insync.spark.monitor.rules import Thresholds

T = Thresholds(urp_ms=2000, min_isr_ms=1000, offline_ms=1000, risk_ms=1000, flap_count=3, flap_window_ms=60_000)


def _shrink(ts: int, leader: int, before: list[int], after: list[int], reason: str = "stuck") -> dict[str, Any]:
    removed = [{"broker": b, "reason": reason} for b in before if b not in after]
    return {"ts_ms": ts, "broker": leader, "type": "isr_shrink", "isr_before": before, "isr_after": after,
            "removed": removed, "leader_epoch": 0, "hw": 0, "leo": 0}


def _event(ts: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"ts_ms": ts, "broker": 1, "type": kind, **fields}


def _run(batches: list[tuple[list[dict[str, Any]], int]]) -> tuple[list[rules.Alert], rules.Outcome]:
    state, alerts = rules.new_state(), []
    outcome = None
    for events, now in batches:
        outcome = rules.step(state, "t", 0, events, now, T)
        state = outcome.state
        alerts.extend(outcome.alerts)
    assert outcome is not None
    return alerts, outcome


def test_a_stuck_follower_alerts_once_when_the_urp_has_lasted_its_threshold() -> None:
    shrink = [_shrink(1000, 1, [1, 2, 3], [1, 2]), _event(1000, "under_replicated_start")]
    alerts, outcome = _run([(shrink, 1000), ([], 2500), ([], 3000), ([], 4000)])
    assert [(a.kind, a.since_ms, a.due_ms) for a in alerts] == [("under_replicated", 1000, 3000)]
    assert alerts[0].cause == "follower 3 stuck"
    assert alerts[0].evidence["removed"] == [{"broker": 3, "reason": "stuck"}]
    assert outcome.recheck and "under-replicated 3 s: follower 3 stuck" in outcome.status


def test_an_urp_that_ends_in_time_raises_nothing_and_clears_the_status() -> None:
    alerts, outcome = _run([([_shrink(1000, 1, [1, 2, 3], [1, 2]), _event(1000, "under_replicated_start")], 1000),
                            ([_event(2500, "isr_expand", isr_before=[1, 2], isr_after=[1, 2, 3], added=[3]),
                              _event(2500, "under_replicated_end")], 2500), ([], 9000)])
    assert alerts == [] and outcome.status == "" and not outcome.recheck


def test_every_follower_removed_at_once_is_a_leader_side_episode_at_once() -> None:
    alerts, _ = _run([([_shrink(1000, 3, [3, 1, 2], [3]), _event(1000, "under_min_isr_start")], 1000)])
    assert [a.kind for a in alerts] == ["leader_side"]
    assert alerts[0].cause.startswith("leader-side: broker 3's own reads were slow")


def test_followers_removed_one_check_apart_leaving_the_leader_alone_are_leader_side_too() -> None:
    alerts, _ = _run([([_shrink(1000, 3, [3, 1, 2], [3, 2])], 1000), ([_shrink(2500, 3, [3, 2], [3])], 2500)])
    assert [a.kind for a in alerts] == ["leader_side"]
    assert "every follower (1,2) removed within 10 s" in alerts[0].cause


def test_a_follower_that_came_back_does_not_count_toward_a_leader_side_episode() -> None:
    alerts, _ = _run([([_shrink(1000, 3, [3, 1, 2], [3, 2])], 1000),
                      ([_event(1500, "isr_expand", isr_before=[3, 2], isr_after=[3, 2, 1], added=[1])], 1500),
                      ([_shrink(2500, 3, [3, 2, 1], [3, 1])], 2500)])
    assert "leader_side" not in [a.kind for a in alerts]


def test_removed_followers_whose_fetches_were_pending_are_a_leader_side_episode() -> None:
    shrink = _shrink(1000, 1, [1, 2, 3], [1, 2])
    shrink["removed"][0]["pending_since_ms"] = 500
    alerts, _ = _run([([shrink], 1000)])
    assert [a.kind for a in alerts] == ["leader_side"] and "fetches from 3" in alerts[0].cause


def test_under_min_isr_counts_the_refusals_and_alerts_after_its_threshold() -> None:
    events = [_event(1000, "under_min_isr_start"), _event(1500, "produce_rejected", error="NOT_ENOUGH_REPLICAS",
                                                           count=7)]
    alerts, _ = _run([(events, 1500), ([], 2100)])
    assert [(a.kind, a.evidence["refused"]) for a in alerts] == [("under_min_isr", 7)]


def test_offline_and_unclean_election() -> None:
    alerts, _ = _run([([_event(1000, "partition_offline")], 1000), ([], 2000),
                      ([_event(2500, "leader_change", leader_before=-1, leader_after=2, leader_epoch=3, isr=[2],
                               reason="unclean"), _event(2500, "partition_online")], 2500)])
    assert [(a.kind, a.due_ms) for a in alerts] == [("offline", 2000), ("data_at_risk", 2500)]


def test_an_isr_of_the_leader_alone_not_under_min_isr_is_data_at_risk() -> None:
    alerts, _ = _run([([_shrink(1000, 1, [1, 2], [1], reason="slow")], 1000), ([], 2000)])
    assert sorted(a.kind for a in alerts) == ["data_at_risk"]


def test_three_shrinks_in_the_window_are_flapping_once() -> None:
    batches = []
    for i in range(4):
        ts = 1000 + i * 2000
        batches.append(([_shrink(ts, 1, [1, 2, 3], [1, 2]), _event(ts, "under_replicated_start")], ts))
        batches.append(([_event(ts + 500, "isr_expand", isr_before=[1, 2], isr_after=[1, 2, 3], added=[3]),
                         _event(ts + 500, "under_replicated_end")], ts + 500))
    alerts, _ = _run(batches)
    assert [(a.kind, a.since_ms) for a in alerts] == [("flapping", 1000)]


def test_after_a_controlled_shutdown_of_the_leader_nothing_is_alerted() -> None:
    events = [_event(1000, "leader_change", leader_before=1, leader_after=2, leader_epoch=1, isr=[2, 3],
                     reason="shutdown"), _event(1100, "under_replicated_start"), _event(1200, "partition_offline")]
    alerts, outcome = _run([(events, 1200), ([], 60_000)])
    assert alerts == [] and "controlled shutdown" in outcome.status


def test_once_whole_again_after_a_controlled_shutdown_a_later_episode_is_alerted() -> None:
    """A rolling restart's shutdown excuses its own episodes, not every later one of the partition."""
    events = [_event(1000, "leader_change", leader_before=1, leader_after=2, leader_epoch=1, isr=[2, 3],
                     reason="shutdown"), _event(1100, "under_replicated_start"),
              _event(5000, "isr_expand", isr_before=[2, 3], isr_after=[2, 3, 1], added=[1]),
              _event(5000, "under_replicated_end"), _shrink(90_000, 2, [2, 3, 1], [2, 1])]
    alerts, _ = _run([(events, 90_000), ([], 120_000)])
    assert [(a.kind, a.since_ms) for a in alerts] == [("under_replicated", 90_000)]


def test_a_restarted_monitor_does_not_repeat_an_alert_from_its_state() -> None:
    alerts, outcome = _run([([_shrink(1000, 1, [1, 2, 3], [1, 2])], 1000), ([], 3000)])
    again = rules.step(outcome.state, "t", 0, [], 5000, T)
    assert len(alerts) == 1 and again.alerts == ()


def test_an_episode_that_lasted_its_threshold_and_ended_within_one_backlog_is_still_alerted() -> None:
    events = [_shrink(1000, 1, [1, 2, 3], [1, 2]), _event(1000, "under_replicated_start"),
              _event(4000, "isr_expand", isr_before=[1, 2], isr_after=[1, 2, 3], added=[3]),
              _event(4000, "under_replicated_end")]
    alerts, outcome = _run([(events, 0)])
    assert [(a.kind, a.due_ms, a.evidence["lasted_ms"]) for a in alerts] == [("under_replicated", 3000, 3000)]
    assert outcome.status == ""


def test_internal_topics_alert_only_offline_under_min_isr_and_data_at_risk() -> None:
    state = rules.new_state()
    events = [_shrink(1000, 1, [1, 2, 3], [1]), _event(1000, "under_replicated_start"),
              _event(1000, "under_min_isr_start")]
    outcome = rules.step(state, "__consumer_offsets", 7, events, 1000, T)
    outcome = rules.step(outcome.state, "__consumer_offsets", 7, [], 5000, T)
    assert [a.kind for a in outcome.alerts] == ["under_min_isr"] and "under-replicated" in outcome.status
