"""The Kafka line patterns of logparse on every fixture line, without Spark: each event line's body matches the
full pattern of a kind of its type, and no ignored line's body matches any. Java's and Python's regular
expressions agree on the constructs the patterns use, so this checks the wordings in milliseconds; the Spark test
(test_spark_kafka_versions) checks the rows they become."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from insync.spark.analysis import kafka_lines

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-logs"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def _body(line: str) -> tuple[str, str] | None:
    """The message of a log4j line, and the message without its context and logger suffix; None for a line that is
    not log4j's."""
    prefixed = re.match(kafka_lines.LOG4J_RX, line)
    if prefixed is None:
        return None
    body = re.match(kafka_lines.BODY_RX, prefixed.group(3))
    assert body is not None
    return prefixed.group(3), body.group(1)


def _matching_kinds(said: tuple[str, str]) -> set[str]:
    msg, body = said
    return {kind.name for kind in kafka_lines.KINDS
            if re.match(kind.pattern, body) and (kind.context is None or re.match(kind.context, msg))}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_line_of_the_family_matches_what_its_truth_says(family: str) -> None:
    truth = json.loads((FIXTURES / family / "truth.json").read_text(encoding="utf-8"))
    expected = {(e["file"], e["line"]): e["type"] for e in truth["events"]}
    for name in truth["sources"]:
        for number, line in enumerate((FIXTURES / family / name).read_text(encoding="utf-8").splitlines(), 1):
            body = _body(line)
            if (name, number) in expected:
                assert body is not None and expected[name, number] in _matching_kinds(body), (name, number, body)
            elif body is not None:
                assert not _matching_kinds(body), (name, number, body)
