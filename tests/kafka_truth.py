"""A Kafka run's truth (truth.json, written by tests/kafka_ref/kafka_log_runs.py) against what `insync analyze`
made of the run's logs. Shared by the fixtures' test (tests/spark/test_kafka_log_truth.py, `make test`) and the
live runs (tests/kafka_ref/test_kafka_log_truth_live.py, `make compat`).

What must hold, for the run's topic (its own: the logs of several runs can be analysed together):
- the episodes, merged by cause and broker, are exactly the fault's: its cause, the broker at fault and the
  partitions it left (a controlled shutdown makes none);
- the leader changes between the fault and the ISRs whole again are exactly the partitions the broker led (a
  slow follower moves none), and no leader moves at another time before the cluster stops;
- the outages (intervals closed by evidence, not begun by a controlled shutdown) of each kind are on exactly the
  expected partitions, each within the fault: from its start to the ISRs whole again (SLACK_MS later at most);
- a controlled shutdown's intervals are shown apart (`shutdown`), on the partitions it moved;
- no interval is left open at the end of the log before the cluster stops (each closes when the ISR is whole).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from insync.spark.analysis import health, job
from insync.spark.analysis.inputs import discover

# The harness polls the ISRs every 0.5 s; under make compat's load a leader logged its ISR whole 2.5 s after the
# harness saw it in the metadata (Kafka 3.9, ZooKeeper mode).
SLACK_MS = 5_000
KINDS = ("under_replicated", "under_min_isr", "offline")


def load_truth(directory: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((directory / "truth.json").read_text(encoding="utf-8"))
    return truth


def analyse(spark: SparkSession, logs: Path, out: Path) -> dict[str, list[dict[str, Any]]]:
    """`insync analyze` of the logs under `logs` into `out`: its episodes and intervals, and the leader moves its
    events show."""
    job.run(spark, discover([str(logs)]), str(out), health.AnalysisOptions())

    def read(name: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.read.parquet(str(out / name)).collect()]

    statements = [r for r in read("events") if r["type"] in ("leader_change", "follower_start")
                  and r["leader"] is not None and r["topic"] is not None]
    return {"episodes": read("episodes"), "intervals": read("intervals"), "moves": leader_moves(statements)}


def leader_moves(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """(ts_ms, topic, partition, leader) where a partition's leader, as brokers state it, differs from the last
    one stated (the first statement of each partition is no move)."""
    leaders: dict[tuple[str, int], int] = {}
    moves = []
    for s in sorted(statements, key=lambda s: (s["ts_ms"], s["file"], s["line"])):
        key = (s["topic"], s["partition"])
        if key in leaders and leaders[key] != s["leader"]:
            moves.append({"ts_ms": s["ts_ms"], "topic": key[0], "partition": key[1], "leader": s["leader"]})
        leaders[key] = s["leader"]
    return moves


def _name(row: dict[str, Any]) -> str:
    return f'{row["topic"]}-{row["partition"]}'


def _episodes(truth: dict[str, Any], found: list[dict[str, Any]]) -> list[str]:
    mine = [e for e in found if any(p.rpartition("-")[0] == truth["topic"] for p in e["topic_partitions"])]
    # One fault may leave several time groups of the same cause and broker (a slow follower falls behind on its
    # partitions at different times): the truth is the cause, the broker and the partitions, not the grouping.
    named: dict[tuple[str, int | None], set[str]] = {}
    for e in mine:
        named.setdefault((e["cause"], e["broker_at_fault"]), set()).update(e["topic_partitions"])
    got = sorted((cause, broker, sorted(partitions)) for (cause, broker), partitions in named.items())
    want = sorted((e["cause"], e["broker"], e["partitions"]) for e in truth["expected"]["episodes"])
    return [] if got == want else [f"episodes (cause, broker, partitions): {got}, expected {want}"]


def _moves(truth: dict[str, Any], moves: list[dict[str, Any]]) -> list[str]:
    start, whole = truth["fault"]["start_ms"], truth["isr_whole_ms"] + SLACK_MS
    mine = [m for m in moves if m["topic"] == truth["topic"] and m["ts_ms"] < truth["cluster_down_ms"]]
    during = sorted({_name(m) for m in mine if start <= m["ts_ms"] <= whole})
    outside = sorted(_name(m) for m in mine if not start <= m["ts_ms"] <= whole)
    problems = [] if during == truth["expected"]["leader_changes"] else [
        f"leader changes during the fault on {during}, expected {truth['expected']['leader_changes']}"]
    return problems + ([f"leader changes the run did not make, on {outside}"] if outside else [])


def _intervals(truth: dict[str, Any], intervals: list[dict[str, Any]]) -> list[str]:
    start, whole, down = truth["fault"]["start_ms"], truth["isr_whole_ms"] + SLACK_MS, truth["cluster_down_ms"]
    mine = [i for i in intervals if i["topic"] == truth["topic"]]
    problems = []
    for kind in KINDS:
        outages = [i for i in mine if i["kind"] == kind and not i["open_ended"] and not i["shutdown"]]
        partitions = sorted({_name(i) for i in outages})
        if partitions != truth["expected"][kind]:
            problems.append(f"{kind} outages on {partitions}, expected {truth['expected'][kind]}")
        problems += [f"{kind} outage of {_name(i)} from {i['start_ms']} to {i['end_ms']}, outside the fault "
                     f"({start} to {whole})" for i in outages if not start <= i["start_ms"] <= i["end_ms"] <= whole]
    shutdown = sorted({_name(i) for i in mine if i["shutdown"] and not i["open_ended"] and start <= i["start_ms"]})
    if shutdown != truth["expected"]["shutdown"]:
        problems.append(f"controlled-shutdown intervals on {shutdown}, expected {truth['expected']['shutdown']}")
    problems += [f"{i['kind']} interval of {_name(i)} from {i['start_ms']} open at the end of the log"
                 for i in mine if i["open_ended"] and i["start_ms"] < down]
    return problems


def mismatches(truth: dict[str, Any], found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every way the analysis departs from the run's truth (empty: it told the truth)."""
    return (_episodes(truth, found["episodes"]) + _moves(truth, found["moves"])
            + _intervals(truth, found["intervals"]))
