"""`insync bench latency` and `compare`: argument errors, the JSON they print, the rate search, the counting of
records and CPU (no broker, no timing asserts)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, replace
from typing import Any

import pytest

from insync.bench import compare, latency, latency_workers, targets
from insync.bench.latency import LatencyResult
from insync.cli.main import main
from insync.waiting import wait_until

RESULT = LatencyResult(
    target="given", client="confluent", rate=500.0, linger_ms=0, acks="all", record_bytes=1024, seconds=10.0,
    records_sent=5000, records_acked=5000, records_read=5000, errors=0, outstanding_max=3, ack_p50_ms=2.0,
    ack_p99_ms=8.0, ack_p999_ms=8.5, ack_max_ms=9.0, e2e_p50_ms=3.0, e2e_p99_ms=12.0, e2e_p999_ms=14.0,
    e2e_max_ms=15.0, server_cpu_ms_per_mb=None)


@pytest.mark.parametrize(("argv", "message"), [
    (["--seconds", "5"], "--seconds must be at least 10"),
    (["--warmup-seconds", "-1"], "--warmup-seconds not negative"),
    (["--rate", "0"], "--rate must be at least 1"),
    (["--linger-ms", "-1"], "--linger-ms not negative"),
    (["--record-bytes", "8"], f"--record-bytes at least {latency_workers.HEADER.size}"),
    (["--find-max-rate", "--steps", "0"], "--steps must be 1 to 12"),
    (["--e2e-p99-ms", "0"], "--e2e-p99-ms positive"),
    (["--brokers", "0"], "--brokers and --replication-factor must be at least 1"),
])
def test_latency_argument_errors_are_one_line(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "latency", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("insync: error: ") and message in err and "Traceback" not in err


def test_compare_argument_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "compare", "--seconds", "3"]) == 1
    assert "--seconds must be at least 10" in capsys.readouterr().err
    assert main(["bench", "compare", "--steps", "13"]) == 1
    assert "--steps 1 to 12" in capsys.readouterr().err


def test_unknown_client_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "latency", "--client", "sarama"])
    assert "invalid choice: 'sarama'" in capsys.readouterr().err


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> list[latency_workers.ProducerPlan]:
    """`latency.run` answers without processes: end-to-end p99 grows past 50 ms above 3,000 records/s."""
    plans: list[latency_workers.ProducerPlan] = []

    def run(target: targets.Target, plan: latency_workers.ProducerPlan) -> LatencyResult:
        plans.append(plan)
        return replace(RESULT, target=target.name, rate=plan.rate, e2e_p99_ms=10.0 if plan.rate <= 3000 else 80.0)

    monkeypatch.setattr(latency, "run", run)
    monkeypatch.setattr(targets.Target, "ensure_topic", lambda self, topic, partitions: None)
    return plans


def test_latency_prints_one_json_object_with_every_figure(fake_runs: list[latency_workers.ProducerPlan],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "latency", "--bootstrap-server", "127.0.0.1:9", "--client", "aiokafka",
                 "--linger-ms", "5", "--acks", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {f.name for f in RESULT.__dataclass_fields__.values()}
    for key in ("ack_p50_ms", "ack_p99_ms", "ack_p999_ms", "ack_max_ms", "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms",
                "e2e_max_ms",
                "records_acked", "records_read", "errors", "server_cpu_ms_per_mb"):
        assert key in printed
    [plan] = fake_runs
    assert (plan.client, plan.linger_ms, plan.acks, plan.rate, plan.record_bytes) == ("aiokafka", 5, "1", 500.0, 1024)
    assert plan.seconds == 10.0 and plan.bootstrap == "127.0.0.1:9"


def test_find_max_rate_doubles_then_bisects(fake_runs: list[latency_workers.ProducerPlan],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "latency", "--bootstrap-server", "127.0.0.1:9", "--find-max-rate", "--steps", "7"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [plan.rate for plan in fake_runs] == [500, 1000, 2000, 4000, 3000, 3500, 3250]
    assert printed["max_rate"] == 3000 and printed["e2e_p99_ms_max"] == 50.0
    assert [run["rate"] for run in printed["runs"]] == [500, 1000, 2000, 4000, 3000, 3500, 3250]


def test_find_max_rate_halves_while_even_the_start_fails() -> None:
    def measure(rate: float) -> LatencyResult:
        return replace(RESULT, rate=rate, e2e_p99_ms=10.0 if rate <= 150 else 80.0)

    search = latency.find_max_rate(measure, 1000, steps=5)
    assert [r.rate for r in search.runs] == [1000, 500, 250, 125, 188]
    assert search.max_rate == 125


def test_a_run_passes_only_with_every_record_acked_and_read() -> None:
    assert RESULT.passes(50.0)
    assert not replace(RESULT, e2e_p99_ms=50.0).passes(50.0)
    assert not replace(RESULT, records_read=4999, errors=1).passes(50.0)
    assert not replace(RESULT, records_read=0, records_sent=0, e2e_p99_ms=None).passes(50.0)


def test_the_tally_counts_measured_records_and_the_most_outstanding() -> None:
    tally = latency_workers._Tally()
    sends = [latency_workers._Send(b"", 0.0, measured=i >= 2) for i in range(6)]  # two warm-up records
    for send in sends[:5]:
        tally.on_send(send)
    tally.on_delivery(sends[2], ok=True)
    tally.on_delivery(sends[3], ok=False)
    tally.on_send(sends[5])
    result = tally.result()
    assert (result["sent"], result["acked"], result["errors"], result["outstanding_max"]) == (4, 1, 3, 3)
    assert result["p50_ms"] is not None and result["max_ms"] is not None


def test_the_summary_has_p999_between_p99_and_the_max() -> None:
    latencies = [float(ms) for ms in range(1, 2001)]  # 1 to 2,000 ms, shuffled by reversing
    summary = latency_workers.summary(latencies[::-1])
    assert (summary["p50_ms"], summary["p99_ms"], summary["p999_ms"], summary["max_ms"]) == (1001.0, 1980.0,
                                                                                                1998.0, 2000.0)
    assert latency_workers.summary([]) == {"p50_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}


def test_server_cpu_is_read_from_proc() -> None:
    assert targets.server_cpu_s(()) is None
    assert targets.cpu_ms_per_mb(1.0, 1.5, 2.0) == 250.0
    assert targets.cpu_ms_per_mb(None, 1.5, 2.0) is None
    if os.path.exists(f"/proc/{os.getpid()}/stat"):
        cpu = targets.server_cpu_s((os.getpid(),))
        assert cpu is not None and cpu > 0


def test_server_cpu_counts_a_live_child_of_the_server() -> None:
    """An insync broker's log cleaner works in child processes; their CPU is the server's too."""
    server = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                               "'import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: "
                               "pass\\ntime.sleep(30)'])"])
    try:
        wait_until(lambda: (targets.server_cpu_s((server.pid,)) or 0) >= 0.45, 20, "the child's CPU counted")
    finally:
        for child in targets.with_children((server.pid,))[1:]:
            os.kill(child, signal.SIGKILL)
        server.kill()
        server.wait(10)


def test_compare_table_has_every_mode_and_the_ratio() -> None:
    figures = {"mb_per_s": 100.0, "server_cpu_ms_per_mb": 10.0, "p50_ms": 2.0, "p99_ms": 4.0}
    side: dict[str, Any] = {"produce": figures, "consume": figures, "consume-eager": figures,
                            "produce-one-node": figures,
                            "max-rate": {"max_rate": 4000.0}}
    side.update({name: asdict(RESULT) for name, _, _ in compare.LATENCY_RUNS})
    text = compare.table({"insync": {**side, "target": "insync RF3"},
                          "peer": {**side, "target": "Tansu RF1", "max-rate": {"max_rate": 2000.0}}})
    lines = text.splitlines()
    assert "insync RF3" in lines[0] and "Tansu RF1" in lines[0]
    beside_kafka_only = {"requests-acks-1", "requests-acks-all", "java-produce", "java-consume", "e2e-tool",
                         "connections-idle", "connections-active", "reconnect-storm", "compaction", "scale"}
    assert len(lines) == 1 + len([row for row in compare.ROWS if row[1] not in beside_kafka_only])
    run = next(index for index, line in enumerate(lines) if line.startswith("latency-2000 "))
    assert [(line[:36].strip(), line[36:].split()) for line in lines[run:run + 7]] == [
        ("latency-2000 ack p50 ms", ["2.0", "2.0", "1.00"]), ("ack p99 ms", ["8.0", "8.0", "1.00"]),
        ("ack p99.9 ms", ["8.5", "8.5", "1.00"]), ("e2e p50 ms", ["3.0", "3.0", "1.00"]),
        ("e2e p99 ms", ["12.0", "12.0", "1.00"]), ("e2e p99.9 ms", ["14.0", "14.0", "1.00"]),
        ("latency-5000 ack p50 ms", ["2.0", "2.0", "1.00"])]
    assert any(line.startswith("max rate, e2e p99 < 50 ms") and line.endswith("2.00") for line in lines)
