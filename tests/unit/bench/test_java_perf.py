"""Kafka's perf tools' and kafka-e2e-latency's output read as figures, and the compare table beside Kafka."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.bench import compare, java_perf
from insync.bench.targets import Target
from insync.chaos import kafka_tools
from insync.chaos.kafka_dist import KafkaDist

PRODUCER_OUT = """2131 records sent, 426.1 records/sec (0.42 MB/sec), 980.1 ms avg latency, 1702.0 ms max latency.
3000 records sent, 2099.4 records/sec (2.05 MB/sec), 284.84 ms avg latency, 878.00 ms max latency, 298 ms 50th, \
335 ms 95th, 337 ms 99th, 339 ms 99.9th.
"""
CONSUMER_OUT = """start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-29 10:10:53:625, 2026-11-29 10:10:59:001, 2.9297, 0.5450, 3000, 558.0357, 4762, 614, 4.7715, 4885.9935
"""


def test_the_producer_summary_is_the_last_full_line() -> None:
    assert java_perf.parse_producer(PRODUCER_OUT) == (3000, 2099.4, 2.05, 298.0, 337.0)


def test_the_consumer_rates_are_over_the_fetch_time() -> None:
    assert java_perf.parse_consumer(CONSUMER_OUT) == (3000, 2.9297, 4.7715, 4885.9935)

# EndToEndLatency 4.1.2 against a local cluster: a progress line every 1,000 records, then the summary.
E2E_OUT = """0\t252.133519
1000\t2.784167
Avg latency: 5.9469 ms
Percentiles: 50th = 4, 99th = 20, 99.9th = 43
"""


def test_the_e2e_summary_is_the_average_and_three_percentiles() -> None:
    assert java_perf.parse_e2e(E2E_OUT) == (5.9469, 4.0, 20.0, 43.0)


@pytest.mark.parametrize(("stdout", "missing"), [
    ("Exception in thread main: no broker", "no 'Avg latency: <ms> ms' and no 'Percentiles: 50th"),
    (E2E_OUT.replace("99.9th = 43", "99.9th = ?"), "no 'Percentiles: 50th = <ms>, 99th = <ms>, 99.9th = <ms>'"),
    (E2E_OUT.replace("Avg latency", "Average"), "no 'Avg latency: <ms> ms':"),
])
def test_e2e_output_without_a_summary_line_names_the_line(stdout: str, missing: str) -> None:
    with pytest.raises(RuntimeError, match="kafka-e2e-latency printed") as raised:
        java_perf.parse_e2e(stdout)
    assert missing in str(raised.value) and stdout[-20:] in str(raised.value)


def test_the_measured_e2e_run_is_sized_by_the_warm_up_average(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    averages = iter(["8.0", "5.5"])  # the warm-up's, then the measured run's

    def run(dist: KafkaDist, tool: str, args: list[str], timeout_s: float) -> kafka_tools.ToolRun:
        calls.append([tool, *args])
        summary = f"Avg latency: {next(averages)} ms\nPercentiles: 50th = 5, 99th = 9, 99.9th = 30\n"
        return kafka_tools.ToolRun(tool, tuple(args), 0, summary, "", 1.0)

    monkeypatch.setattr(kafka_tools, "run", run)
    target = Target("insync RF3", "127.0.0.1:9092", 3)
    result = java_perf.e2e_latency(KafkaDist("4.1.2", Path("/nonexistent")), target, "bench-e2e-tool", 10.0)
    assert calls == [["kafka-e2e-latency", "127.0.0.1:9092", "bench-e2e-tool", "500", "all", "1024"],
                     ["kafka-e2e-latency", "127.0.0.1:9092", "bench-e2e-tool", "1250", "all", "1024"]]
    assert result == java_perf.EndToEndResult(1250, 5.5, 5.0, 9.0, 30.0)


def test_a_failed_e2e_run_shows_the_tools_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_tools, "run", lambda dist, tool, args, timeout_s: kafka_tools.ToolRun(
        tool, tuple(args), 1, "", "TimeoutException: Topic bench-e2e-tool not present", 1.0))
    with pytest.raises(RuntimeError, match="kafka-e2e-latency exited 1:\nTimeoutException"):
        java_perf.e2e_latency(KafkaDist("4.1.2", Path("/nonexistent")), Target("t", "127.0.0.1:9", 3), "t", 10.0)


@pytest.mark.parametrize("parse", [java_perf.parse_producer, java_perf.parse_consumer])
def test_output_without_figures_is_an_error_that_shows_it(parse: object) -> None:
    with pytest.raises(RuntimeError, match="Exception in thread"):
        parse("Exception in thread main: no broker")  # type: ignore[operator]


def test_the_table_shows_the_rows_both_sides_ran_and_their_ratio() -> None:
    side = {"produce": {"mb_per_s": 20.0, "server_cpu_ms_per_mb": 50.0},
            "requests-acks-all": {"requests_per_s": 2000.0, "cluster_cpu_ms_per_request": 0.5}}
    peer = {"produce": {"mb_per_s": 40.0, "server_cpu_ms_per_mb": 25.0},
            "requests-acks-all": {"requests_per_s": 4000.0, "cluster_cpu_ms_per_request": None}}
    text = compare.table({"insync": {"target": "insync RF3", **side}, "peer": {"target": "Kafka 4.1.2 RF3", **peer}})
    lines = text.splitlines()
    assert "Kafka 4.1.2 RF3" in lines[0]
    assert lines[1].split()[-3:] == ["20.0", "40.0", "0.50"]
    assert lines[2].split()[-3:] == ["50.0", "25.0", "2.00"]
    assert lines[3].split()[-3:] == ["2000.0", "4000.0", "0.50"]
    assert lines[4].split()[-3:] == ["0.5", "-", "-"]
    assert len(lines) == 5  # rows neither side ran (latency, Java clients) are left out
