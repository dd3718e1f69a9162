"""Real Kafka log lines of every version family (tests/spark/fixtures/kafka-logs/<family>/), each family with its
known truth in truth.json: the events its lines are, how many well-formed lines say nothing parsed (ignored), and
that none is malformed. truth.json also says where each file's lines come from."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from insync.spark.analysis import health, logparse
from insync.spark.analysis.inputs import Inputs

# In make test-slow: make test must stay under 12 minutes on two cores, and these two are its largest Spark jobs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-logs"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
TRUTH_FIELDS = ("line", "type", "broker", "topic", "partition", "leader", "leader_epoch", "isr_before", "isr_after",
                "detail", "broker_id")


def _logs(family: str) -> list[Path]:
    return sorted(p for p in (FIXTURES / family).rglob("*") if p.is_file() and p.name != "truth.json")


def _relative(path: str) -> tuple[str, str]:
    """(family, file within the family) of a parsed row's file path."""
    family, _, name = path.split("/fixtures/kafka-logs/", 1)[1].partition("/")
    return family, name


@pytest.fixture(scope="module")
def parsed(spark: SparkSession) -> dict[str, Any]:
    """Every family parsed in one Spark job (the per-family tests only read the collected rows)."""
    files = tuple(str(p) for family in FAMILIES for p in _logs(family))
    rows = [r.asDict() for r in logparse.load(spark, Inputs((), files)).collect()]
    ignored = Counter(_relative(r["file"]) for r in rows if r["reason"] == logparse.IGNORED)
    return {"rows": [r for r in rows if r["reason"] != logparse.IGNORED], "ignored": ignored}


def test_every_family_of_the_issue_has_a_fixture() -> None:
    assert FAMILIES == ["kafka-0.10", "kafka-1.x", "kafka-2.x", "kafka-3.x-kraft", "kafka-3.x-zk", "kafka-4.x"]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_parses_to_its_truth(parsed: dict[str, Any], family: str) -> None:
    truth = json.loads((FIXTURES / family / "truth.json").read_text(encoding="utf-8"))
    names = [str(p.relative_to(FIXTURES / family)) for p in _logs(family)]
    assert sorted(truth["sources"]) == sorted(names) == sorted(truth["ignored"])  # every file's origin is told
    mine = [(r, _relative(r["file"])[1]) for r in parsed["rows"] if _relative(r["file"])[0] == family]
    malformed = [(name, r["line"], r["reason"]) for r, name in mine if r["reason"] is not None]
    assert len(malformed) == truth["malformed"], malformed
    events = sorted(({"file": name, **{k: r[k] for k in TRUTH_FIELDS}} for r, name in mine if r["reason"] is None),
                    key=lambda e: (e["file"], e["line"]))
    assert events == sorted(truth["events"], key=lambda e: (e["file"], e["line"]))
    assert {name: parsed["ignored"].get((family, name), 0) for name in names} == truth["ignored"]


# Each family's shutdown (its fixture's `stopped*/server.log`, real lines) inside a story told in the family's own
# wording: the broker shrinks an ISR 30 s before it shuts down, and restores it 60 s after (its restart).
SHUTDOWN_FILES = {"kafka-0.10": "stopped/server.log", "kafka-1.x": "stopped/server.log",
                  "kafka-2.x": "stopped/server.log", "kafka-3.x-zk": "stopped/server.log",
                  "kafka-3.x-kraft": "stopped-broker/server.log", "kafka-4.x": "stopped/server.log"}
_OLD = "Partition [{t},0] on broker {b}: {verb} ISR for partition [{t},0] from {before} to {after}"
_NEW = "[Partition {t}-0 broker={b}] {verb} ISR from {before} to {after}"
_OUT = ". Leader: (highWatermark: 10, endOffset: 12). Out of sync replicas: (brokerId: 8, endOffset: 10)."
_COMMIT = "[Partition {t}-0 broker={b}] ISR updated to {after}  and version updated to 9"
STORY = {  # family -> (shrink, restore)
    "kafka-0.10": (_OLD, _OLD), "kafka-1.x": (_NEW, _NEW), "kafka-2.x": (_NEW + _OUT, _NEW),
    "kafka-3.x-zk": (_NEW + _OUT, _COMMIT), "kafka-3.x-kraft": (_NEW + _OUT, _COMMIT), "kafka-4.x": (_NEW + _OUT, _COMMIT)}
_STAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] INFO \[(?:\w+ id=|Kafka Server )(\d+)\]")


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"


def _story(family: str, topic: str) -> tuple[list[str], datetime, datetime]:
    """The family's shutdown lines between a shrink and a restore by the same broker: (lines, shrink time, time
    of the first shutdown line)."""
    stopped = (FIXTURES / family / SHUTDOWN_FILES[family]).read_text(encoding="utf-8").splitlines()
    found = [m for m in map(_STAMP.search, stopped) if m is not None]
    first = datetime.strptime(found[0].group(1), "%Y-%m-%d %H:%M:%S,%f")
    last = datetime.strptime(found[-1].group(1), "%Y-%m-%d %H:%M:%S,%f")
    broker = found[0].group(2)
    shrink, restore = STORY[family]
    other = "8" if broker != "8" else "9"
    line = "[{at}] INFO {body} (kafka.cluster.Partition)"
    return ([line.format(at=_stamp(first - timedelta(seconds=30)), body=shrink.format(
                t=topic, b=broker, verb="Shrinking", before=f"{broker},7,{other}", after=f"{broker},7")),
             *stopped,
             line.format(at=_stamp(last + timedelta(seconds=60)), body=restore.format(
                 t=topic, b=broker, verb="Expanding", before=f"{broker},7", after=f"{broker},7,{other}"))],
            first - timedelta(seconds=30), first)


@pytest.fixture(scope="module")
def shutdown_spans(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every family's story analysed in one job: the intervals per topic (one topic per family), and the times."""
    directory = tmp_path_factory.mktemp("shutdowns")
    files, times = [], {}
    for index, family in enumerate(FAMILIES):
        lines, shrink_at, shutdown_at = _story(family, f"t{index}")
        path = directory / family / "server.log"
        path.parent.mkdir()
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(str(path))
        times[family] = tuple(round(t.replace(tzinfo=UTC).timestamp() * 1000) for t in (shrink_at, shutdown_at))
    events = logparse.events_of(logparse.load(spark, Inputs((), tuple(files))))
    spans = health.intervals(health.state_rows(events, health.isr_steps(events), health.replica_counts(events)),
                             health.log_ends(events))
    rows = [r.asDict() | {"outage": r["outage"]} for r in spans.withColumn("outage", health.outage()).collect()]
    return {"rows": rows, "times": times}


@pytest.mark.parametrize("family", FAMILIES)
def test_an_interval_cut_by_the_brokers_shutdown_is_open_at_end_of_log(shutdown_spans: dict[str, Any],
                                                                      family: str) -> None:
    """Shutdown is not an outage (issue 21): the broker that stated the shrunk ISR shut down before anything
    closed the interval, so it ends at the shutdown line, open at the end of (that part of) the log, and is no
    outage; the ISR its restart restores opens nothing new."""
    topic = f"t{FAMILIES.index(family)}"
    shrink_at, shutdown_at = shutdown_spans["times"][family]
    mine = [(r["kind"], r["start_ms"], r["end_ms"], r["open_ended"], r["outage"]) for r in shutdown_spans["rows"]
            if r["topic"] == topic]
    assert mine == [("under_replicated", shrink_at, shutdown_at, True, False)]
