"""Kafka's own load clients as a benchmark's producer and consumer, against any target: `kafka-producer-perf-test`
(the Java client's batching, acks=all) and `kafka-consumer-perf-test`, run from an assembled release
(`chaos.kafka_tools`), each figure beside the servers' CPU per MB. The tools take a record count, not a duration:
a first producer run warms the servers up and gives the rate that sizes the measured run to `seconds`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from insync.bench.targets import Target, cpu_ms_per_mb
from insync.chaos import kafka_tools
from insync.chaos.kafka_dist import KafkaDist

RECORD_BYTES = 1024
WARMUP_RECORDS = 30_000
RECORDS_MAX = 5_000_000  # the measured run's size whatever the warm-up's rate (5 GB of 1 KiB records)
TIMEOUT_S = 600.0
# ProducerPerformance's summary line (Kafka 3.x and 4.x).
PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, "
    r"(?P<p99>\d+) ms 99th")
# ConsumerPerformance's columns: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
# nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.
CONSUMER_COLUMNS = 10


@dataclass(frozen=True, slots=True)
class JavaPerfResult:
    mode: str
    records: int
    mb: float
    mb_per_s: float
    records_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    server_cpu_ms_per_mb: float | None


def parse_producer(stdout: str) -> tuple[int, float, float, float, float]:
    """(records, records/s, MB/s, p50 ms, p99 ms) of the tool's last summary line."""
    found = list(PRODUCER_SUMMARY.finditer(stdout))
    if not found:
        raise RuntimeError(f"kafka-producer-perf-test printed no summary:\n{stdout[-2000:]}")
    last = found[-1]
    return (int(last["records"]), float(last["rate"]), float(last["mb"]), float(last["p50"]), float(last["p99"]))


def parse_consumer(stdout: str) -> tuple[int, float, float, float]:
    """(records, MB, fetch MB/s, fetch records/s): the rates over the fetch time, without the group's join."""
    rows = [line.split(", ") for line in stdout.splitlines() if line.count(", ") == CONSUMER_COLUMNS - 1]
    rows = [row for row in rows if row[0] != "start.time"]
    if not rows:
        raise RuntimeError(f"kafka-consumer-perf-test printed no figures:\n{stdout[-2000:]}")
    row = rows[-1]
    return int(row[4]), float(row[2]), float(row[8]), float(row[9])


def produce(dist: KafkaDist, target: Target, topic: str, seconds: float) -> JavaPerfResult:
    """Warm up, then produce about `seconds` worth of 1 KiB records at acks=all with the Java client's defaults."""
    assert seconds > 0
    _, warm_rate, _, _, _ = parse_producer(_producer(dist, target, topic, WARMUP_RECORDS).stdout)
    records = min(RECORDS_MAX, max(WARMUP_RECORDS, int(warm_rate * seconds)))
    before = target.cpu_s()
    ran = _producer(dist, target, topic, records)
    after = target.cpu_s()
    sent, rate, mb_per_s, p50, p99 = parse_producer(ran.stdout)
    mb = sent * RECORD_BYTES / 1_048_576
    return JavaPerfResult("java-produce", sent, round(mb, 1), mb_per_s, rate, p50, p99,
                          cpu_ms_per_mb(before, after, mb))


def consume(dist: KafkaDist, target: Target, topic: str, records: int) -> JavaPerfResult:
    """Read `records` from the start of `topic` with a new group at the Java consumer's defaults."""
    before = target.cpu_s()
    ran = kafka_tools.run(dist, "kafka-consumer-perf-test",
                          ["--bootstrap-server", target.bootstrap, "--topic", topic, "--messages", str(records),
                           "--timeout", "30000", "--group", f"java-perf-{topic}"], timeout_s=TIMEOUT_S)
    after = target.cpu_s()
    if ran.exit_code != 0:
        raise RuntimeError(f"kafka-consumer-perf-test exited {ran.exit_code}:\n{ran.stderr[-2000:]}")
    read, mb, mb_per_s, rate = parse_consumer(ran.stdout)
    return JavaPerfResult("java-consume", read, round(mb, 1), mb_per_s, rate, None, None,
                          cpu_ms_per_mb(before, after, mb))


def _producer(dist: KafkaDist, target: Target, topic: str, records: int) -> kafka_tools.ToolRun:
    ran = kafka_tools.run(dist, "kafka-producer-perf-test",
                          ["--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_BYTES),
                           "--throughput", "-1", "--producer-props", f"bootstrap.servers={target.bootstrap}",
                           "acks=all"], timeout_s=TIMEOUT_S)
    if ran.exit_code != 0:
        raise RuntimeError(f"kafka-producer-perf-test exited {ran.exit_code}:\n{ran.stderr[-2000:]}")
    return ran
