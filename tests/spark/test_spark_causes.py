"""Episode causes from evidence (issue 21): a leader whose followers' fetches were pending, the same pattern in logs
that do not say, a failed partition, and one time group split by cause and by the broker at fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from insync.events import Event, EventType
from insync.spark.analysis import health, job
from insync.spark.analysis.inputs import discover

pytestmark = pytest.mark.timeout(600)

T = 1_750_000_000_000
GROUP = 100_000  # time groups this far apart are separate episodes


def _removed(brokers: list[int], ts: int, pending: bool | None) -> list[dict[str, Any]]:
    out = []
    for b in brokers:
        entry: dict[str, Any] = {"broker": b, "leo": 10, "last_caught_up_ms": ts - 5_000, "last_fetch_ms": ts - 5_000,
                                 "reason": "stuck"}
        if pending is not None:
            entry |= {"fetch_pending": pending, "fetch_pending_since_ms": ts - 4_000 if pending else None}
        out.append(entry)
    return out


def shrink(ts: int, leader: int, topic: str, p: int, before: list[int], removed: list[int],
           pending: bool | None) -> str:
    fields = {"isr_before": before, "isr_after": [b for b in before if b not in removed],
              "removed": _removed(removed, ts, pending), "leader_epoch": 1, "hw": 10, "leo": 12}
    line = json.loads(Event(ts, leader, EventType.ISR_SHRINK, topic, p, fields).to_json())
    if pending is None:
        line["v"] = 1  # written before the evidence existed
    return json.dumps(line)


LEADER_1 = [
    # Group 1: leader 1's slow reads of slow-0 and slow-1 (fetches pending), then broker 1 killed: out elsewhere.
    shrink(T, 1, "slow", 0, [1, 2, 3], [2, 3], True),
    shrink(T + 500, 1, "slow", 1, [1, 2, 3], [2, 3], True),
    # Group 2: the same in a log without the evidence: the pattern says leader.
    shrink(T + GROUP, 1, "old", 0, [1, 2, 3], [2, 3], None),
    shrink(T + GROUP + 500, 1, "old", 1, [1, 2, 3], [2, 3], None),
    # Group 3: the pattern, but broker 3 also left leader 2's partition: no leader blamed.
    shrink(T + 2 * GROUP, 1, "mixed", 0, [1, 2, 3], [2, 3], None),
    # Group 4: every follower out, but the leader says no fetch was pending: evidence wins over the pattern.
    shrink(T + 3 * GROUP, 1, "notslow", 0, [1, 2, 3], [2, 3], False),
]
LEADER_2 = [
    shrink(T + 5_000, 2, "other", 0, [1, 2, 3], [1], False),
    shrink(T + 5_200, 2, "other", 1, [1, 2, 3], [1], False),
    shrink(T + 2 * GROUP + 300, 2, "mixed", 1, [1, 2, 3], [3], None),
    # Group 5: broker 3 marked disk-1 failed, then left its ISR.
    shrink(T + 4 * GROUP + 5_000, 2, "disk", 1, [1, 2, 3], [3], False),
]

def expand(ts: int, leader: int, topic: str, p: int, before: list[int], added: list[int]) -> str:
    return Event(ts, leader, EventType.ISR_EXPAND, topic, p, {
        "isr_before": before, "isr_after": sorted(before + added), "added": [{"broker": b, "leo": 20} for b in added]
    }).to_json()


def plain(ts: int, broker: int, event_type: EventType, topic: str, p: int, **fields: Any) -> str:
    return Event(ts, broker, event_type, topic, p, fields).to_json()


RISK = T + 5 * GROUP
LEADER_4 = [
    # risk-0: ISR of one (min ISR 1) for 20 s: acknowledged writes on one copy.
    shrink(RISK, 4, "risk", 0, [4, 5], [5], False),
    expand(RISK + 20_000, 4, "risk", 0, [4], [5]),
    # refused-0: under min ISR for 10 s, 7 produce requests refused: nothing at risk.
    shrink(RISK + GROUP, 4, "refused", 0, [4, 5], [5], False),
    plain(RISK + GROUP, 4, EventType.UNDER_MIN_ISR_START, "refused", 0),
    plain(RISK + GROUP + 1_000, 4, EventType.PRODUCE_REJECTED, "refused", 0, error="NOT_ENOUGH_REPLICAS", count=7),
    expand(RISK + GROUP + 10_000, 4, "refused", 0, [4], [5]),
    plain(RISK + GROUP + 10_000, 4, EventType.UNDER_MIN_ISR_END, "refused", 0),
]
CONTROLLER = [
    plain(RISK + 2 * GROUP, 0, EventType.LEADER_CHANGE, "unclean", 0, leader_before=-1, leader_after=5,
          leader_epoch=3, isr=[5, 6], reason="unclean"),
    plain(RISK + 2 * GROUP, 0, EventType.UNCLEAN_RECOVERY, "unclean", 0, leader_after=5, leader_epoch=3,
          strategy="Balanced", reported=[], lost=[{"broker": 6, "from_offset": 40, "to_offset": 52, "records": 12}],
          records_lost=12),
]
PAUSED = RISK + 3 * GROUP
LEADERS_4_5 = [
    # Broker 7 paused: leader 4's lag check drops it 0.4 s before the controller fences it, leader 5 just after;
    # both removals are broker 7's fault. Broker 8 lags on two partitions later in the same time group.
    shrink(PAUSED, 4, "paused", 0, [4, 7, 9], [7], False),
    plain(PAUSED + 400, 0, EventType.BROKER_FENCED, None, None, broker_id=7),
    shrink(PAUSED + 450, 5, "paused", 1, [5, 7, 9], [7], False),
    plain(PAUSED + 2_900, 0, EventType.BROKER_UNFENCED, None, None, broker_id=7),
    expand(PAUSED + 3_000, 4, "paused", 0, [4, 9], [7]),
    expand(PAUSED + 3_000, 5, "paused", 1, [5, 9], [7]),
    shrink(PAUSED + 8_000, 4, "late", 0, [4, 8, 9], [8], False),
    shrink(PAUSED + 8_200, 5, "late", 1, [5, 8, 9], [8], False),
]
SLOW = RISK + 4 * GROUP
EARLY = SLOW + GROUP
BEHIND = [
    # Broker 6 falls behind on two partitions, then, still out of them, on a third 30 s later (another time
    # group): all its fault. Back in, its lone removal 20 s later is no one's.
    shrink(SLOW, 4, "behind", 0, [4, 6, 9], [6], False),
    shrink(SLOW + 200, 5, "behind", 1, [5, 6, 9], [6], False),
    shrink(SLOW + 30_000, 4, "behind", 2, [4, 6, 9], [6], False),
    expand(SLOW + 40_000, 4, "behind", 0, [4, 9], [6]),
    expand(SLOW + 40_000, 5, "behind", 1, [5, 9], [6]),
    expand(SLOW + 40_000, 4, "behind", 2, [4, 9], [6]),
    shrink(SLOW + 60_000, 4, "behind", 3, [4, 6, 9], [6], False),
    # Broker 10 falls behind on one partition first, then on two more 20 s later while still out of the first.
    shrink(EARLY, 4, "early", 0, [4, 9, 10], [10], False),
    shrink(EARLY + 20_000, 4, "early", 1, [4, 9, 10], [10], False),
    shrink(EARLY + 20_200, 5, "early", 2, [5, 9, 10], [10], False),
    expand(EARLY + 40_000, 4, "early", 0, [4, 9], [10]),
    expand(EARLY + 40_000, 4, "early", 1, [4, 9], [10]),
    expand(EARLY + 40_000, 5, "early", 2, [5, 9], [10]),
]
FOLLOWER_3 = [
    Event(T + 4 * GROUP, 3, EventType.PARTITION_FAILED, "disk", 1, {"leader": 2, "error": "KAFKA_STORAGE_ERROR"})
    .to_json(),
]


@pytest.fixture(scope="module")
def out(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    for name, lines in (("b1", LEADER_1), ("b2", LEADER_2), ("b3", FOLLOWER_3), ("b4", LEADER_4),
                        ("controller", CONTROLLER), ("b45", LEADERS_4_5), ("b6", BEHIND)):
        (logs / name).mkdir()
        (logs / name / "events.jsonl").write_text("\n".join(lines) + "\n")
    out_dir = tmp_path_factory.mktemp("out")
    job.run(spark, discover([str(logs)]), str(out_dir), health.AnalysisOptions())
    return out_dir


def test_episodes_are_split_by_cause_and_broker_at_fault(spark: SparkSession, out: Path) -> None:
    episodes = spark.read.parquet(str(out / "episodes")).orderBy("episode").select(
        "episode", "cause", "broker_at_fault", "topic_partitions", "pending").collect()
    assert [tuple(e) for e in episodes] == [
        (1, "leader", 1, ["slow-0", "slow-1"], 4),
        (2, "follower", 1, ["other-0", "other-1"], 0),
        (3, "leader", 1, ["old-0", "old-1"], 0),
        (4, "follower", 3, ["mixed-0", "mixed-1"], 0),
        (5, "stuck", None, ["mixed-0"], 0),
        (6, "stuck", None, ["notslow-0"], 0),
        (7, "failed", 3, ["disk-1"], 0),
        (8, "stuck", None, ["risk-0"], 0),
        (9, "stuck", None, ["refused-0"], 0),
        (10, "follower", 7, ["paused-0", "paused-1"], 0),  # dropped before its fence, and after it
        (11, "follower", 8, ["late-0", "late-1"], 0),
        (12, "follower", 6, ["behind-0", "behind-1"], 0),
        (13, "follower", 6, ["behind-2"], 0),  # still out of behind-0 and behind-1 as a follower at fault
        (14, "stuck", None, ["behind-3"], 0),  # back in everywhere first
        (15, "follower", 10, ["early-0"], 0),  # still out when it fell behind on early-1 and early-2
        (16, "follower", 10, ["early-1", "early-2"], 0),
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_by_cause"] == {"follower": 8, "leader": 2, "failed": 1, "burst": 0, "stuck": 5,
                                            "slow": 0, "unknown": 0}
    assert summary["malformed_lines"] == 0  # version 1 and version 2 lines both read


def test_evidence_and_recommendations_name_the_cause(spark: SparkSession, out: Path) -> None:
    evidence = dict(spark.read.parquet(str(out / "episodes")).select("episode", "evidence").collect())
    assert evidence[1] == ("followers 2,3 of 2 partitions led by broker 1 removed within 0.5 s while 4 of their "
                           "fetches were pending at the leader (it was serving them)")
    assert evidence[7] == "broker 3 marked disk-1 failed and left its ISR (leaders 2)"
    html = (out / "report.html").read_text()
    assert "follower.fetch.pending.reads.insync.enable=true" in html and "Then look at broker(s) 1" in html
    assert "Look at the disks of broker(s) 3" in html


def test_a_shrink_its_zookeeper_write_refused_is_no_isr_change(spark: SparkSession) -> None:
    """Kafka 0.10: `Shrinking ISR ...` then `Cached zkVersion [v] not equal to that in zookeeper, skip updating ISR`
    for the same partition: the ISR stayed as it was, so no shrink (and no phantom expand after it)."""
    from insync.spark.analysis import logparse

    fixture = Path(__file__).parent / "fixtures" / "kafka-logs" / "kafka-0.10" / "server.log"
    events = logparse.load(spark, discover([str(fixture)]), "UTC").where(F.col("reason").isNull())
    changes = health.isr_changes(health.isr_steps(events)).select("topic", "partition", "change").collect()
    # topicold-24, topic-24 and topic-6 were refused; topic-42's shrink (no refusal after it) stands.
    assert sorted(tuple(c) for c in changes) == [("topic", 42, "shrink")]


def test_data_at_risk_per_partition_leads_the_report(spark: SparkSession, out: Path) -> None:
    risk = spark.read.parquet(str(out / "data_at_risk")).orderBy("topic", "partition").collect()
    assert [tuple(r) for r in risk] == [
        ("refused", 0, 0, 10_000, 7, 0, None),
        ("risk", 0, 20_000, 0, 0, 0, None),
        ("unclean", 0, 0, 0, 0, 1, 12),
    ]
    html = (out / "report.html").read_text()
    assert html.index("<h2>Data at risk</h2>") < html.index("<h2>Recommendations</h2>")
    advice = html[html.index("<h2>Recommendations</h2>"):]
    assert advice.index("set min.insync.replicas=2") < advice.index("Unclean leader elections gave up records")
    assert "risk-0, 20.0 s" in advice and "records given up: 12" in advice


def test_a_full_isr_ends_a_controlled_shutdown_for_data_at_risk_too(spark: SparkSession, tmp_path: Path) -> None:
    """Broker 4's controlled shutdown moves moved-0 to 5 alone (not at risk: a shutdown), 4 comes back (full ISR),
    then 4 drops out again with no leader change: those 30 s on one copy are at risk, as the intervals say."""
    logs = tmp_path / "logs" / "controller"
    logs.mkdir(parents=True)
    (logs / "events.jsonl").write_text("\n".join([
        plain(T, 0, EventType.LEADER_CHANGE, "moved", 0, leader_before=4, leader_after=5, leader_epoch=2, isr=[5],
              reason="shutdown"),
        expand(T + 10_000, 5, "moved", 0, [5], [4]),
        shrink(T + 20_000, 5, "moved", 0, [4, 5], [4], False),
        expand(T + 50_000, 5, "moved", 0, [5], [4]),
    ]) + "\n")
    out = tmp_path / "out"
    job.run(spark, discover([str(tmp_path / "logs")]), str(out), health.AnalysisOptions())
    spans = spark.read.parquet(str(out / "intervals")).orderBy("start_ms").select("start_ms", "shutdown").collect()
    assert [tuple(s) for s in spans] == [(T, True), (T + 20_000, False)]
    risk = spark.read.parquet(str(out / "data_at_risk")).collect()
    assert [tuple(r) for r in risk] == [("moved", 0, 30_000, 0, 0, 0, None)]
