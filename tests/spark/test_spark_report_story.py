"""The report tells the right story on a small synthetic cluster history: a controlled shutdown and a `cluster down`
are not outages, and idle internal topics take one row (issue 21, section 1).

History (insync events; the controller is node 0, brokers 1-3, replicas 1,2,3 everywhere):
- orders-0: broker 1's controlled shutdown moves leadership to 2 (reason `shutdown`, ISR 2,3) at +0 s; broker 1
  is back in the ISR at +20 s. Under-replicated for 20 s, begun by a controlled shutdown: not an outage.
- orders-1: leader 3 fenced at +5 s with no other replica in sync: offline until +15 s, under-replicated until
  +16 s. The one real outage.
- orders-2: broker 2 removes broker 1 (stuck) at +30 s; broker 2's log ends at +40 s with the partition still
  under-replicated: open at the end of broker 2's log, ending there (not at the controller's last event).
- orders-3: broker 1's controlled shutdown moves leadership to 3 at +50 s; broker 2 leaving too takes it under
  min ISR from +50.5 s to +52 s, with no leader change of its own: still the shutdown, not an outage.
- `cluster down` at +60 s: orders-0 and orders-1 lose their last leader (reason `shutdown`), the controller's log
  ends at +60.1 s: offline and under-replicated, open at end of log.
- __consumer_offsets-0..3: broker 1 out of their ISRs (led by broker 3) from +2 s to +8 s, as for any partition
  broker 1 follows: summarised in one row.
- __insync_events-0 (one replica, broker 2): offline from +41 s to +43 s: in trouble, so shown on its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from spark_scenario import expand, plain, shrink

from insync.events import Event, EventType
from insync.spark.analysis import health, job, report
from insync.spark.analysis.inputs import discover

pytestmark = pytest.mark.timeout(600)

T = 1_800_000_000_000  # 2027-01-15T08:00:00Z
RF3 = [1, 2, 3]


def _leader(ts: int, topic: str, p: int, before: int, after: int, isr: list[int], reason: str) -> str:
    return plain(ts, 0, EventType.LEADER_CHANGE, topic, p, leader_before=before, leader_after=after, leader_epoch=1,
                 isr=isr, reason=reason)


def _offline(ts: int, topic: str, p: int, before: int, reason: str) -> list[str]:
    return [_leader(ts, topic, p, before, -1, [], reason), plain(ts, 0, EventType.PARTITION_OFFLINE, topic, p)]


CONTROLLER = [
    _leader(T - 10_000, "orders", 0, -1, 1, RF3, "created"),
    _leader(T - 10_000, "orders", 1, -1, 3, RF3, "created"),
    _leader(T - 10_000, "orders", 2, -1, 2, RF3, "created"),
    _leader(T - 10_000, "orders", 3, -1, 1, RF3, "created"),
    _leader(T, "orders", 0, 1, 2, [2, 3], "shutdown"),
    *_offline(T + 5_000, "orders", 1, 3, "fenced"),
    _leader(T + 15_000, "orders", 1, -1, 3, [3], "unfenced"),
    plain(T + 15_000, 0, EventType.PARTITION_ONLINE, "orders", 1),
    _leader(T - 10_000, "__insync_events", 0, -1, 2, [2], "created"),
    *_offline(T + 41_000, "__insync_events", 0, 2, "fenced"),
    _leader(T + 43_000, "__insync_events", 0, -1, 2, [2], "unfenced"),
    plain(T + 43_000, 0, EventType.PARTITION_ONLINE, "__insync_events", 0),
    _leader(T + 50_000, "orders", 3, 1, 3, [2, 3], "shutdown"),
    *_offline(T + 60_000, "orders", 0, 2, "shutdown"),
    *_offline(T + 60_000, "orders", 1, 3, "shutdown"),
    Event(T + 60_100, 0, EventType.BROKER_FENCED, fields={"broker_id": 3}).to_json(),
]
BROKER2 = [
    expand(T + 20_000, 2, "orders", 0, [2, 3], [1]),
    shrink(T + 30_000, 2, "orders", 2, RF3, [1], "stuck"),
    Event(T + 40_000, 2, EventType.METADATA_PROPAGATED, fields={"changes": 1}).to_json(),
]
OFFSETS = range(4)
BROKER3 = [
    *(shrink(T + 2_000, 3, "__consumer_offsets", p, RF3, [1], "stuck") for p in OFFSETS),
    *(expand(T + 8_000, 3, "__consumer_offsets", p, [2, 3], [1]) for p in OFFSETS),
    expand(T + 16_000, 3, "orders", 1, [3], [1, 2]),
    plain(T + 50_500, 3, EventType.UNDER_MIN_ISR_START, "orders", 3),
    plain(T + 52_000, 3, EventType.UNDER_MIN_ISR_END, "orders", 3),
    expand(T + 52_000, 3, "orders", 3, [2, 3], [1]),
]


@pytest.fixture(scope="module")
def out(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    for name, lines in {"node-0": CONTROLLER, "node-2": BROKER2, "node-3": BROKER3}.items():
        (logs / name).mkdir()
        (logs / name / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out_dir = tmp_path_factory.mktemp("out")
    job.run(spark, discover([str(logs)]), str(out_dir), health.AnalysisOptions())
    return out_dir


def _text(out: Path) -> str:
    """report.html as text: tags become spaces, runs of spaces one."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (out / "report.html").read_text()))


def test_only_the_outage_is_counted_in_the_summary(out: Path) -> None:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert {k: summary[k] for k in ("urp_intervals", "under_min_isr_intervals", "offline_intervals",
                                    "open_at_end_of_log_intervals", "shutdown_intervals")} == {
        "urp_intervals": 6, "under_min_isr_intervals": 0, "offline_intervals": 2,
        "open_at_end_of_log_intervals": 5, "shutdown_intervals": 3}


def test_intervals_end_where_the_log_that_stated_them_ends(spark: SparkSession, out: Path) -> None:
    spans = spark.read.parquet(str(out / "intervals")).where("topic = 'orders'").select(
        "partition", "kind", "start_ms", "end_ms", "open_ended", "shutdown").collect()
    assert sorted(tuple(r) for r in spans) == [
        (0, "offline", T + 60_000, T + 60_100, True, True),
        (0, "under_replicated", T, T + 20_000, False, True),
        (0, "under_replicated", T + 60_000, T + 60_100, True, True),
        (1, "offline", T + 5_000, T + 15_000, False, False),
        (1, "offline", T + 60_000, T + 60_100, True, True),
        (1, "under_replicated", T + 5_000, T + 16_000, False, False),
        (1, "under_replicated", T + 60_000, T + 60_100, True, True),
        (2, "under_replicated", T + 30_000, T + 40_000, True, False),
        (3, "under_min_isr", T + 50_500, T + 52_000, False, True),
        (3, "under_replicated", T + 50_000, T + 52_000, False, True),
    ]


def test_report_counts_and_recommends_only_the_outage(out: Path) -> None:
    text = _text(out)
    assert "offline 2 2 12000 10000 2 0" in text  # kind, outages, partitions, total, longest, open at end, shutdown
    assert "under_replicated 6 6 37000 11000 3 2" in text
    assert "under_min_isr 0 0 - - 0 1" in text and "refused (NOT_ENOUGH_REPLICAS) while the ISR was below" not in text
    # Data at risk: orders-1's leader back alone for 1 s before the others rejoined (min ISR 1 here: the partition
    # was never under min ISR), not its 10 s offline with no leader; orders-3 was under min ISR only in a shutdown.
    risk = text[text.index("Data at risk"):text.index("Recommendations")]
    assert re.findall(r"orders \d+ \d+ \d+ \d+ \d+ -", risk) == ["orders 1 1000 0 0 0 -"], risk
    assert "single replica" in text[text.index("Recommendations"):]
    assert "Partitions went offline" in text and "Evidence: 2 interval(s), 12.0 s in total" in text
    assert text.count("open at end of log") >= 5 and "controlled shutdown" in text


def test_idle_internal_topics_take_one_row_and_one_lane(out: Path) -> None:
    html, text = (out / "report.html").read_text(), _text(out)
    longest = text[text.index("Longest intervals"):text.index("Shrink episodes")]
    assert (f"__consumer_offsets (internal) 4 partitions under_replicated {report.utc(T + 2_000)} "
            f"{report.utc(T + 8_000)} 6000 4 intervals in one row") in longest
    assert "__consumer_offsets 0 " not in longest and "__consumer_offsets-0" not in html
    assert "__consumer_offsets (internal): 4 partitions" in html  # the chart's lane


def test_an_internal_partition_in_trouble_is_shown_on_its_own(out: Path) -> None:
    html, text = (out / "report.html").read_text(), _text(out)
    assert (f"__insync_events 0 offline {report.utc(T + 41_000)} {report.utc(T + 43_000)} 2000 closed") in text
    assert "__insync_events-0" in html and "__insync_events (internal)" not in html


def test_an_episode_with_a_replica_never_back_ends_with_the_log_of_its_removal(spark: SparkSession,
                                                                              out: Path) -> None:
    episodes = spark.read.parquet(str(out / "episodes")).selectExpr(
        "cause", "unix_millis(start)", "unix_millis(end)", "open_ended").collect()
    assert sorted(tuple(r) for r in episodes) == [
        ("follower", T + 2_000, T + 8_000, False),
        ("stuck", T + 30_000, T + 40_000, True),  # orders-2: broker 2's log ends at +40 s, the controller's later
    ]
