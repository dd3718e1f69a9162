import urllib.request

from prometheus_client import generate_latest

from insync.chaos.cluster import free_ports
from insync.server.metrics import MetricsSnapshot, NodeMetrics
from insync.storage.log_cleaner import CleanerMetrics


def test_kafka_names_from_a_live_snapshot() -> None:
    state = {"urp": 2}
    metrics = NodeMetrics(lambda: MetricsSnapshot(under_replicated_partitions=state["urp"], isr_shrinks=5,
                                                  failed_partitions=1, max_lag=40, active_controller=1,
                                                  produce_purgatory_size=4, fetch_purgatory_size=2))
    metrics.observe_request("Produce", 3.0)
    text = generate_latest(metrics.registry).decode()
    assert "UnderReplicatedPartitions 2.0" in text
    # The replica fetchers' gauges with Kafka's clientId tag (kafka.server:type=ReplicaFetcherManager,...).
    assert 'FailedPartitionsCount{clientId="Replica"} 1.0' in text
    assert 'MaxLag{clientId="Replica"} 40.0' in text
    assert 'DeadThreadCount{clientId="Replica"} 0.0' in text
    assert "IsrShrinksPerSec_total 5.0" in text
    assert 'PurgatorySize{delayedOperation="Produce"} 4.0' in text
    assert 'PurgatorySize{delayedOperation="Fetch"} 2.0' in text
    assert 'RequestsPerSec_total{request="Produce"} 1.0' in text
    assert 'TotalTimeMs_bucket{le="5.0",request="Produce"} 1.0' in text
    state["urp"] = 0
    assert "UnderReplicatedPartitions 0.0" in generate_latest(metrics.registry).decode()


def test_the_log_cleaners_gauges_have_kafkas_names() -> None:
    cleaner = CleanerMetrics(max_dirty_percent=62, max_clean_time_secs=3, cleaner_recopy_percent=40)
    metrics = NodeMetrics(lambda: MetricsSnapshot(cleaner=cleaner, uncleanable_partitions=1))
    text = generate_latest(metrics.registry).decode()
    for line in ("max_dirty_percent 62.0", "max_clean_time_secs 3.0", "cleaner_recopy_percent 40.0",
                 "uncleanable_partitions_count 1.0", "max_buffer_utilization_percent 0.0"):
        assert line in text


def test_http_endpoint_on_loopback() -> None:
    metrics = NodeMetrics(lambda: MetricsSnapshot(offline_partitions=3))
    port = free_ports(1)[0]
    metrics.serve(port)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "OfflinePartitionsCount 3.0" in body
    finally:
        metrics.close()
