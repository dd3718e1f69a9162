"""`insync bench compare`'s table: each row both sides ran, with the ratio, the connection and scale rows too."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.bench import compaction, compare, java_perf
from insync.bench.latency import LatencyResult
from insync.bench.targets import Target
from insync.chaos.kafka_dist import KafkaDist


def side(name: str, kb: float, p99: float, storm_s: float | None, leaders_s: float) -> dict[str, object]:
    return {"target": name,
            "connections-idle": {"kb_per_connection": kb, "slow_connects": 0},
            "connections-active": {"ack_p50_ms": 2.0, "ack_p99_ms": p99, "send_behind_ms_max": 1.0},
            "reconnect-storm": {"seconds": storm_s, "slow_connects": 3, "reconnects": 0},
            "scale": {"partitions": 100, "rss_mb_max": 80.0, "idle_cpu_percent_max": 2.0, "produce_ack_p50_ms": 3.0,
                      "produce_ack_p99_ms": 9.0, "killed_leaderships": 34, "leaders_after_kill_s": leaders_s,
                      "restart_to_isr_whole_s": 4.0, "shutdown_leaderships": 50, "controlled_shutdown_s": 1.0}}


def test_connection_and_scale_rows_show_both_sides_and_the_ratio() -> None:
    text = compare.table({"insync": side("insync RF3", 10.0, 5.0, 1.5, 6.0),
                          "peer": side("Kafka 4.1 RF3", 20.0, 4.0, None, 12.0)})
    rows = {line[:36].strip(): line[36:].split() for line in text.splitlines()[1:]}
    assert rows["idle connections: KB/connection"] == ["10.0", "20.0", "0.50"]
    assert rows["active producers: ack p50 ms"] == ["2.0", "2.0", "1.00"]
    assert rows["ack p99 ms"] == ["5.0", "4.0", "1.25"]
    assert rows["reconnect storm: all answered s"] == ["1.5", "-", "-"]  # the peer's storm never finished
    assert rows["all led again after the kill s"] == ["6.0", "12.0", "0.50"]
    assert rows["scale: partitions"] == ["100", "100", "1.00"]
    assert "produce MB/s (acks=all)" not in rows  # a row neither side ran is left out


def test_every_row_names_a_group_that_compare_runs() -> None:
    produced = {"produce", "consume", "consume-eager", "produce-one-node", "max-rate", "requests-acks-1",
                "requests-acks-all", "java-produce", "java-consume", "e2e-tool", "connections-idle", "connections-active",
                "reconnect-storm", "scale", "compaction", *(name for name, _, _ in compare.LATENCY_RUNS)}
    assert {mode for _, mode, _ in compare.ROWS} <= produced
    assert compare.GROUPS[-1] == "scale"  # it restarts and kills brokers, so it runs last


def test_the_compaction_rows_are_its_result_fields_or_figures() -> None:
    fields = set(compaction.CompactionResult.__dataclass_fields__)
    flat = {f"{run}_{figure}" for run in ("idle", "busy") for figure in compaction.FIGURES}
    keys = {key for _, mode, key in compare.ROWS if mode == "compaction"}
    assert {"idle_ack_p99_ms", "busy_ack_p99_ms", "ack_p99_ratio", "busy_cleaning_percent"} <= keys <= fields | flat
    assert set(compaction.FIGURES) <= set(LatencyResult.__dataclass_fields__)
    assert compare.GROUPS.index("compaction") < compare.GROUPS.index("scale")


def test_each_latency_run_has_ack_and_e2e_p50_p99_p999_rows() -> None:
    rates = {name: (client, rate) for name, client, rate in compare.LATENCY_RUNS}
    assert rates["latency-5000"] == ("confluent", 5000.0) and rates["latency-10000"] == ("confluent", 10000.0)
    figures = {f"{side}_{p}_ms" for side in ("ack", "e2e") for p in ("p50", "p99", "p999")}
    assert figures <= set(LatencyResult.__dataclass_fields__)
    for name in rates:
        assert {key for _, mode, key in compare.ROWS if mode == name} == figures, name


def test_the_e2e_tool_rows_are_its_result_figures() -> None:
    keys = [key for _, mode, key in compare.ROWS if mode == "e2e-tool"]
    assert keys == ["avg_ms", "p50_ms", "p99_ms", "p999_ms"]
    assert set(keys) <= set(java_perf.EndToEndResult.__dataclass_fields__)
    assert "e2e-tool" in compare.GROUPS


def test_peer_rows_run_the_e2e_tool_on_its_own_one_partition_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    topics: list[tuple[str, int]] = []
    monkeypatch.setattr(Target, "ensure_topic", lambda self, topic, partitions: topics.append((topic, partitions)))
    monkeypatch.setattr(java_perf, "e2e_latency", lambda dist, target, topic, seconds: java_perf.EndToEndResult(
        2000, 5.9, 4.0, 20.0, 43.0))
    rows = compare._peer_rows(Target("Kafka 4.1.2 RF3", "127.0.0.1:9", 3), KafkaDist("4.1.2", Path("/nonexistent")),
                              10.0, 6, frozenset({"e2e-tool"}), None, 1024)
    assert rows == {"target": "Kafka 4.1.2 RF3",
                    "e2e-tool": {"records": 2000, "avg_ms": 5.9, "p50_ms": 4.0, "p99_ms": 20.0, "p999_ms": 43.0}}
    assert topics == [(compare.E2E_TOOL_TOPIC, 1)]
