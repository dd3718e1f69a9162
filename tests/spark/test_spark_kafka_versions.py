"""Real Kafka log lines of every version family (tests/spark/fixtures/kafka-logs/<family>/), each family with its
known truth in truth.json: the events its lines are, how many well-formed lines say nothing parsed (ignored), and
that none is malformed. truth.json also says where each file's lines come from."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from insync.spark.analysis import logparse
from insync.spark.analysis.inputs import Inputs

pytestmark = pytest.mark.timeout(600)

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-logs"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
TRUTH_FIELDS = ("line", "type", "broker", "topic", "partition", "leader", "leader_epoch", "isr_before", "isr_after",
                "detail")


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
