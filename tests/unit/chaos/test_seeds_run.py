"""The real run's reading of the brokers' events: intervals, the ISR as the events tell it, publications, the
propagation timers a configuration sets."""

from __future__ import annotations

from seed_events import event, expand, shrink

from insync.chaos import seeds
from insync.chaos.seeds_run import interval_s


def test_interval_seconds_per_partition_and_open_at_the_end() -> None:
    events = [{"type": "partition_offline", "ts_ms": 1000, "partition": 0},
              {"type": "partition_offline", "ts_ms": 1500, "partition": 1},
              {"type": "partition_online", "ts_ms": 3000, "partition": 0},
              {"type": "isr_expand", "ts_ms": 4000, "partition": 1, "added": []}]
    assert interval_s(events, "partition_offline", "partition_online") == 4.5  # 2 s + 2.5 s still open
    assert interval_s([], "partition_offline", "partition_online") == 0


def test_full_isr_follows_the_latest_isr_of_each_partition() -> None:
    from insync.chaos.seeds_run import full_isr

    created = [event("leader_change", 1, p, leader_after=1, isr=[1, 2, 3], reason="created") for p in (0, 1)]
    assert full_isr(created, 2, 3)
    assert not full_isr(created, 3, 3)  # partition 2 never seen
    shrunk = [*created, {**shrink(5, 3, 1), "partition": 1}]
    assert not full_isr(shrunk, 2, 3)
    assert full_isr([*shrunk, {**expand(9, 3), "partition": 1, "isr_after": [1, 2, 3]}], 2, 3)
    offline = [*created, event("leader_change", 9, 0, leader_after=-1, isr=[1, 2, 3], reason="fenced")]
    assert not full_isr(offline, 2, 3)


def test_isr_now_follows_elections_committed_changes_and_fenced_followers() -> None:
    from insync.chaos.seeds_run import isr_now

    created = event("leader_change", 1, 0, leader_after=1, isr=[1, 2, 3], reason="created")
    other = {**created, "partition": 1, "leader_after": 2}
    assert isr_now([created, other], 0) == (1, [1, 2, 3])
    assert isr_now([], 0) == (-1, [])
    shrunk = [created, other, {**shrink(5, 3, 1), "isr_after": [1, 2]}]
    assert isr_now(shrunk, 0) == (1, [1, 2])
    # The controller removes a fenced follower with no event of the partition's own; the leader stays.
    fenced = [*shrunk, event("broker_fenced", 6, None, broker_id=2), event("broker_fenced", 7, None, broker_id=1)]
    assert isr_now(fenced, 0) == (1, [1])
    offline = [*fenced, event("leader_change", 8, 0, leader_after=-1, isr=[], reason="fenced")]
    assert isr_now(offline, 0) == (-1, [])


def test_published_since_the_last_isr_change() -> None:
    from insync.chaos.seeds_run import published_since_isr_change

    propagated = event("metadata_propagated", 7, None, changes=1)
    assert published_since_isr_change([]) and published_since_isr_change([propagated])
    assert not published_since_isr_change([propagated, shrink(8, 3, 1)])
    assert published_since_isr_change([shrink(8, 3, 1), {**propagated, "ts_ms": 9}])


def test_propagation_timers_from_a_broker_configuration() -> None:
    from insync.chaos.seeds_run import propagation_ms

    assert propagation_ms({}) == (2500, 5000)  # Kafka's hard-coded values
    assert propagation_ms({"isr.change.propagation.blackout.ms": "2000"}) == (2500, 2000)
    seed = seeds.seed_named("isr-propagation")
    from insync.properties import parse_overrides

    assert propagation_ms(parse_overrides(seed.broker_configs())) == (1000, 2000)  # the seed's own win over BASE
