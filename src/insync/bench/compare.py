"""`insync bench compare`: every client benchmark on a local insync cluster and on Tansu, in one session.

insync: a controller and 3 brokers, RF 3, min ISR 2, acks=all. Tansu: one node, memory storage, RF 1
(`insync.bench.targets`). Each gets, in turn and on the same machine:
- throughput (`insync.bench.steady`): produce (acks=all) and consume of 1 KiB records with the server CPU per MB
  (consume twice: at librdkafka's defaults and with `fetch.queue.backoff.ms` at 10 ms);
- produce on a one-broker insync cluster (RF 1) beside Tansu's RF 1: the same work per node on both sides, since
  on a machine of few cores the RF 3 run measures the replication factor as much as the broker;
- latency (`insync.bench.latency`): a producer and a tailing consumer in their own processes, acks=all, linger 0:
  confluent-kafka at 500 and 2,000 records/s, kafka-python and aiokafka at 500 records/s with their defaults;
- the highest rate whose end-to-end p99 stays under 50 ms (`latency.find_max_rate`, from 500 records/s).
`table` prints each figure for both and the ratio insync / Tansu (above 1 is better for MB/s and the rate, below
1 for milliseconds).
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from insync.bench import latency, steady, targets
from insync.bench.targets import Target

TOPIC = "bench"
LATENCY_TOPIC = "bench-latency"
RECORD_BYTES = 1024
TANSU_SETTLE_S = 0.5
# (name, producer client, records/s) of the latency runs
LATENCY_RUNS = (("latency-500", "confluent", 500.0), ("latency-2000", "confluent", 2000.0),
                ("latency-kafka-python-500", "kafka-python", 500.0), ("latency-aiokafka-500", "aiokafka", 500.0))
SEARCH_START_RATE = 500.0
# The second consume run: librdkafka's fetch.queue.backoff.ms lowered from 1,000 ms (see insync.bench.steady)
EAGER_FETCH_QUEUE_BACKOFF_MS = 10


def _throughput(target: Target, seconds: float) -> dict[str, Any]:
    """Produce, then consume what was produced, each for `seconds` after a warm-up (`insync.bench.steady`)."""
    target.ensure_topic(TOPIC, 3)
    produce = steady.produce(target.bootstrap, TOPIC, RECORD_BYTES, "all", target.cpu_s, seconds=seconds)
    consume = steady.consume(target.bootstrap, TOPIC, target.cpu_s, seconds=seconds)
    eager = steady.consume(target.bootstrap, TOPIC, target.cpu_s, seconds=seconds,
                           fetch_queue_backoff_ms=EAGER_FETCH_QUEUE_BACKOFF_MS)
    return {"produce": asdict(produce), "consume": asdict(consume), "consume-eager": asdict(eager)}


def _produce_one_node(seconds: float) -> dict[str, Any]:
    with targets.insync_cluster(1) as target:
        target.ensure_topic(TOPIC, 3)
        return asdict(steady.produce(target.bootstrap, TOPIC, RECORD_BYTES, "all", target.cpu_s, seconds=seconds))


def _latencies(target: Target, seconds: float, steps: int) -> dict[str, Any]:
    target.ensure_topic(LATENCY_TOPIC, 1)
    out: dict[str, Any] = {}
    for name, client, rate in LATENCY_RUNS:
        plan = latency.plan_for(target, LATENCY_TOPIC, client, rate, seconds)
        out[name] = asdict(latency.run(target, plan))
    plan = latency.plan_for(target, LATENCY_TOPIC, seconds=seconds)
    search = latency.find_max_rate(lambda rate: latency.run(target, replace(plan, rate=rate)), SEARCH_START_RATE,
                                   steps=steps)
    out["max-rate"] = {"e2e_p99_ms_max": search.e2e_p99_ms_max, "max_rate": search.max_rate,
                       "runs": [asdict(r) for r in search.runs]}
    return out


def _run(target: Target, seconds: float, steps: int) -> dict[str, Any]:
    return {"target": target.name, **_throughput(target, seconds), **_latencies(target, seconds, steps)}


def compare(seconds: float = latency.SECONDS_MIN, steps: int = 6, brokers: int = 3) -> dict[str, Any]:
    assert seconds > 0 and steps > 0
    with targets.insync_cluster(brokers) as target:
        insync = _run(target, seconds, steps)
    insync["produce-one-node"] = _produce_one_node(seconds)
    with targets.tansu() as target:
        time.sleep(TANSU_SETTLE_S)
        tansu = _run(target, seconds, steps)
    tansu["produce-one-node"] = tansu["produce"]  # Tansu is one node already
    return {"insync": insync, "tansu": tansu}


ROWS = (
    ("produce MB/s (acks=all)", "produce", "mb_per_s"), ("produce server CPU ms/MB", "produce", "server_cpu_ms_per_mb"),
    ("produce MB/s, one node (RF 1)", "produce-one-node", "mb_per_s"),
    ("  its server CPU ms/MB", "produce-one-node", "server_cpu_ms_per_mb"),
    ("consume MB/s", "consume", "mb_per_s"), ("consume server CPU ms/MB", "consume", "server_cpu_ms_per_mb"),
    ("consume MB/s, queue backoff 10 ms", "consume-eager", "mb_per_s"),
    ("  its server CPU ms/MB", "consume-eager", "server_cpu_ms_per_mb"),
    *((f"{name} {label}", name, key) for name, _, _ in LATENCY_RUNS
      for label, key in (("ack p99 ms", "ack_p99_ms"), ("e2e p99 ms", "e2e_p99_ms"))),
    ("max rate, e2e p99 < 50 ms", "max-rate", "max_rate"),
)


def table(result: dict[str, Any]) -> str:
    lines = [f"{'':36} {result['insync']['target']:>12} {result['tansu']['target']:>12} {'ratio':>7}"]
    for label, mode, key in ROWS:
        mine, theirs = result["insync"][mode][key], result["tansu"][mode][key]
        ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
        lines.append(f"{label:36} {mine if mine is not None else '-':>12} {theirs if theirs is not None else '-':>12}"
                     f" {ratio:>7}")
    return "\n".join(lines)
