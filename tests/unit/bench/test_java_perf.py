"""Kafka's perf tools' output read as figures, and the compare table beside Kafka."""

from __future__ import annotations

import pytest

from insync.bench import compare, java_perf

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
