"""`insync bench compare`: every client benchmark on a local insync cluster and on a peer, in one session.

The peer is Apache Kafka (`--peer kafka[:VERSION]`: as many brokers, RF 3, min ISR 2) or Tansu (one node in memory,
RF 1, with insync's one-node row beside it). Each side gets, in turn, on the same machine:
- throughput (`insync.bench.steady`): produce (acks=all) and consume of 1 KiB records with confluent-kafka, with the
  servers' CPU per MB (consume twice: librdkafka's defaults and `fetch.queue.backoff.ms` at 10 ms);
- latency (`insync.bench.latency`): a producer and a tailing consumer in their own processes, acks=all, linger 0,
  at 500 to 10,000 records/s (`LATENCY_RUNS`), and the highest rate whose end-to-end p99 stays under 50 ms;
- beside Kafka also the request rate at one record per request (`insync.bench.requests`), Kafka's own perf
  tests and `kafka-e2e-latency` (`insync.bench.java_perf`), the connection rows (`insync.bench.connections`)
  and, given a partition count, the scale rows (`insync.bench.scale`), which restart brokers and so come last.
`only` runs some of the row groups (`GROUPS`). `table` prints each row both sides ran, and insync / peer.
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from insync.bench import compaction, connections, java_perf, latency, requests, scale, steady, targets
from insync.bench.targets import Target
from insync.chaos import kafka_cluster
from insync.chaos.kafka_dist import KafkaDist

TOPIC = "bench"
LATENCY_TOPIC = "bench-latency"
REQUESTS_TOPIC = "bench-requests"
JAVA_TOPIC = "bench-java"
E2E_TOOL_TOPIC = "bench-e2e-tool"
RECORD_BYTES = 1024
TANSU_SETTLE_S = 0.5
# (name, producer client, records/s) of the latency runs
LATENCY_RUNS = (("latency-500", "confluent", 500.0), ("latency-2000", "confluent", 2000.0),
                ("latency-5000", "confluent", 5000.0), ("latency-10000", "confluent", 10000.0),
                ("latency-kafka-python-500", "kafka-python", 500.0), ("latency-aiokafka-500", "aiokafka", 500.0))
# The figures of each latency run in the table: the first beside the run's name, the others indented under it.
LATENCY_FIGURES = (("ack p50 ms", "ack_p50_ms"), ("ack p99 ms", "ack_p99_ms"), ("ack p99.9 ms", "ack_p999_ms"),
                   ("e2e p50 ms", "e2e_p50_ms"), ("e2e p99 ms", "e2e_p99_ms"), ("e2e p99.9 ms", "e2e_p999_ms"))
SEARCH_START_RATE = 500.0
WARMUP_RUN_S = 10.0  # each discarded latency run before the measured ones
WARMUP_RUNS_MAX = 6
CONNECTIONS_TOPIC = "bench-connections"
IDLE_CONNECTIONS = 1_000  # to each broker
ACTIVE_CLIENTS = 100
ACTIVE_RATE = 2_000.0  # records/s of the active clients together
SCALE_RATE = 1_000.0  # records/s round-robin over the scale topic's partitions
# Row groups, in the order they run on each side.
GROUPS = ("throughput", "latency", "requests", "java", "e2e-tool", "connections", "compaction", "scale")
COMPACTION_MB = 1_024  # the compacted log the cleaner is busy on in the compaction rows
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
    # Discarded runs first, until one keeps up (no error, under a second of records outstanding): a freshly started
    # cluster's first seconds (a JVM's JIT, its first elections) otherwise land in the first measured row only.
    warmups = []
    for _ in range(WARMUP_RUNS_MAX):
        warm = latency.run(target, latency.plan_for(target, LATENCY_TOPIC, seconds=WARMUP_RUN_S))
        warmups.append(asdict(warm))
        if warm.errors == 0 and warm.outstanding_max < warm.rate:
            break
    out: dict[str, Any] = {"latency-warmup": warmups}
    for name, client, rate in LATENCY_RUNS:
        plan = latency.plan_for(target, LATENCY_TOPIC, client, rate, seconds)
        out[name] = asdict(latency.run(target, plan))
    plan = latency.plan_for(target, LATENCY_TOPIC, seconds=seconds)
    search = latency.find_max_rate(lambda rate: latency.run(target, replace(plan, rate=rate)), SEARCH_START_RATE,
                                   steps=steps)
    out["max-rate"] = {"e2e_p99_ms_max": search.e2e_p99_ms_max, "max_rate": search.max_rate,
                       "runs": [asdict(r) for r in search.runs]}
    return out


def _run(target: Target, seconds: float, steps: int, only: frozenset[str] = frozenset(GROUPS)) -> dict[str, Any]:
    return {"target": target.name, **(_throughput(target, seconds) if "throughput" in only else {}),
            **(_latencies(target, seconds, steps) if "latency" in only else {})}


def _request_rates(target: Target, seconds: float) -> dict[str, Any]:
    """Produce requests per second the leader of a one-partition topic serves at one record per request."""
    target.ensure_topic(REQUESTS_TOPIC, 1)
    address, leader_pid = requests.leader_of(target, REQUESTS_TOPIC)
    return {f"requests-acks-{name}": asdict(requests.run(address, REQUESTS_TOPIC, acks, leader_pid, target.pids,
                                                         seconds))
            for name, acks in (("1", 1), ("all", -1))}


def _java_clients(target: Target, dist: KafkaDist, seconds: float) -> dict[str, Any]:
    """Kafka's producer and consumer perf tests: the Java client's batching as the load."""
    target.ensure_topic(JAVA_TOPIC, 3)
    produced = java_perf.produce(dist, target, JAVA_TOPIC, seconds)
    return {"java-produce": asdict(produced),
            "java-consume": asdict(java_perf.consume(dist, target, JAVA_TOPIC, produced.records))}


def _e2e_tool(target: Target, dist: KafkaDist, seconds: float) -> dict[str, Any]:
    """Kafka's `kafka-e2e-latency`: the Java clients' round trip of one record at a time."""
    target.ensure_topic(E2E_TOOL_TOPIC, 1)
    return {"e2e-tool": asdict(java_perf.e2e_latency(dist, target, E2E_TOOL_TOPIC, seconds))}


def _connections(target: Target, seconds: float) -> dict[str, Any]:
    target.ensure_topic(CONNECTIONS_TOPIC, 3)
    return connections.run(target, IDLE_CONNECTIONS, ACTIVE_CLIENTS, ACTIVE_RATE, CONNECTIONS_TOPIC, seconds)


def _peer_rows(target: Target, dist: KafkaDist, seconds: float, steps: int, only: frozenset[str],
               partitions: int | None, compaction_mb: int) -> dict[str, Any]:
    """The rows of one side of a Kafka comparison, in `GROUPS` order."""
    out = _run(target, seconds, steps, only)
    if "requests" in only:
        out.update(_request_rates(target, seconds))
    if "java" in only:
        out.update(_java_clients(target, dist, seconds))
    if "e2e-tool" in only:
        out.update(_e2e_tool(target, dist, seconds))
    if "connections" in only:
        out.update(_connections(target, seconds))
    if "compaction" in only:
        out.update(compaction.run(target, compaction_mb, seconds))
    if partitions is not None and "scale" in only:
        out.update(scale.run(target, partitions, SCALE_RATE, seconds))
    return out


def compare(seconds: float = latency.SECONDS_MIN, steps: int = 6, brokers: int = 3, peer: str = "tansu",
            scale_partitions: int | None = None, only: frozenset[str] = frozenset(GROUPS),
            compaction_mb: int = COMPACTION_MB) -> dict[str, Any]:
    """Every row on insync and on the peer: Tansu (one node in memory, with insync's one-node row beside it) or
    Apache Kafka (`kafka[:VERSION]`, as many brokers as insync, with the request rate, Kafka's own clients, the
    connection rows, the compaction rows on a log of `compaction_mb` and, given `scale_partitions`, the scale
    rows). `only`: the row groups to run."""
    assert seconds > 0 and steps > 0 and only <= frozenset(GROUPS) and compaction_mb > 0, only
    assert scale_partitions is None or scale_partitions > 0
    if peer == "tansu":
        with targets.insync_cluster(brokers) as target:
            insync = _run(target, seconds, steps, only)  # the Tansu comparison's groups: throughput and latency
        if "throughput" in only:
            insync["produce-one-node"] = _produce_one_node(seconds)
        with targets.tansu() as target:
            time.sleep(TANSU_SETTLE_S)
            other = _run(target, seconds, steps, only)
        if "throughput" in only:
            other["produce-one-node"] = other["produce"]  # Tansu is one node already
        return {"insync": insync, "peer": other}
    engine = kafka_cluster.parse_engine(peer)
    dist = kafka_cluster.dist_for(engine)
    runs = {}
    for side, engine_of in (("insync", kafka_cluster.ENGINE_INSYNC), ("peer", engine)):
        with targets.insync_cluster(brokers, engine=engine_of) as target:
            runs[side] = _peer_rows(target, dist, seconds, steps, only, scale_partitions, compaction_mb)
    return runs


ROWS = (
    ("produce MB/s (acks=all)", "produce", "mb_per_s"), ("produce server CPU ms/MB", "produce", "server_cpu_ms_per_mb"),
    ("produce MB/s, one node (RF 1)", "produce-one-node", "mb_per_s"),
    ("  its server CPU ms/MB", "produce-one-node", "server_cpu_ms_per_mb"),
    ("consume MB/s", "consume", "mb_per_s"), ("consume server CPU ms/MB", "consume", "server_cpu_ms_per_mb"),
    ("consume MB/s, queue backoff 10 ms", "consume-eager", "mb_per_s"),
    ("  its server CPU ms/MB", "consume-eager", "server_cpu_ms_per_mb"),
    *((f"{name} {label}" if index == 0 else f"  {label}", name, key) for name, _, _ in LATENCY_RUNS
      for index, (label, key) in enumerate(LATENCY_FIGURES)),
    ("max rate, e2e p99 < 50 ms", "max-rate", "max_rate"),
    ("Produce requests/s, acks=1", "requests-acks-1", "requests_per_s"),
    ("  server CPU ms/request", "requests-acks-1", "cluster_cpu_ms_per_request"),
    ("Produce requests/s, acks=all", "requests-acks-all", "requests_per_s"),
    ("  server CPU ms/request", "requests-acks-all", "cluster_cpu_ms_per_request"),
    ("produce MB/s, Java perf-test", "java-produce", "mb_per_s"),
    ("  its ack p99 ms", "java-produce", "p99_ms"),
    ("  its server CPU ms/MB", "java-produce", "server_cpu_ms_per_mb"),
    ("consume MB/s, Java perf-test", "java-consume", "mb_per_s"),
    ("  its server CPU ms/MB", "java-consume", "server_cpu_ms_per_mb"),
    ("kafka-e2e-latency: avg ms", "e2e-tool", "avg_ms"), ("  p50 ms", "e2e-tool", "p50_ms"),
    ("  p99 ms", "e2e-tool", "p99_ms"), ("  p99.9 ms", "e2e-tool", "p999_ms"),
    ("idle connections: KB/connection", "connections-idle", "kb_per_connection"),
    ("  slow connects (SYN resent)", "connections-idle", "slow_connects"),
    ("active producers: ack p50 ms", "connections-active", "ack_p50_ms"),
    ("  ack p99 ms", "connections-active", "ack_p99_ms"),
    ("  sender behind schedule ms, max", "connections-active", "send_behind_ms_max"),
    ("reconnect storm: all answered s", "reconnect-storm", "seconds"),
    ("  slow connects (SYN resent)", "reconnect-storm", "slow_connects"),
    ("  connections made again", "reconnect-storm", "reconnects"),
    ("compaction: log MB the cleaner takes", "compaction", "megabytes"),
    ("  ack p99 ms, cleaner idle", "compaction", "idle_ack_p99_ms"),
    ("  ack p99 ms, cleaner busy", "compaction", "busy_ack_p99_ms"),
    ("  busy / idle ack p99", "compaction", "ack_p99_ratio"),
    ("  e2e p99 ms, cleaner idle", "compaction", "idle_e2e_p99_ms"),
    ("  e2e p99 ms, cleaner busy", "compaction", "busy_e2e_p99_ms"),
    ("  busy run with a clean writing %", "compaction", "busy_cleaning_percent"),
    ("  server CPU % busy (of one core)", "compaction", "busy_cpu_percent"),
    ("  config change to copies cleaned s", "compaction", "cleaned_s"),
    ("scale: partitions", "scale", "partitions"),
    ("  broker resident MB, max", "scale", "rss_mb_max"),
    ("  broker idle CPU %, max", "scale", "idle_cpu_percent_max"),
    ("  produce ack p50 ms, all partitions", "scale", "produce_ack_p50_ms"),
    ("  produce ack p99 ms, all partitions", "scale", "produce_ack_p99_ms"),
    ("  partitions the killed broker led", "scale", "killed_leaderships"),
    ("  all led again after the kill s", "scale", "leaders_after_kill_s"),
    ("  its restart to every ISR whole s", "scale", "restart_to_isr_whole_s"),
    ("  partitions the stopped broker led", "scale", "shutdown_leaderships"),
    ("  its controlled shutdown s", "scale", "controlled_shutdown_s"),
)


def table(result: dict[str, Any]) -> str:
    """Each row both sides ran: insync, the peer, and insync / peer (above 1 is better for MB/s and rates, below
    1 for milliseconds and CPU)."""
    insync, peer = result["insync"], result["peer"]
    lines = [f"{'':36} {insync['target']:>14} {peer['target']:>14} {'ratio':>7}"]
    for label, mode, key in ROWS:
        if mode not in insync or mode not in peer:
            continue
        mine, theirs = insync[mode][key], peer[mode][key]
        ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
        lines.append(f"{label:36} {mine if mine is not None else '-':>14} {theirs if theirs is not None else '-':>14}"
                     f" {ratio:>7}")
    return "\n".join(lines)
