"""Kafka's log lines as `insync monitor` events (spark/monitor/kafka_events.py), on the real lines of the Kafka 4.1
and 3.9 runs in fixtures/kafka-runs: each kind of line read with its values, the runs' ISR changes as the events
`rules.step` folds and the alerts it then raises (the paused follower named, nothing for the cluster's shutdown),
the poll as a second witness, and the tail of a growing file (spark/monitor/kafka_source.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from insync.spark.monitor import kafka_events as ke
from insync.spark.monitor import rules
from insync.spark.monitor.kafka_source import log_files, read_lines

RUNS = Path(__file__).parent / "fixtures" / "kafka-runs"


def _facts(run: Path) -> list[dict[str, Any]]:
    facts = []
    for path in log_files([str(run)]):
        previous = None
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            fact = ke.parse_line(line, previous)
            previous = ke.line_time_ms(line) or previous
            if fact is not None:
                facts.append(fact)
    return sorted(facts, key=lambda f: f["ts_ms"])


def _events(run: Path, replicas: dict[str, list[int]] | None = None) -> list[dict[str, Any]]:
    """The run's events; with `replicas` (`topic-N` -> ids, from truth.json), first a poll stating them whole, as
    the monitor's first one does (ZooKeeper mode's lines never list a partition's replicas)."""
    translator = ke.Translator()
    if replicas:
        translator.snapshot(0, [ke.PartitionMeta(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1]), r[0], tuple(r),
                                                 tuple(r)) for tp, r in replicas.items()])
    return [e for f in _facts(run) for e in translator.fact(f)]


def _alerts(events: list[dict[str, Any]], thresholds: rules.Thresholds) -> list[rules.Alert]:
    """The events through `rules.step` one at a time, each at its own time, as the monitor's query folds them."""
    states: dict[tuple[str, int], rules.State] = {}
    alerts: list[rules.Alert] = []
    for e in events:
        key = (e["topic"], e["partition"])
        outcome = rules.step(states.get(key, rules.new_state()), *key, [e], e["ts_ms"], thresholds)
        states[key] = outcome.state
        alerts.extend(outcome.alerts)
    return alerts


def test_each_kind_of_line_is_read_with_its_values() -> None:
    shrink = ke.parse_line(
        "[2026-11-29 11:40:22,131] INFO [Partition slow-follower-kafka39-4 broker=1] Shrinking ISR from 1,3,2 to "
        "1,3. Leader: (highWatermark: 9401, endOffset: 18649). Out of sync replicas: (brokerId: 2, endOffset: 9401, "
        "lastCaughtUpTimeMs: 1795952377883). (kafka.cluster.Partition)")
    assert shrink is not None and shrink["kind"] == "isr_shrink" and shrink["broker"] == 1, shrink
    assert (shrink["topic"], shrink["partition"], shrink["isr_before"], shrink["isr_after"]) == (
        "slow-follower-kafka39", 4, [1, 2, 3], [1, 3])
    assert shrink["out_of_sync"] == {2: {"leo": "9401", "caught_up_ms": "1795952377883"}}
    assert shrink["ts_ms"] == ke.log_time_ms("2026-11-29 11:40:22,131") == 1795952422131
    fenced = ke.parse_line("[2026-11-29 11:30:11,539] INFO [QuorumController id=0] Fencing broker 3 at epoch 27 "
                           "because its session has timed out. (org.apache.kafka.controller.ReplicationControlManager)")
    assert fenced is not None and (fenced["kind"], fenced["broker_id"]) == ("broker_fenced", 3), fenced
    skipped = next(f for f in _facts(RUNS / "4.1" / "paused-follower") if f["kind"] == "isr_update"
                   and f.get("topic") == "paused-follower-kafka41" and f["isr_after"] == [1, 2])
    assert skipped["partition_epoch"] >= 1 and skipped["replicas"] == [1, 2, 3] and skipped["leader"] in (1, 2)
    assert ke.parse_line("[2026-11-29 11:30:11,618] INFO [ReplicaFetcherManager on broker 1] Removed fetcher for "
                         "partitions Set(t-2) (kafka.server.ReplicaFetcherManager)") is None
    assert ke.parse_line("\tat kafka.cluster.Partition.appendRecordsToLeader(Partition.scala:1)", 5) is None


def test_a_paused_follower_is_named_and_the_clusters_shutdown_raises_nothing() -> None:
    for version in ("4.1", "3.9"):
        run = RUNS / version / "paused-follower"
        truth = json.loads((run / "truth.json").read_text(encoding="utf-8"))
        follower, topic = truth["fault"]["broker"], truth["topic"]
        events = [e for e in _events(run, truth["replicas"]) if e["topic"] == topic]
        shrinks = [e for e in events if e["type"] == "isr_shrink"]
        hosted = sorted(int(p.rsplit("-", 1)[1]) for p, r in truth["replicas"].items() if follower in r)
        assert sorted({e["partition"] for e in shrinks}) == hosted, (version, shrinks)
        assert all([r["broker"] for r in e["removed"]] == [follower] for e in shrinks), (version, shrinks)
        assert all(truth["fault"]["start_ms"] <= e["ts_ms"] <= truth["fault"]["end_ms"] for e in shrinks), version
        ends = {e["partition"] for e in events if e["type"] == "under_replicated_end"}
        assert ends == set(hosted), (version, ends)
        alerts = _alerts(events, rules.Thresholds(urp_ms=1_000))
        urp = [a for a in alerts if a.kind == "under_replicated"]
        assert sorted(a.partition for a in urp) == hosted, (version, alerts)
        assert all(f"follower {follower} " in a.cause for a in urp), (version, urp)
        assert all(a.since_ms < truth["isr_whole_ms"] for a in alerts), (version, alerts)


def test_the_controllers_fencing_is_the_reason_given() -> None:
    run = RUNS / "4.1" / "paused-follower"
    shrink = next(e for e in _events(run) if e["type"] == "isr_shrink")
    assert "fenced by the controller" in shrink["removed"][0]["reason"], shrink


def test_a_leader_dropping_every_follower_is_leader_side() -> None:
    lines = [f"[2026-11-29 11:40:{s},000] INFO [Partition t-0 broker=1] Shrinking ISR from {before} to {after}. "
             f"Leader: (highWatermark: 10, endOffset: 90). Out of sync replicas: (brokerId: {gone}, endOffset: 10, "
             "lastCaughtUpTimeMs: 1795952377883). (kafka.cluster.Partition)"
             for s, before, after, gone in (("20", "1,2,3", "1,3", 2), ("21", "1,3", "1", 3))]
    translator = ke.Translator()
    translator.snapshot(1795952400000, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2, 3), 2)], [1, 2, 3])
    events = [e for line in lines for e in translator.fact(ke.parse_line(line) or {})]
    assert [e["type"] for e in events] == ["isr_shrink", "isr_shrink", "under_min_isr_start"], events
    side = [a for a in _alerts(events, rules.Thresholds()) if a.kind == "leader_side"]
    assert side and "broker 1's own reads were slow" in side[0].cause, side


def test_the_poll_fills_in_what_no_line_said_and_yields_to_a_fresh_line() -> None:
    translator = ke.Translator()
    assert translator.snapshot(1_000, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2, 3), 2)], [1, 2, 3]) == [
        {"ts_ms": 1_000, "topic": "t", "partition": 0, "source": "metadata", "type": "leader_change",
         "leader_before": -1, "leader_after": 1, "isr": [], "reason": "isr_change"}]
    line = ("[1970-01-01 00:00:05,000] INFO [Broker id=1] Skipped the become-leader state change for t-0 with topic "
            "id Some(abc) and partition state LeaderAndIsrPartitionState(topicName='t', partitionIndex=0, "
            "controllerEpoch=-1, leader=1, leaderEpoch=0, isr=[1, 2], partitionEpoch=4, replicas=[1, 2, 3], "
            "addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is already the "
            "leader with leader epoch 0.")
    fact = ke.parse_line(line)
    assert fact is not None, line
    shrink = translator.fact(fact)
    assert [e["type"] for e in shrink] == ["isr_shrink"] and shrink[0]["removed"] == [
        {"broker": 3, "reason": "left the ISR"}], shrink
    # A poll a moment after the line, from a broker whose metadata is behind, changes nothing ...
    assert translator.snapshot(5_500, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2, 3), 2)]) == []
    assert translator.fact(fact) == []  # ... and the same statement again is no change
    # ... while one past the grace is the better witness.
    later = translator.snapshot(5_000 + ke.METADATA_GRACE_MS, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2, 3))])
    assert [e["type"] for e in later] == ["isr_expand", "under_replicated_end"], later
    assert translator.troubled() == []


def test_a_broker_shutting_down_leaves_isrs_for_no_fault() -> None:
    translator = ke.Translator()
    translator.snapshot(1_000, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2, 3))], [1, 2, 3])
    down = ke.parse_line("[1970-01-01 00:00:02,000] INFO [BrokerServer id=3] Transition from STARTED to SHUTTING_DOWN "
                         "(kafka.server.BrokerServer)")
    assert down is not None and translator.fact(down) == []
    assert translator.snapshot(9_000, [ke.PartitionMeta("t", 0, 1, (1, 2, 3), (1, 2))]) == []
    assert not translator.all_stopping()
    for broker in (1, 2):
        translator.fact({"kind": "controlled_shutdown", "ts_ms": 9_500, "broker": None, "broker_id": broker})
    assert translator.all_stopping()


def test_the_tail_takes_whole_lines_up_to_a_time(tmp_path: Path) -> None:
    log = tmp_path / "node-1" / "server.log"
    log.parent.mkdir()
    log.write_text("[1970-01-01 00:00:01,000] INFO a\n[1970-01-01 00:00:03,000] INFO b\n[1970-01-01 00:00:0",
                   encoding="utf-8")
    assert log_files([str(tmp_path)]) == [str(log)]
    lines, position = read_lines(str(log), [], 2_000)
    assert lines == ["[1970-01-01 00:00:01,000] INFO a"] and position[1] == len(lines[0]) + 1
    lines, position = read_lines(str(log), position, None)
    assert lines == ["[1970-01-01 00:00:03,000] INFO b"], lines
    log.write_text("[1970-01-01 00:00:04,000] INFO c\n", encoding="utf-8")  # truncated, as by a rotation
    assert read_lines(str(log), position, None)[0] == ["[1970-01-01 00:00:04,000] INFO c"]


def test_the_rest_of_a_log_log4j_rolled_is_read_before_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[1970-01-01 00:00:01,000] INFO a\n", encoding="utf-8")
    lines, position = read_lines(str(log), [], None)
    assert lines == ["[1970-01-01 00:00:01,000] INFO a"]
    with log.open("a", encoding="utf-8") as f:
        f.write("[1970-01-01 00:00:02,000] INFO b, before the roll\n")
    log.rename(tmp_path / "server.log.1970-01-01-00")  # log4j's hourly roll, then a new server.log
    log.write_text("[1970-01-01 01:00:00,000] INFO c\n", encoding="utf-8")
    lines, position = read_lines(str(log), position, None)
    assert lines == ["[1970-01-01 00:00:02,000] INFO b, before the roll"]
    lines, position = read_lines(str(log), position, None)
    assert lines == ["[1970-01-01 01:00:00,000] INFO c"]
    assert read_lines(str(log), position, None)[0] == []
