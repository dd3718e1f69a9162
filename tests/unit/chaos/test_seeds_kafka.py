"""A Kafka seed run's figures from the brokers' metadata and server.log (chaos/seeds_kafka.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from insync.chaos import seeds, seeds_kafka
from insync.chaos.seed_claims import check_rolling_restart, check_stuck_follower
from insync.chaos.seed_model import SeedRun
from insync.chaos.seeds_kafka import Fired, PartitionState

# Real lines of Kafka 3.9's server.log (tests/spark/fixtures/kafka-runs/3.9/slow-follower).
SHRINK = ("[2026-11-29 11:40:22,012] INFO [Partition slow-follower-kafka39-5 broker=3] Shrinking ISR from 3,1,2 to 3,1."
          " Leader: (highWatermark: 7047, endOffset: 17511). Out of sync replicas: (brokerId: 2, endOffset: 7047, "
          "lastCaughtUpTimeMs: 1795952378616). (kafka.cluster.Partition)")
REFUSED = ("org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the current ISR Set(1) is "
           "insufficient to satisfy the min.isr requirement of 2 for partition t-0")


def _seen(ts_ms: int, broker: int, leader: int, epoch: int, isr: list[int], elr: list[int] | None = None
          ) -> dict[str, object]:
    return {"ts_ms": ts_ms, "broker": broker, "partition": 0, "leader": leader, "leader_epoch": epoch, "isr": isr,
            "elr": elr or []}


def test_a_broker_back_with_old_metadata_is_behind_not_news() -> None:
    seen = [_seen(0, b, 1, 0, [1, 2, 3]) for b in (1, 2, 3)]
    seen += [_seen(1000, 1, 1, 0, [1, 2]), _seen(1100, 2, 1, 0, [1, 2])]  # 3 paused: it keeps its old answer
    seen += [_seen(2000, 3, 1, 0, [1, 2])]  # 3 resumed, learns it was removed: not a change of the partition
    seen += [_seen(2500, 1, 1, 0, [1, 2, 3]), _seen(2600, 2, 1, 0, [1, 2, 3]), _seen(2700, 3, 1, 0, [1, 2, 3])]
    history = seeds_kafka.consolidate(seen)
    assert [(s.ts_ms, s.isr) for s in history] == [(0, (1, 2, 3)), (1000, (1, 2)), (2500, (1, 2, 3))]


def test_a_stale_answer_at_the_same_epoch_is_not_an_expansion() -> None:
    seen = [_seen(0, b, 1, 0, [1, 2, 3]) for b in (1, 2, 3)]
    seen += [_seen(1000, 1, 1, 0, [1, 2]), _seen(1000, 2, 1, 0, [1, 2])]
    seen += [_seen(1500, 3, 1, 0, [1, 3])]  # broker 3 never saw [1, 2]: behind, whatever it says
    seen += [_seen(1600, 1, 2, 1, [2])]  # a newer leader epoch is news from anyone
    history = seeds_kafka.consolidate(seen)
    assert [(s.leader, s.isr) for s in history] == [(1, (1, 2, 3)), (1, (1, 2)), (2, (2,))]


def test_events_name_a_leaders_removal_lag_with_its_last_caught_up_time_and_the_controllers_fenced() -> None:
    caught_up = seeds_kafka.shrink_lines([SHRINK, "unrelated line"], "slow-follower-kafka39")
    line_ms = int(datetime(2026, 11, 29, 11, 40, 22, 12000).timestamp() * 1000)
    assert caught_up == {(5, 2): [(line_ms, 1795952378616)]}
    history = [PartitionState(line_ms - 5000, 5, 3, 0, (3, 1, 2)), PartitionState(line_ms + 100, 5, 3, 0, (3, 1)),
               PartitionState(line_ms + 9000, 5, 3, 0, (3,))]
    events = seeds_kafka.events(history, [], caught_up)
    shrinks = [e for e in events if e["type"] == "isr_shrink"]
    assert [e["removed"] for e in shrinks] == [[{"broker": 2, "reason": "lag", "last_caught_up_ms": 1795952378616}],
                                               [{"broker": 1, "reason": "fenced"}]]


def test_leader_changes_say_shutdown_fenced_unclean_and_offline() -> None:
    fired = [Fired("stop", 1, 1000, 3000)]
    history = [PartitionState(0, 0, 1, 0, (1, 2, 3)), PartitionState(1500, 0, 2, 1, (2, 3)),
               PartitionState(5000, 0, -1, 2, (3,), elr=(2,)), PartitionState(6000, 0, 2, 3, (2,)),
               PartitionState(7000, 0, 1, 4, (1,))]
    changes = [e for e in seeds_kafka.events(history, fired, {}) if e["type"] == "leader_change"]
    assert [(e["leader_before"], e["leader_after"], e["reason"]) for e in changes] == [
        (-1, 1, "created"), (1, 2, "shutdown"), (2, -1, "fenced"), (-1, 2, "fenced"), (2, 1, "unclean")]
    kinds = [e["type"] for e in seeds_kafka.events(history, fired, {}) if e["type"].startswith("partition_")]
    assert kinds == ["partition_offline", "partition_online"]


def test_intervals_are_partition_seconds_under_each_condition() -> None:
    history = [PartitionState(0, 0, 1, 0, (1, 2, 3)), PartitionState(1000, 0, 1, 0, (1, 2)),
               PartitionState(3000, 0, 1, 0, (1,)), PartitionState(4000, 0, -1, 1, ()),
               PartitionState(4500, 0, 1, 2, (1, 2, 3)), PartitionState(0, 1, 2, 0, (2, 3))]
    assert seeds_kafka.intervals_s(history, 6000, 3, 2) == (3.5 + 6.0, 1.5, 0.5)


def test_refused_produces_are_counted_from_the_leaders_log_for_the_topic() -> None:
    assert seeds_kafka.refused([REFUSED, REFUSED.replace("t-0", "other-0"), "INFO nothing"], "t") == 1


def test_kafka_settings_drop_insyncs_own_keys_and_zookeeper_mode_takes_its_session() -> None:
    seed = seeds.seed_named("stuck-follower")
    kraft = seeds_kafka.kafka_configs(seed.broker_configs(), kraft=True)
    assert not [c for c in kraft if c.startswith(("isr.change.", "fault.injection."))]
    assert "replica.lag.time.max.ms=1500" in kraft and "broker.session.timeout.ms=8000" in kraft
    zookeeper = seeds_kafka.kafka_configs(seed.broker_configs(), kraft=False)
    assert "zookeeper.session.timeout.ms=8000" in zookeeper
    assert not [c for c in zookeeper if c.startswith("broker.")]
    race = seeds.seed_named("log-start-race").broker_configs()
    assert "log.segment.bytes=1048576" in seeds_kafka.kafka_configs(race, kraft=True)
    assert "log.segment.bytes=65536" in seeds_kafka.kafka_configs(race, kraft=False)


def test_seeds_needing_insyncs_fault_file_or_the_count_rule_say_why_not_on_kafka() -> None:
    for kraft, elr_seed in ((True, "last-replica-standing"), (False, "last-replica-standing-kafka-3")):
        why = {seed.name: seeds_kafka.unavailable(seed, kraft) for seed in seeds.SEEDS}
        runnable = sorted(name for name, reason in why.items() if reason is None)
        slow_leader = ["slow-leader-reads-kip501-on"] + ([] if kraft else ["slow-leader-reads-kip501-off"])
        assert runnable == sorted([elr_seed, "leader-failover", "rolling-restart", "slow-follower", "stuck-follower",
                                   "partitioned-follower", "log-start-race", "slow-link-follower", *slow_leader]), why
        assert "fault file" in str(why["failing-partition"]) and "0.9" in str(why["bursty-producer-count-rule"])
        assert "ELR" in str(why["last-replica-standing-kafka-3" if kraft else "last-replica-standing"])


def test_the_claims_take_kafkas_lag_removal_for_stuck_and_its_stop_for_a_fence() -> None:
    history = [PartitionState(0, 0, 1, 0, (1, 2, 3)), PartitionState(3000, 0, 1, 0, (1, 2)),
               PartitionState(9000, 0, 1, 0, (1, 2, 3))]
    made = seeds_kafka.events(history, [], {(0, 3): [(3000, 1000)]})
    run = SeedRun("kafka 4.1.2", 1500, tuple(made), acked=10, lost=0, duplicated=0, not_enough_replicas=0,
                  urp_s=6.0, under_min_isr_s=0, offline_s=0)
    assert check_stuck_follower(run) == []
    assert "one removal, reason stuck" in check_stuck_follower(replace(run, side="real"))[0]  # insync names it
    stop = [Fired("stop", 1, 1000, 2500)]
    history = [PartitionState(0, 0, 1, 0, (1, 2, 3)), PartitionState(1500, 0, 2, 1, (2, 3)),
               PartitionState(6000, 0, 2, 1, (2, 3, 1))]
    made = [*seeds_kafka.events(history, stop, {}), *seeds_kafka.fenced_events(stop)]
    run = SeedRun("kafka 3.9.1", 1500, tuple(sorted(made, key=lambda e: e["ts_ms"])), 10, 0, 0, 0, 4.5, 0, 0)
    assert check_rolling_restart(run) == []
