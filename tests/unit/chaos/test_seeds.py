"""The seed scripts' pure parts: the claims on hand-made runs (each one failing when it should), the table, and
the errors for bad steps and unknown names."""

from __future__ import annotations

from typing import Any

import pytest

from insync.chaos import seeds
from insync.chaos.seeds_run import interval_s
from insync.config import ConfigError

LAG = 1000


def _shrink(ts_ms: int, broker: int, caught_up_ms: int, reason: str = "stuck") -> dict[str, Any]:
    return {"type": "isr_shrink", "ts_ms": ts_ms, "partition": 0, "isr_before": [1, 2, 3], "isr_after": [1, 2],
            "removed": [{"broker": broker, "leo": 5, "last_caught_up_ms": caught_up_ms, "reason": reason}]}


def _expand(ts_ms: int, broker: int) -> dict[str, Any]:
    return {"type": "isr_expand", "ts_ms": ts_ms, "partition": 0, "added": [{"broker": broker, "leo": 9}]}


def _run(events: list[dict[str, Any]], side: str = "real", **figures: Any) -> seeds.SeedRun:
    lag_ms = figures.pop("lag_ms", LAG)
    values: dict[str, Any] = {"acked": 100, "lost": 0, "duplicated": 0, "not_enough_replicas": 0, "urp_s": 1.0,
                              "under_min_isr_s": 0.0, "offline_s": 0.0, **figures}
    return seeds.SeedRun(side, lag_ms, tuple(events), **values)


def test_stuck_follower_claims_hold_for_a_removal_between_lag_and_one_and_a_half_lag() -> None:
    run = _run([_shrink(11_300, 3, 10_000), _expand(14_000, 3)])
    assert run.waited_lags() == [1.3]
    assert seeds.check_stuck_follower(run) == []


@pytest.mark.parametrize(("events", "figures", "claim"), [
    ([_shrink(10_900, 3, 10_000), _expand(14_000, 3)], {}, "between lag and 1.5 x lag"),
    ([_shrink(12_100, 3, 10_000), _expand(14_000, 3)], {}, "between lag and 1.5 x lag"),
    ([_shrink(11_300, 3, 10_000, "slow"), _expand(14_000, 3)], {}, "reason stuck"),
    ([_shrink(11_300, 3, 10_000)], {}, "rejoined"),
    ([_shrink(11_300, 3, 10_000), _expand(14_000, 3)], {"not_enough_replicas": 2}, "NOT_ENOUGH_REPLICAS"),
    ([_shrink(11_300, 3, 10_000), _expand(14_000, 3)], {"lost": 1}, "lost"),
    ([_shrink(11_300, 3, 10_000), _expand(14_000, 3)], {"acked": 0}, "acknowledged"),
])
def test_stuck_follower_claims_fail_naming_what_was_seen(events: list[dict[str, Any]], figures: dict[str, Any],
                                                          claim: str) -> None:
    failures = seeds.check_stuck_follower(_run(events, "sim", **figures))
    assert len(failures) == 1 and claim in failures[0] and "seen:" in failures[0], failures


def test_a_real_removal_may_be_late_by_the_scheduling_slack_and_no_more() -> None:
    late = [_shrink(12_400, 3, 10_000), _expand(14_000, 3)]
    assert seeds.check_stuck_follower(_run(late)) == []
    assert seeds.check_stuck_follower(_run(late, "sim"))
    assert seeds.check_stuck_follower(_run([_shrink(12_600, 3, 10_000), _expand(14_000, 3)]))


def test_slow_leader_flag_off_claims() -> None:
    offline = {"type": "partition_offline", "ts_ms": 13_000, "partition": 0}
    both = [_shrink(11_500, 2, 10_000), _shrink(11_500, 3, 10_000), offline]
    assert seeds.check_slow_leader_flag_off(_run(both, under_min_isr_s=2.0, offline_s=1.0)) == []
    failures = seeds.check_slow_leader_flag_off(_run(both[1:2]))
    assert [f.split(" (")[0] for f in failures] == ["both followers removed", "under min ISR for a while",
                                                   "offline after the leader died"]


def test_slow_leader_flag_on_claims() -> None:
    moved = {"type": "leader_change", "ts_ms": 12_000, "partition": 0, "reason": "fenced", "leader_after": 2}
    assert seeds.check_slow_leader_flag_on(_run([moved])) == []
    offline = {**moved, "leader_after": -1}
    unclean = {**moved, "ts_ms": 13_000, "reason": "unclean"}
    failures = seeds.check_slow_leader_flag_on(_run([_shrink(11_500, 2, 10_000), offline, unclean]))
    assert [f.split(" (")[0] for f in failures] == ["no ISR shrink", "a follower took over", "no unclean election"]


def test_interval_seconds_per_partition_and_open_at_the_end() -> None:
    events = [{"type": "partition_offline", "ts_ms": 1000, "partition": 0},
              {"type": "partition_offline", "ts_ms": 1500, "partition": 1},
              {"type": "partition_online", "ts_ms": 3000, "partition": 0},
              {"type": "isr_expand", "ts_ms": 4000, "partition": 1, "added": []}]
    assert interval_s(events, "partition_offline", "partition_online") == 4.5  # 2 s + 2.5 s still open
    assert interval_s([], "partition_offline", "partition_online") == 0


def test_table_in_text_and_markdown() -> None:
    run = _run([_shrink(11_300, 3, 10_000), _expand(14_000, 3)])
    row = seeds.figures("stuck-follower", run, [])
    assert row["removed (reason: waited / lag)"] == "stuck: 1.3" and row["claims"] == "ok"
    failed = seeds.figures("stuck-follower", _run([]), ["one removal, reason stuck (seen: [])"])
    assert failed["claims"].startswith("FAILED: one removal")
    text = seeds.render([row, failed])
    assert text.splitlines()[0].startswith("scenario") and len(text.splitlines()) == 3
    markdown = seeds.render([row], markdown=True).splitlines()
    assert markdown[0].startswith("| scenario | side |") and markdown[1].startswith("|---|")
    assert markdown[2].startswith("| stuck-follower | real | 1 | stuck: 1.3 |")


def test_bad_steps_and_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="action must be one of"):
        seeds.SeedStep(1, "explode", "leader")
    with pytest.raises(ConfigError, match="target must be a broker id or one of leader, follower"):
        seeds.SeedStep(1, "pause", "controller")
    with pytest.raises(ConfigError, match="a throttle needs a rate"):
        seeds.SeedStep(1, "throttle", "follower")
    with pytest.raises(ConfigError, match="only a throttle has one; got pause at 10 kbit/s"):
        seeds.SeedStep(1, "pause", "follower", kbit=10)
    with pytest.raises(ConfigError, match="after must be one of isr-full, isr-published, isr-shrunk, leader-alone, got 'soon'"):
        seeds.SeedStep(1, "pause", "leader", after="soon")
    with pytest.raises(ConfigError, match="unknown seed scenario 'nope'; known: stuck-follower"):
        seeds.seed_named("nope")


def test_every_seed_names_a_packaged_simulator_scenario() -> None:
    from insync.sim.scenario import scenario_names

    assert {s.sim for s in seeds.SEEDS} <= set(scenario_names())
    assert len({s.name for s in seeds.SEEDS}) == len(seeds.SEEDS)


def _event(kind: str, ts_ms: int, partition: int | None = 0, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "ts_ms": ts_ms, "partition": partition, **fields}


def test_log_start_race_claims() -> None:
    good = [_shrink(11_500, 3, 10_000), _event("truncate", 12_000, reason="leader_log_start"), _expand(13_000, 3)]
    assert seeds.check_log_start_race(_run(good)) == []
    bad = [_event("partition_failed", 11_000, leader=1, error="OFFSET_OUT_OF_RANGE"),
           _event("truncate", 12_000, reason="diverging_epoch")]
    failures = seeds.check_log_start_race(_run(bad))
    assert [f.split(" (")[0] for f in failures] == ["no partition failed", "the follower left and rejoined",
                                                   "the follower moved to the leader's log start"]


def test_failing_partition_claims() -> None:
    failed = _event("partition_failed", 10_000, leader=1, error="KAFKA_STORAGE_ERROR")
    good = [failed, _shrink(11_300, 2, 10_000), {**_shrink(13_000, 2, 11_500), "partition": 3}, _expand(14_000, 2)]
    assert seeds.check_failing_partition(_run(good)) == []
    other_first = [failed, {**_shrink(11_300, 2, 10_000), "partition": 3}, _shrink(11_400, 2, 10_000)]
    failures = seeds.check_failing_partition(_run(other_first))
    assert [f.split(" (")[0] for f in failures] == ["the failed partition left the ISR first",
                                                   "the others stayed in the ISR for at least a lag",
                                                   "rejoined after the restart"]
    assert seeds.check_failing_partition(_run([failed])) == [
        "the failed partition left the ISR (seen: 0 shrinks)"]
    two = seeds.check_failing_partition(_run([failed, {**failed, "partition": 1}]))
    assert two[0] == "one partition failed (seen: [0, 1])"


def test_leader_failover_claims() -> None:
    moved = _event("leader_change", 12_000, reason="fenced", leader_before=1, leader_after=2, isr=[2, 3])
    assert seeds.check_leader_failover(_run([moved])) == []
    outside = {**moved, "isr": [3]}
    unclean = _event("leader_change", 13_000, reason="unclean", leader_before=-1, leader_after=3, isr=[3])
    failures = seeds.check_leader_failover(_run([outside, unclean], lost=2))
    assert [f.split(" (")[0] for f in failures] == ["every new leader in its ISR", "no unclean election",
                                                   "no acknowledged write lost"]
    assert seeds.check_leader_failover(_run([]))[0].startswith("a replica from the ISR took over")


def test_rolling_restart_claims() -> None:
    moved = _event("leader_change", 12_000, reason="shutdown", leader_before=1, leader_after=2, isr=[2, 3])
    fenced = _event("broker_fenced", 12_100, None, broker_id=1)
    assert seeds.check_rolling_restart(_run([moved, fenced, _expand(15_000, 1)])) == []
    crashed = {**moved, "reason": "fenced"}
    failures = seeds.check_rolling_restart(_run([crashed, fenced], offline_s=1.0, not_enough_replicas=3))
    assert [f.split(" (")[0] for f in failures] == ["broker 1's leaderships moved before it was let go",
                                                   "broker 1 rejoined the ISRs", "never offline or under min ISR",
                                                   "no NOT_ENOUGH_REPLICAS"]
    assert seeds.check_rolling_restart(_run([]))[0].startswith("brokers stopped")


def test_full_isr_follows_the_latest_isr_of_each_partition() -> None:
    from insync.chaos.seeds_run import full_isr

    created = [_event("leader_change", 1, p, leader_after=1, isr=[1, 2, 3], reason="created") for p in (0, 1)]
    assert full_isr(created, 2, 3)
    assert not full_isr(created, 3, 3)  # partition 2 never seen
    shrunk = [*created, {**_shrink(5, 3, 1), "partition": 1}]
    assert not full_isr(shrunk, 2, 3)
    assert full_isr([*shrunk, {**_expand(9, 3), "partition": 1, "isr_after": [1, 2, 3]}], 2, 3)
    offline = [*created, _event("leader_change", 9, 0, leader_after=-1, isr=[1, 2, 3], reason="fenced")]
    assert not full_isr(offline, 2, 3)


def test_isr_now_follows_elections_committed_changes_and_fenced_followers() -> None:
    from insync.chaos.seeds_run import isr_now

    created = _event("leader_change", 1, 0, leader_after=1, isr=[1, 2, 3], reason="created")
    other = {**created, "partition": 1, "leader_after": 2}
    assert isr_now([created, other], 0) == (1, [1, 2, 3])
    assert isr_now([], 0) == (-1, [])
    shrunk = [created, other, {**_shrink(5, 3, 1), "isr_after": [1, 2]}]
    assert isr_now(shrunk, 0) == (1, [1, 2])
    # The controller removes a fenced follower with no event of the partition's own; the leader stays.
    fenced = [*shrunk, _event("broker_fenced", 6, None, broker_id=2), _event("broker_fenced", 7, None, broker_id=1)]
    assert isr_now(fenced, 0) == (1, [1])
    offline = [*fenced, _event("leader_change", 8, 0, leader_after=-1, isr=[], reason="fenced")]
    assert isr_now(offline, 0) == (-1, [])


def test_published_since_the_last_isr_change() -> None:
    from insync.chaos.seeds_run import published_since_isr_change

    propagated = _event("metadata_propagated", 7, None, changes=1)
    assert published_since_isr_change([]) and published_since_isr_change([propagated])
    assert not published_since_isr_change([propagated, _shrink(8, 3, 1)])
    assert published_since_isr_change([_shrink(8, 3, 1), {**propagated, "ts_ms": 9}])


def test_slow_follower_claims() -> None:
    assert seeds.check_slow_follower(_run([_shrink(11_400, 3, 10_000, "slow")])) == []
    failures = seeds.check_slow_follower(_run([_shrink(12_600, 3, 10_000, "stuck")]))
    assert [f.split(" (")[0] for f in failures] == ["removed as slow", "within 1.5 x the lag"]


def test_bursty_claims() -> None:
    flap = [_shrink(11_400, 3, 11_000, "messages"), _expand(11_900, 3)]
    assert seeds.check_bursty_count_rule(_run(flap)) == []
    assert seeds.check_bursty_time_rule(_run([])) == []
    assert seeds.check_bursty_time_rule(_run(flap))[0].startswith("no ISR shrink")
    failures = seeds.check_bursty_count_rule(_run([_shrink(11_400, 3, 10_000, "slow")]))
    assert [f.split(" (")[0] for f in failures] == ["removed by the count rule only", "and back"]


def test_last_replica_standing_claims() -> None:
    offline = _event("leader_change", 12_000, reason="fenced", leader_before=1, leader_after=-1, isr=[1], elr=[2, 3])
    eligible = _event("leader_change", 14_000, reason="unfenced", leader_before=-1, leader_after=3, isr=[3])
    again = {**eligible, "leader_after": 1, "isr": [1]}
    assert seeds.check_last_replica_standing(_run([offline, eligible])) == []
    failures = seeds.check_last_replica_standing(_run([offline, again], lost=200))
    assert [f.split(" (")[0] for f in failures] == ["an eligible follower leads, not the crashed leader",
                                                   "no acknowledged write lost"]
    assert seeds.check_last_replica_standing(_run([eligible]))[0].startswith("offline once the leader crashed")
    assert seeds.check_last_replica_standing_kafka_3(_run([offline, again], lost=200)) == []
    failures = seeds.check_last_replica_standing_kafka_3(_run([offline, eligible]))
    assert [f.split(" (")[0] for f in failures] == ["the crashed leader elected again", "acknowledged writes lost"]


def test_the_seeds_that_need_network_namespaces_say_so() -> None:
    assert {s.name for s in seeds.SEEDS if s.namespaces} == {"last-replica-standing", "last-replica-standing-kafka-3",
                                                              "slow-follower"}
    with pytest.raises(ConfigError, match="target must be a broker id or one of leader, follower, follower2"):
        seeds.SeedStep(1, "isolate", "all")


def _propagation_run(lone_delay_ms: int = 2200, window: tuple[int, ...] = (9_000,), late_shrink: bool = False,
                     seen: tuple[dict[str, Any], ...] = ()) -> seeds.SeedRun:
    """Broker 2 follows partitions 0 and 1 (leader 1) and leads 2; it is paused, leaves both ISRs at 5 s (one
    at 8.6 s with `late_shrink`) and rejoins; partition 0 then fails on broker 3, removed at 12 s."""
    created = [_event("leader_change", 1, p, leader_after=leader, isr=[leader, 2, 3] if leader != 2 else [2, 1, 3],
                      reason="created") for p, leader in ((0, 1), (1, 1), (2, 2))]
    burst = [{**_shrink(5_000, 2, 3_500), "partition": 0, "isr_after": [1, 3]},
             {**_shrink(8_600 if late_shrink else 5_000, 2, 3_500), "partition": 1, "isr_after": [1, 3]},
             {**_expand(6_000, 2), "partition": 0, "isr_after": [1, 3, 2]}]
    lone = {**_shrink(12_000, 3, 10_500), "partition": 0, "isr_after": [1, 2]}
    props = [_event("metadata_propagated", ts, None, changes=3) for ts in (*window, 12_000 + lone_delay_ms)]
    events = sorted([*created, *burst, _event("partition_failed", 10_000, 0, leader=1, error="KAFKA_STORAGE_ERROR"),
                     lone, *props], key=lambda e: e["ts_ms"])
    return _run(events, propagation_ms=(1000, 2000), seen=seen, lag_ms=1500)


def _seen(ts_ms: int, broker: int, partition: int, isr: list[int]) -> dict[str, Any]:
    return {"ts_ms": ts_ms, "broker": broker, "partition": partition, "isr": isr}


def test_isr_propagation_claims_hold_for_one_batch_and_a_lone_change_a_blackout_later() -> None:
    assert seeds.check_isr_propagation(_propagation_run()) == []
    # A real publication may come a little under a blackout after the event (the event follows the commit).
    assert seeds.check_isr_propagation(_propagation_run(lone_delay_ms=1900)) == []
    assert seeds.check_isr_propagation(_propagation_run(lone_delay_ms=1700))
    seen = (_seen(2_000, 1, 0, [1, 2, 3]), _seen(2_000, 3, 0, [1, 2, 3]), _seen(9_300, 1, 0, [1, 3, 2]),
            _seen(14_500, 1, 0, [2, 1]), _seen(14_400, 3, 0, [1, 2]))
    assert seeds.check_isr_propagation(_propagation_run(seen=seen)) == []


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
def test_isr_propagation_claims_fail_naming_what_was_seen(run: seeds.SeedRun, claim: str) -> None:
    failures = seeds.check_isr_propagation(run)
    assert len(failures) == 1 and claim in failures[0], failures


def test_isr_propagation_needs_its_faults_to_have_happened() -> None:
    assert seeds.check_isr_propagation(_run([])) == ["a partition failed on a follower (seen: none)"]
    failed = _event("partition_failed", 10_000, 0, leader=1, error="KAFKA_STORAGE_ERROR")
    assert seeds.check_isr_propagation(_run([failed]))[0].startswith("ISR changes around the pause, then a lone one")


def test_propagation_timers_from_a_broker_configuration() -> None:
    from insync.chaos.seeds_run import propagation_ms

    assert propagation_ms({}) == (2500, 5000)  # Kafka's hard-coded values
    assert propagation_ms({"isr.change.propagation.blackout.ms": "2000"}) == (2500, 2000)
    seed = seeds.seed_named("isr-propagation")
    from insync.properties import parse_overrides

    assert propagation_ms(parse_overrides(seed.broker_configs())) == (1000, 2000)  # the seed's own win over BASE


def test_many_removals_are_summed_up_by_reason() -> None:
    many = [_shrink(11_000 + 100 * i, 3, 10_000) for i in range(9)] + [_shrink(12_500, 2, 10_000, "slow")]
    assert seeds.figures("x", _run(many), [])["removed (reason: waited / lag)"] == "slow x1: 2.5, stuck x9: 1-1.8"
