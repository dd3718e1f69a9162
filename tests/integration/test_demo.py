"""`insync demo --fast` end to end: the acts happen, the seeds' claims show in the summary, nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from insync.cli.main import main

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--fast", "--dir", str(directory)]) == 0
    return directory


@pytest.mark.slow  # the whole fast demo on real processes, two minutes of both cores
def test_fast_demo_summary(demo_dir: Path, capfd: pytest.CaptureFixture[str]) -> None:
    tmp_path = demo_dir
    # The clients' connection errors while brokers are paused and killed go to clients.log, not the terminal.
    assert "|FAIL|" not in capfd.readouterr().err
    assert "FAIL [rdkafka#" in (tmp_path / "clients.log").read_text()
    summary = json.loads((tmp_path / "summary.json").read_text())
    acts = {a["name"]: a for a in summary["acts"]}
    assert list(acts) == ["pause-follower", "slow-leader-kip501-off", "slow-leader-kip501-on", "failing-partition",
                          "kill-leader"]
    assert acts["pause-follower"]["shrinks"] >= 1 and acts["pause-follower"]["expands"] >= 1
    # Seed 000: without KIP-501 the slow leader's followers drop out and its death takes the partition offline;
    # with it they stay in sync and a follower takes over: no offline time.
    assert acts["slow-leader-kip501-off"]["offline_s"] > 0
    assert acts["slow-leader-kip501-on"]["offline_s"] == 0
    assert all(a["acked"] > 0 for a in summary["acts"])
    for segment in summary["segments"]:
        verdict = segment["verdict"]
        assert (verdict["lost"], verdict["duplicated"], verdict["reordered"]) == (0, 0, 0), segment
    assert len(summary["event_logs"]) == 8
    failing = [json.loads(line) for path in summary["event_logs"] if "kip501-on" in path
               for line in Path(path).read_text().splitlines() if '"partition_failed"' in line]
    assert [(e["topic"], e["partition"]) for e in failing] == [("demo", 1)]  # one partition, the rest kept going
    seen = {json.loads(line)["type"] for path in summary["event_logs"]
            for line in Path(path).read_text().splitlines()}
    # KIP-501 on: the slow leader removed none of its followers from demo-0 before it was killed (the kill's own
    # removals are the controller's fencing, reason `fenced`, not the leader's shrink).
    slow = acts["slow-leader-kip501-on"]
    shrunk = [e for path in summary["event_logs"] if "kip501-on" in path for line in Path(path).read_text().splitlines()
            if (e := json.loads(line))["type"] == "isr_shrink" and e.get("topic") == "demo" and e["partition"] == 0
            and e["broker"] == slow["broker"] and slow["start_ms"] <= e["ts_ms"] <= slow["end_ms"]]
    assert shrunk == [], shrunk
    # Every event type shows up on real processes, except the two that need a follower whose fetch races the
    # leader's log start (seed 004) or a failed partition re-added by a new leader epoch (seed 002): the unit
    # tests of replication/follower.py and fetcher.py (and broker/fetchers.py) assert those; the unclean
    # recovery the demo never needs (tests/integration/test_unclean_recovery.py has it on real processes); the
    # authorizer's refusals, with no authorizer here (ACLs are on only with --secure; test_acls* have them); and
    # `isr_kept_pending_read`, which a read shorter than the lag needs only when the follower's turn between two
    # reads outlasts what the read leaves of the lag (a loaded machine's timing): the check above, the analysis
    # test and tests/unit/replication/test_partition.py assert KIP-501's outcome and the event.
    from insync.events import EventType

    unseen = {"log_start_bounded", "partition_unfailed", "unclean_recovery", "denied", "isr_kept_pending_read"}
    assert {str(t) for t in EventType} - seen <= unseen, (seen, slow)


def _analysed(demo_dir: Path, cluster: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The analysis of one cluster's logs: (episodes, data at risk, report page)."""
    from pyspark.sql import SparkSession

    out = demo_dir / "analysis" / cluster
    assert main(["analyze", str(demo_dir / cluster), "--out", str(out), "--master", "local[2]"]) == 0
    spark = SparkSession.builder.getOrCreate()
    tables = [[r.asDict() for r in spark.read.parquet(str(out / name)).collect()]
              for name in ("episodes", "data_at_risk")]
    return tables[0], tables[1], (out / "report.html").read_text()


# The analysis dates a follower's episode from when it was last caught up: up to a fetch round or two before the
# act's fault reached it (1.4 s seen, at a kill), so an act's window is read that much earlier.
EPISODE_BACKDATING_MS = 2_000


def _during(episodes: list[dict[str, Any]], act: dict[str, Any]) -> list[dict[str, Any]]:
    """The episodes that began while the act ran."""
    start_ms, end_ms = act["start_ms"] - EPISODE_BACKDATING_MS, act["end_ms"] - EPISODE_BACKDATING_MS
    return [e for e in episodes if start_ms <= e["start"].timestamp() * 1000 <= end_ms]


@pytest.mark.slow  # two Spark analyses, six minutes of both cores: `make test-slow`, which CI runs too
def test_the_analysis_names_the_cause_each_act_created(demo_dir: Path) -> None:
    """For each act the analysis names the cause the act created."""
    acts = {a["name"]: a for a in json.loads((demo_dir / "summary.json").read_text())["acts"]}
    episodes, risk, report = _analysed(demo_dir, "kip501-off")
    paused = acts["pause-follower"]
    assert {(e["cause"], e["broker_at_fault"]) for e in _during(episodes, paused)} == {("follower", paused["broker"])}
    slow = acts["slow-leader-kip501-off"]
    causes = {(e["cause"], e["broker_at_fault"]) for e in _during(episodes, slow)}
    assert ("leader", slow["broker"]) in causes, causes
    # Its followers' fetches were pending at the leader: the evidence, not a guess from the pattern.
    assert all(e["pending"] > 0 for e in _during(episodes, slow) if e["cause"] == "leader")
    # The only other cause: the killed leader leaving the ISRs it followed in.
    assert causes <= {("leader", slow["broker"]), ("follower", slow["broker"]), ("stuck", None)}, causes
    assert "follower.fetch.pending.reads.insync.enable=true" in report

    episodes, risk, report = _analysed(demo_dir, "kip501-on")
    assert not [e for e in episodes if e["cause"] == "leader"], episodes  # KIP-501 kept the followers in sync
    slow = acts["slow-leader-kip501-on"]
    assert {e["broker_at_fault"] for e in _during(episodes, slow)} <= {slow["broker"], None}
    failing = acts["failing-partition"]
    failed = [e for e in _during(episodes, failing) if e["cause"] == "failed"]
    assert [(e["broker_at_fault"], e["topic_partitions"]) for e in failed] == [(failing["broker"], ["demo-1"])]
    # The killed leader: a leader change, and no acknowledged write ever rested on one copy, nor was given up.
    killed = acts["kill-leader"]
    assert [r for r in risk if r["single_replica_isr_ms"] > 0 or r["unclean_elections"] > 0] == []
    assert "follower.fetch.pending.reads.insync.enable=true" not in report
    moves = [e for path in (demo_dir / "kip501-on").glob("node-*/data/events.jsonl")
             for e in map(json.loads, path.read_text().splitlines())
             if e["type"] == "leader_change" and e["leader_before"] == killed["broker"]
             and killed["start_ms"] <= e["ts_ms"] <= killed["end_ms"]]
    assert ("demo", 2) in {(e["topic"], e["partition"]) for e in moves}, moves


def test_client_log_routes_the_clients_logger_to_a_file_and_restores_it(tmp_path: Path) -> None:
    import logging

    from insync.chaos.history import CLIENT_LOGGER, client_conf
    from insync.cli.logs import client_log

    logger = logging.getLogger(CLIENT_LOGGER)
    assert client_conf({"bootstrap.servers": "x"})["logger"] is logger
    before = (logger.propagate, list(logger.handlers), logger.level)
    with client_log(tmp_path / "clients.log"):
        assert not logger.propagate
        logger.warning("Connect to ipv4#127.0.0.1:1 failed")
    assert (logger.propagate, list(logger.handlers), logger.level) == before  # as it was, whatever ran before
    assert "WARNING Connect to ipv4#127.0.0.1:1 failed" in (tmp_path / "clients.log").read_text()
