"""Kafka's own load clients as a benchmark's producer and consumer, against any target: `kafka-producer-perf-test`
(the Java client's batching, acks=all) and `kafka-consumer-perf-test`, run from an assembled release
(`chaos.kafka_tools`), each figure beside the servers' CPU per MB. The tools take a record count, not a duration:
a first producer run warms the servers up and gives the rate that sizes the measured run to `seconds`.

`e2e_latency` runs `kafka-e2e-latency` (Kafka's EndToEndLatency) the same way: one record at a time, each sent
with acks=all, waited for, then polled for by the tool's consumer; its latency is from the send until the poll
returned it. A first run's average sizes the measured run to about `seconds`."""

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
# EndToEndLatency's summary (Kafka 3.x and 4.x): the average in ms, then percentiles in whole ms.
E2E_AVERAGE = re.compile(r"^Avg latency: (?P<avg>[\d.]+) ms$", re.MULTILINE)
E2E_PERCENTILES = re.compile(r"^Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99\.9th = (?P<p999>\d+)$",
                             re.MULTILINE)
E2E_WARMUP_RECORDS = 500
# The measured run's bounds whatever the warm-up's average: enough records for a p99.9, and a run the tool's one
# record in flight finishes in minutes even at a fast server's latency.
E2E_RECORDS_MIN = 1_000
E2E_RECORDS_MAX = 20_000
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


@dataclass(frozen=True, slots=True)
class EndToEndResult:
    records: int
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


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


def parse_e2e(stdout: str) -> tuple[float, float, float, float]:
    """(avg, p50, p99, p99.9 ms) of EndToEndLatency's summary; an error naming each line it did not print."""
    average, percentiles = E2E_AVERAGE.search(stdout), E2E_PERCENTILES.search(stdout)
    missing = [line for line, found in (("'Avg latency: <ms> ms'", average),
                                        ("'Percentiles: 50th = <ms>, 99th = <ms>, 99.9th = <ms>'", percentiles))
               if found is None]
    if average is None or percentiles is None:
        raise RuntimeError(f"kafka-e2e-latency printed no {' and no '.join(missing)}:\n{stdout[-2000:]}")
    return (float(average["avg"]), float(percentiles["p50"]), float(percentiles["p99"]),
            float(percentiles["p999"]))


def e2e_latency(dist: KafkaDist, target: Target, topic: str, seconds: float) -> EndToEndResult:
    """Warm up, then about `seconds` of Kafka's EndToEndLatency on partition 0 of `topic` (one partition), 1 KiB
    records at acks=all."""
    assert seconds > 0
    warm_avg_ms, _, _, _ = parse_e2e(_e2e(dist, target, topic, E2E_WARMUP_RECORDS).stdout)
    records = min(E2E_RECORDS_MAX, max(E2E_RECORDS_MIN, int(seconds * 1000 / max(warm_avg_ms, 0.1))))
    avg_ms, p50_ms, p99_ms, p999_ms = parse_e2e(_e2e(dist, target, topic, records).stdout)
    return EndToEndResult(records, avg_ms, p50_ms, p99_ms, p999_ms)


def _e2e(dist: KafkaDist, target: Target, topic: str, records: int) -> kafka_tools.ToolRun:
    # Positional: broker_list topic num_messages producer_acks message_size_bytes.
    ran = kafka_tools.run(dist, "kafka-e2e-latency", [target.bootstrap, topic, str(records), "all", str(RECORD_BYTES)],
                          timeout_s=TIMEOUT_S)
    if ran.exit_code != 0:
        raise RuntimeError(f"kafka-e2e-latency exited {ran.exit_code}:\n{ran.stderr[-2000:]}")
    return ran
