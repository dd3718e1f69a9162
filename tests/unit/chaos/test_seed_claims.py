"""Each seed's claims on hand-made runs, each one failing when it should and naming what was seen."""

from __future__ import annotations

from typing import Any

import pytest
from seed_events import event, expand, seed_run, shrink

from insync.chaos import seed_claims
from insync.chaos.seed_model import SeedRun


def test_stuck_follower_claims_hold_for_a_removal_between_lag_and_one_and_a_half_lag() -> None:
    run = seed_run([shrink(11_300, 3, 10_000), expand(14_000, 3)])
    assert run.waited_lags() == [1.3]
    assert seed_claims.check_stuck_follower(run) == []


@pytest.mark.parametrize(("events", "figures", "claim"), [
    ([shrink(10_900, 3, 10_000), expand(14_000, 3)], {}, "between lag and 1.5 x lag"),
    ([shrink(12_100, 3, 10_000), expand(14_000, 3)], {}, "between lag and 1.5 x lag"),
    ([shrink(11_300, 3, 10_000, "slow"), expand(14_000, 3)], {}, "reason stuck"),
    ([shrink(11_300, 3, 10_000)], {}, "rejoined"),
    ([shrink(11_300, 3, 10_000), expand(14_000, 3)], {"not_enough_replicas": 2}, "NOT_ENOUGH_REPLICAS"),
    ([shrink(11_300, 3, 10_000), expand(14_000, 3)], {"lost": 1}, "lost"),
    ([shrink(11_300, 3, 10_000), expand(14_000, 3)], {"acked": 0}, "acknowledged"),
])
def test_stuck_follower_claims_fail_naming_what_was_seen(events: list[dict[str, Any]], figures: dict[str, Any],
                                                          claim: str) -> None:
    failures = seed_claims.check_stuck_follower(seed_run(events, "sim", **figures))
    assert len(failures) == 1 and claim in failures[0] and "seen:" in failures[0], failures


def test_a_real_removal_may_be_late_by_the_scheduling_slack_and_no_more() -> None:
    late = [shrink(12_400, 3, 10_000), expand(14_000, 3)]
    assert seed_claims.check_stuck_follower(seed_run(late)) == []
    assert seed_claims.check_stuck_follower(seed_run(late, "sim"))
    assert seed_claims.check_stuck_follower(seed_run([shrink(12_600, 3, 10_000), expand(14_000, 3)]))


def test_slow_leader_flag_off_claims() -> None:
    offline = {"type": "partition_offline", "ts_ms": 13_000, "partition": 0}
    both = [shrink(11_500, 2, 10_000), shrink(11_500, 3, 10_000), offline]
    assert seed_claims.check_slow_leader_flag_off(seed_run(both, under_min_isr_s=2.0, offline_s=1.0)) == []
    failures = seed_claims.check_slow_leader_flag_off(seed_run(both[1:2]))
    assert [f.split(" (")[0] for f in failures] == ["both followers removed", "under min ISR for a while",
                                                   "offline after the leader died"]


def test_slow_leader_flag_on_claims() -> None:
    moved = {"type": "leader_change", "ts_ms": 12_000, "partition": 0, "reason": "fenced", "leader_after": 2}
    assert seed_claims.check_slow_leader_flag_on(seed_run([moved])) == []
    offline = {**moved, "leader_after": -1}
    unclean = {**moved, "ts_ms": 13_000, "reason": "unclean"}
    failures = seed_claims.check_slow_leader_flag_on(seed_run([shrink(11_500, 2, 10_000), offline, unclean]))
    assert [f.split(" (")[0] for f in failures] == ["no ISR shrink", "a follower took over", "no unclean election"]


def test_log_start_race_claims() -> None:
    good = [shrink(11_500, 3, 10_000), event("truncate", 12_000, reason="leader_log_start"), expand(13_000, 3)]
    assert seed_claims.check_log_start_race(seed_run(good)) == []
    bad = [event("partition_failed", 11_000, leader=1, error="OFFSET_OUT_OF_RANGE"),
           event("truncate", 12_000, reason="diverging_epoch")]
    failures = seed_claims.check_log_start_race(seed_run(bad))
    assert [f.split(" (")[0] for f in failures] == ["no partition failed", "the follower left and rejoined",
                                                   "the follower moved to the leader's log start"]


def test_failing_partition_claims() -> None:
    failed = event("partition_failed", 10_000, leader=1, error="KAFKA_STORAGE_ERROR")
    good = [failed, shrink(11_300, 2, 10_000), {**shrink(13_000, 2, 11_500), "partition": 3}, expand(14_000, 2)]
    assert seed_claims.check_failing_partition(seed_run(good)) == []
    other_first = [failed, {**shrink(11_300, 2, 10_000), "partition": 3}, shrink(11_400, 2, 10_000)]
    failures = seed_claims.check_failing_partition(seed_run(other_first))
    assert [f.split(" (")[0] for f in failures] == ["the failed partition left the ISR first",
                                                   "the others stayed in the ISR for at least a lag",
                                                   "rejoined after the restart"]
    assert seed_claims.check_failing_partition(seed_run([failed])) == [
        "the failed partition left the ISR (seen: 0 shrinks)"]
    two = seed_claims.check_failing_partition(seed_run([failed, {**failed, "partition": 1}]))
    assert two[0] == "one partition failed (seen: [0, 1])"


def test_leader_failover_claims() -> None:
    moved = event("leader_change", 12_000, reason="fenced", leader_before=1, leader_after=2, isr=[2, 3])
    assert seed_claims.check_leader_failover(seed_run([moved])) == []
    outside = {**moved, "isr": [3]}
    unclean = event("leader_change", 13_000, reason="unclean", leader_before=-1, leader_after=3, isr=[3])
    failures = seed_claims.check_leader_failover(seed_run([outside, unclean], lost=2))
    assert [f.split(" (")[0] for f in failures] == ["every new leader in its ISR", "no unclean election",
                                                   "no acknowledged write lost"]
    assert seed_claims.check_leader_failover(seed_run([]))[0].startswith("a replica from the ISR took over")


def test_rolling_restart_claims() -> None:
    moved = event("leader_change", 12_000, reason="shutdown", leader_before=1, leader_after=2, isr=[2, 3])
    fenced = event("broker_fenced", 12_100, None, broker_id=1)
    assert seed_claims.check_rolling_restart(seed_run([moved, fenced, expand(15_000, 1)])) == []
    crashed = {**moved, "reason": "fenced"}
    failures = seed_claims.check_rolling_restart(seed_run([crashed, fenced], offline_s=1.0, not_enough_replicas=3))
    assert [f.split(" (")[0] for f in failures] == ["broker 1's leaderships moved before it was let go",
                                                   "broker 1 rejoined the ISRs", "never offline or under min ISR",
                                                   "no NOT_ENOUGH_REPLICAS"]
    assert seed_claims.check_rolling_restart(seed_run([]))[0].startswith("brokers stopped")


def test_slow_follower_claims() -> None:
    assert seed_claims.check_slow_follower(seed_run([shrink(11_400, 3, 10_000, "slow")])) == []
    failures = seed_claims.check_slow_follower(seed_run([shrink(12_600, 3, 10_000, "stuck")]))
    assert [f.split(" (")[0] for f in failures] == ["removed as slow", "within 1.5 x the lag"]


def test_bursty_claims() -> None:
    flap = [shrink(11_400, 3, 11_000, "messages"), expand(11_900, 3)]
    assert seed_claims.check_bursty_count_rule(seed_run(flap)) == []
    assert seed_claims.check_bursty_time_rule(seed_run([])) == []
    assert seed_claims.check_bursty_time_rule(seed_run(flap))[0].startswith("no ISR shrink")
    failures = seed_claims.check_bursty_count_rule(seed_run([shrink(11_400, 3, 10_000, "slow")]))
    assert [f.split(" (")[0] for f in failures] == ["removed by the count rule only", "and back"]


def test_slow_link_claims_hold_when_the_follower_never_leaves() -> None:
    assert seed_claims.check_slow_link(seed_run([], urp_s=0.0)) == []


@pytest.mark.parametrize(("events", "figures", "claim"), [
    ([shrink(11_400, 3, 10_000, "slow"), expand(11_900, 3)], {"urp_s": 0.0}, "no ISR shrink"),
    ([], {"urp_s": 0.1}, "never under-replicated"),
    ([], {"urp_s": 0.0, "not_enough_replicas": 1}, "no NOT_ENOUGH_REPLICAS"),
    ([], {"urp_s": 0.0, "lost": 3}, "no acknowledged write lost"),
])
def test_slow_link_claims_fail_naming_what_was_seen(events: list[dict[str, Any]], figures: dict[str, Any],
                                                    claim: str) -> None:
    failures = seed_claims.check_slow_link(seed_run(events, **figures))
    assert len(failures) == 1 and claim in failures[0] and "seen:" in failures[0], failures


def test_last_replica_standing_claims() -> None:
    offline = event("leader_change", 12_000, reason="fenced", leader_before=1, leader_after=-1, isr=[1], elr=[2, 3])
    eligible = event("leader_change", 14_000, reason="unfenced", leader_before=-1, leader_after=3, isr=[3])
    again = {**eligible, "leader_after": 1, "isr": [1]}
    assert seed_claims.check_last_replica_standing(seed_run([offline, eligible])) == []
    failures = seed_claims.check_last_replica_standing(seed_run([offline, again], lost=200))
    assert [f.split(" (")[0] for f in failures] == ["an eligible follower leads, not the crashed leader",
                                                   "no acknowledged write lost"]
    assert seed_claims.check_last_replica_standing(seed_run([eligible]))[0].startswith("offline once the leader crashed")
    assert seed_claims.check_last_replica_standing_kafka_3(seed_run([offline, again], lost=200)) == []
    failures = seed_claims.check_last_replica_standing_kafka_3(seed_run([offline, eligible]))
    assert [f.split(" (")[0] for f in failures] == ["the crashed leader elected again", "acknowledged writes lost"]


def _propagation_run(lone_delay_ms: int = 2200, window: tuple[int, ...] = (9_000,), late_shrink: bool = False,
                     seen: tuple[dict[str, Any], ...] = ()) -> SeedRun:
    """Broker 2 follows partitions 0 and 1 (leader 1) and leads 2; it is paused, leaves both ISRs at 5 s (one
    at 8.6 s with `late_shrink`) and rejoins; partition 0 then fails on broker 3, removed at 12 s."""
    created = [event("leader_change", 1, p, leader_after=leader, isr=[leader, 2, 3] if leader != 2 else [2, 1, 3],
                      reason="created") for p, leader in ((0, 1), (1, 1), (2, 2))]
    burst = [{**shrink(5_000, 2, 3_500), "partition": 0, "isr_after": [1, 3]},
             {**shrink(8_600 if late_shrink else 5_000, 2, 3_500), "partition": 1, "isr_after": [1, 3]},
             {**expand(6_000, 2), "partition": 0, "isr_after": [1, 3, 2]}]
    lone = {**shrink(12_000, 3, 10_500), "partition": 0, "isr_after": [1, 2]}
    props = [event("metadata_propagated", ts, None, changes=3) for ts in (*window, 12_000 + lone_delay_ms)]
    events = sorted([*created, *burst, event("partition_failed", 10_000, 0, leader=1, error="KAFKA_STORAGE_ERROR"),
                     lone, *props], key=lambda e: e["ts_ms"])
    return seed_run(events, propagation_ms=(1000, 2000), seen=seen, lag_ms=1500)


def _seen(ts_ms: int, broker: int, partition: int, isr: list[int]) -> dict[str, Any]:
    return {"ts_ms": ts_ms, "broker": broker, "partition": partition, "isr": isr}


def test_isr_propagation_claims_hold_for_one_batch_and_a_lone_change_a_blackout_later() -> None:
    assert seed_claims.check_isr_propagation(_propagation_run()) == []
    # A real publication may come a little under a blackout after the event (the event follows the commit).
    assert seed_claims.check_isr_propagation(_propagation_run(lone_delay_ms=1900)) == []
    assert seed_claims.check_isr_propagation(_propagation_run(lone_delay_ms=1700))
    seen = (_seen(2_000, 1, 0, [1, 2, 3]), _seen(2_000, 3, 0, [1, 2, 3]), _seen(9_300, 1, 0, [1, 3, 2]),
            _seen(14_500, 1, 0, [2, 1]), _seen(14_400, 3, 0, [1, 2]))
    assert seed_claims.check_isr_propagation(_propagation_run(seen=seen)) == []


@pytest.mark.parametrize(("run", "claim"), [
    (_propagation_run(late_shrink=True), "broker 2 left the ISR of each of the 2 partitions it follows within a lag"),
    (_propagation_run(window=(5_100, 6_100, 8_500)), "the 3 ISR changes reached the brokers in 1 or 2 propagations"),
    (_propagation_run(window=()), "in 1 or 2 propagations (seen: 0)"),
    (_propagation_run(lone_delay_ms=10), "the lone change published a blackout after it"),
    (_propagation_run(lone_delay_ms=6000), "the lone change published a blackout after it"),
    # A broker's ISR changed between propagations; the lone change reached broker 3 before its publication.
    (_propagation_run(seen=(_seen(2_000, 1, 0, [1, 2, 3]), _seen(6_500, 1, 0, [1, 3]), _seen(14_300, 1, 0, [1, 2]))),
     "each broker's ISRs changed only with a propagation (seen: [(1, 0, 6500)])"),
    (_propagation_run(seen=(_seen(2_000, 3, 0, [1, 2, 3]), _seen(13_000, 3, 0, [1, 2]))),
     "the lone change reached every broker's metadata after its publication (seen: {3: -1200})"),
    (_propagation_run(seen=(_seen(2_000, 1, 0, [1, 2, 3]), _seen(2_000, 3, 0, [1, 2, 3]),
                            _seen(14_300, 3, 0, [1, 2]))),
     "the lone change reached every broker's metadata after its publication (seen: {3: 100})"),
])
def test_isr_propagation_claims_fail_naming_what_was_seen(run: SeedRun, claim: str) -> None:
    failures = seed_claims.check_isr_propagation(run)
    assert len(failures) == 1 and claim in failures[0], failures


def test_isr_propagation_needs_its_faults_to_have_happened() -> None:
    assert seed_claims.check_isr_propagation(seed_run([])) == ["a partition failed on a follower (seen: none)"]
    failed = event("partition_failed", 10_000, 0, leader=1, error="KAFKA_STORAGE_ERROR")
    assert seed_claims.check_isr_propagation(seed_run([failed]))[0].startswith("ISR changes around the pause, then a lone one")
