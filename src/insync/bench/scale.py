"""The scale rows of `insync bench compare --scale N`: one cluster holding N partitions (RF 3, min ISR 2).

In this order, after the cluster ran the other rows: the topic is created and every ISR is whole; after
`SETTLE_S`, each broker's resident memory (VmRSS) and CPU over `IDLE_WINDOW_S` without clients (% of a core);
one confluent-kafka producer (acks=all, linger 0) writing round-robin to all N partitions at a steady `rate`, ack
p50/p99 over `seconds` after a warm-up; the broker leading the most partitions killed (SIGKILL): the time until
every live broker's metadata names a live leader for every partition, then, restarted, until every broker's
metadata shows every ISR whole; a controlled shutdown (SIGTERM until the process exits) of the broker then leading
the most (a restarted broker leads nothing until leaders are rebalanced), restarted until every ISR is whole.
Each broker's metadata comes from a Metadata request of its own, `POLL_S` or more apart (`timed`).
A wait past `RECOVERY_TIMEOUT_S` gives None.
"""

from __future__ import annotations

import collections
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from insync.admin import ensure_topic
from insync.admin_requests import METADATA, METADATA_VERSION, request
from insync.bench import clients
from insync.bench.clients import percentile
from insync.bench.connections import brokers
from insync.bench.targets import Target, rss_kb, server_cpu_s
from insync.chaos import cluster
from insync.protocol.kio import build, nested, request_class

TOPIC = "bench-scale"
SETTLE_S = 5.0
IDLE_WINDOW_S = 10.0
POLL_S = 0.2
CREATE_TIMEOUT_S = 600.0
RECOVERY_TIMEOUT_S = 600.0
METADATA_TIMEOUT_S = 30.0
RECORD_BYTES = 1024
WARMUP_S = 3.0
FLUSH_TIMEOUT_S = 60.0
POLLS_PER_SEND_MAX = 1_000

# (partition, leader, replicas, isr) of a topic's partitions in one broker's metadata
PartitionState = tuple[int, int, tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ScaleResult:
    partitions: int
    rss_mb: tuple[float | None, ...]  # each broker's, idle
    rss_mb_max: float | None
    idle_cpu_percent: tuple[float | None, ...]  # each broker's, % of one core
    idle_cpu_percent_max: float | None
    produce_rate: float
    produce_errors: int
    produce_ack_p50_ms: float | None
    produce_ack_p99_ms: float | None
    killed_leaderships: int  # partitions the killed broker led
    leaders_after_kill_s: float | None
    restart_to_isr_whole_s: float | None
    shutdown_leaderships: int  # partitions the broker shut down led
    controlled_shutdown_s: float | None


def cpu_percent(before: float | None, after: float | None, seconds: float) -> float | None:
    """CPU seconds used over `seconds` as % of one core."""
    assert seconds > 0
    if before is None or after is None:
        return None
    return round((after - before) * 100 / seconds, 2)


def largest(values: Sequence[float | None]) -> float | None:
    return max(values) if values and all(v is not None for v in values) else None  # type: ignore[type-var]


def all_led(states: Sequence[PartitionState], partitions: int, dead: int | None) -> bool:
    """Every partition is in the metadata with a leader, which is not the `dead` broker."""
    return len(states) == partitions and all(leader not in (-1, dead) for _, leader, _, _ in states)


def isr_whole(states: Sequence[PartitionState], partitions: int) -> bool:
    """Every partition is in the metadata with every replica in its ISR."""
    return len(states) == partitions and all(set(isr) == set(replicas) for _, _, replicas, isr in states)


def partition_states(address: str, topic: str) -> list[PartitionState]:
    """`topic`'s partitions as the broker at `address` (host:port) sees them; [] when it does not answer."""
    cls = request_class(METADATA, METADATA_VERSION)
    body = build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name=topic),),
                 allow_auto_topic_creation=False)
    try:
        response = request(address, body, METADATA_TIMEOUT_S)
    except (OSError, RuntimeError):
        return []
    return [(int(p.partition_index), int(p.leader_id), tuple(int(r) for r in p.replica_nodes),
             tuple(int(r) for r in p.isr_nodes))
            for t in response.topics if t.name == topic for p in t.partitions]


def busiest_leader(target: Target) -> tuple[int, int]:
    """(the broker leading the most partitions of the topic, how many), by the first broker's metadata."""
    counts = collections.Counter(leader for _, leader, _, _ in partition_states(brokers(target)[0].address, TOPIC))
    ids = {node.node_id for node in brokers(target)}
    node_id, led = max(((n, counts.get(n, 0)) for n in ids), key=lambda pair: (pair[1], pair[0]))
    return node_id, led


def everywhere(target: Target, check: Callable[[list[PartitionState]], bool], dead: int | None = None) -> bool:
    """`check` holds in the metadata of every broker but `dead`."""
    return all(check(partition_states(node.address, TOPIC)) for node in brokers(target) if node.node_id != dead)


def timed(condition: Callable[[], bool], timeout_s: float = RECOVERY_TIMEOUT_S) -> float | None:
    """Seconds until `condition` holds, None past `timeout_s`. Between two checks it sleeps `POLL_S`, or as long
    as the check took if longer (decoding 10,000 partitions' metadata takes a while), so the polling client never
    takes more than half a core from the brokers it times."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:  # bounded by the timeout
        checked_at = time.monotonic()
        if condition():
            return round(time.monotonic() - started, 2)
        time.sleep(max(POLL_S, time.monotonic() - checked_at))
    return None


def idle_figures(target: Target) -> tuple[list[float | None], list[float | None]]:
    """Each broker's resident MB and idle CPU % over `IDLE_WINDOW_S`."""
    nodes = brokers(target)
    pids = [node.pid for node in nodes]
    before = [server_cpu_s((pid,)) if pid else None for pid in pids]
    time.sleep(IDLE_WINDOW_S)
    after = [server_cpu_s((pid,)) if pid else None for pid in pids]
    rss = [rss_kb(pid) if pid else None for pid in pids]
    return ([round(kb / 1024, 1) if kb is not None else None for kb in rss],
            [cpu_percent(b, a, IDLE_WINDOW_S) for b, a in zip(before, after, strict=True)])


def produce_round_robin(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float
                        ) -> tuple[int, list[float]]:
    """One producer (acks=all, linger 0) sending to partition i % `partitions` at `rate` records a second: the
    errors and the ack latencies (ms, from the scheduled send) after the warm-up."""
    assert partitions > 0 and rate > 0 and seconds > 0
    producer = clients._producer(bootstrap, "all", {"linger.ms": 0})
    payload = os.urandom(RECORD_BYTES)
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter()
    measured_from = start + WARMUP_S

    def on_delivery(scheduled: float) -> Callable[[Any, Any], None]:
        def delivered(err: Any, _msg: Any) -> None:
            nonlocal errors
            if scheduled < measured_from:
                return
            if err is not None:
                errors += 1
            else:
                latencies.append((time.perf_counter() - scheduled) * 1000)
        return delivered

    for index in range(int((WARMUP_S + seconds) * rate)):
        scheduled = start + index / rate
        for _ in range(POLLS_PER_SEND_MAX):  # poll returns early with each delivery: wait out the schedule
            delay = scheduled - time.perf_counter()
            if delay <= 0:
                break
            producer.poll(delay)
        producer.produce(topic, value=payload, partition=index % partitions, on_delivery=on_delivery(scheduled))
        producer.poll(0)
    errors += producer.flush(FLUSH_TIMEOUT_S)
    latencies.sort()
    return errors, latencies


def run(target: Target, partitions: int, rate: float, seconds: float) -> dict[str, Any]:
    """The scale rows against `target` (see the module's docstring)."""
    assert partitions > 0 and target.directory is not None
    ensure_topic(target.bootstrap, TOPIC, partitions, target.replication_factor, {"min.insync.replicas": "2"},
                 deadline_s=CREATE_TIMEOUT_S)
    timed(lambda: everywhere(target, lambda s: isr_whole(s, partitions)))
    time.sleep(SETTLE_S)
    rss, cpu = idle_figures(target)
    errors, latencies = produce_round_robin(target.bootstrap, TOPIC, partitions, rate, seconds)
    killed = _kill_and_restart(target, partitions)
    shutdown = _controlled_shutdown(target, partitions)
    return {"scale": asdict(ScaleResult(
        partitions, tuple(rss), largest(rss), tuple(cpu), largest(cpu), rate, errors, percentile(latencies, 0.5),
        percentile(latencies, 0.99), *killed, *shutdown))}


def _kill_and_restart(target: Target, partitions: int) -> tuple[int, float | None, float | None]:
    """(partitions the killed broker led, s until all are led by live brokers, s from its restart until every
    ISR is whole)."""
    assert target.directory is not None
    victim, led = busiest_leader(target)
    spec = cluster.stop_node(cluster.ClusterSpec.load(target.directory), victim, sig=signal.SIGKILL)
    led_s = timed(lambda: everywhere(target, lambda s: all_led(s, partitions, victim), dead=victim))
    started = time.monotonic()
    cluster.start_node(spec, victim)
    whole = timed(lambda: everywhere(target, lambda s: isr_whole(s, partitions)))
    return led, led_s, (round(time.monotonic() - started, 2) if whole is not None else None)


def _controlled_shutdown(target: Target, partitions: int) -> tuple[int, float | None]:
    """(partitions the broker led, s from SIGTERM to its exit); it is started again and every ISR made whole."""
    assert target.directory is not None
    victim, led = busiest_leader(target)
    started = time.monotonic()
    spec = cluster.stop_node(cluster.ClusterSpec.load(target.directory), victim, RECOVERY_TIMEOUT_S)
    shutdown_s = round(time.monotonic() - started, 2)
    cluster.start_node(spec, victim)
    timed(lambda: everywhere(target, lambda s: isr_whole(s, partitions)))
    return led, shutdown_s
