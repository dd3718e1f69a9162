"""`insync.bench.steady` (issue 17's 10 s steady state, here a second) on the shared 3-broker cluster: the produce
window counts what the brokers acknowledged after the warm-up and reports the servers' CPU over it; the consume
window keeps reading by starting a partition over at its end, so a topic smaller than the window still fills it."""

from __future__ import annotations

import pytest

from insync.admin import ensure_topic
from insync.bench import clients, steady, targets
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(90)


def _cpu(spec: ClusterSpec) -> steady.CpuSampler:
    pids = tuple(node.pid for node in (*spec.controllers, *spec.brokers) if node.pid is not None)
    return lambda: targets.server_cpu_s(pids)


def test_steady_produce_counts_acknowledged_records_inside_the_window(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, "steady-produce", 3, 3, {"min.insync.replicas": "2"})
    result = steady.produce(insync_cluster.bootstrap, "steady-produce", 1024, "all", _cpu(insync_cluster),
                            warmup_s=0.5, seconds=1.0)
    assert result.errors == 0
    assert result.messages > 0 and result.seconds >= 1.0  # the window ends at the first check past it
    assert result.mb_per_s == pytest.approx(result.messages * 1024 / 1e6 / result.seconds, rel=1e-2)
    assert result.server_cpu_ms_per_mb is not None and result.server_cpu_ms_per_mb > 0


def test_steady_consume_starts_partitions_over_at_their_end(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, "steady-consume", 2, 3, {"min.insync.replicas": "2"})
    produced = clients.produce(insync_cluster.bootstrap, "steady-consume", 200, 1024)
    assert produced.errors == 0
    result = steady.consume(insync_cluster.bootstrap, "steady-consume", _cpu(insync_cluster), warmup_s=0.5,
                            seconds=1.0)
    assert result.errors == 0 and result.message_bytes == 1024
    assert result.messages > 200  # more than the topic holds: every partition was read again from its start


def test_steady_consume_passes_the_fetch_queue_backoff_to_librdkafka(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, "steady-eager", 1, 3, {"min.insync.replicas": "2"})
    assert clients.produce(insync_cluster.bootstrap, "steady-eager", 100, 1024).errors == 0
    result = steady.consume(insync_cluster.bootstrap, "steady-eager", _cpu(insync_cluster), warmup_s=0.2,
                            seconds=1.0, fetch_queue_backoff_ms=10)
    assert result.errors == 0 and result.messages > 100
