"""The Prometheus endpoint (`metrics.port`) with Kafka's metric names.

Gauges are read from the node's cores at scrape time through a `snapshot` callable, so there is no second copy
of replication state to drift: UnderReplicatedPartitions, UnderMinIsrPartitionCount, OfflinePartitionsCount
(controller), ActiveControllerCount, and IsrShrinksPerSec / IsrExpandsPerSec (Prometheus counters with the
`_total` suffix; `rate()` gives Kafka's per-second figure). The replica fetchers' FailedPartitionsCount, MaxLag
and DeadThreadCount carry Kafka's `clientId` tag (`MaxLag{clientId="Replica"}`). `PurgatorySize{delayedOperation=
"Produce"|"Fetch"}` counts acks=all produces waiting for the ISR and fetches waiting for data: one that only
grows is a queue building up. Requests are counted and timed per API (`RequestsPerSec{request="Produce"}`,
`TotalTimeMs{request="Fetch"}`), as Kafka's RequestMetrics are; the log cleaner's gauges keep Kafka's names
(`max_dirty_percent`, `max_clean_time_secs`, `cleaner_recopy_percent`, ...); SASL listeners count
`successful_authentication_total` and `failed_authentication_total`. Each node owns its own registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from insync.broker.core import BrokerCore
from insync.storage.log_cleaner import CleanerMetrics

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
REPLICA_FETCHER_CLIENT_ID = "Replica"  # Kafka's clientId of the follower fetchers' ReplicaFetcherManager


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    under_replicated_partitions: int = 0
    under_min_isr_partitions: int = 0
    offline_partitions: int = 0
    failed_partitions: int = 0
    max_lag: int = 0
    active_controller: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    produce_purgatory_size: int = 0
    fetch_purgatory_size: int = 0
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_missed_changes: int = 0
    cleaner: CleanerMetrics = field(default_factory=CleanerMetrics)
    uncleanable_partitions: int = 0
    request_queue_size: int = 0


class _CoreCollector(Collector):
    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        s = self.snapshot()
        gauges = (
            ("UnderReplicatedPartitions", "Partitions led here whose ISR is smaller than the replica set",
             s.under_replicated_partitions),
            ("UnderMinIsrPartitionCount", "Partitions led here whose ISR is below min.insync.replicas",
             s.under_min_isr_partitions),
            ("OfflinePartitionsCount", "Partitions without a leader (controller)", s.offline_partitions),
            ("ActiveControllerCount", "1 on the active controller", s.active_controller),
            ("NumIncrementalFetchSessions", "Followers' incremental fetch sessions kept here (FetchSessionCache)",
             s.fetch_sessions),
            ("NumIncrementalFetchPartitionsCached", "Partitions held by those sessions (FetchSessionCache)",
             s.fetch_session_partitions),
            ("RequestQueueSize", "Requests read and not yet being handled (RequestChannel; at most "
             "queued.max.requests)", s.request_queue_size),
            ("IncrementalFetchMissedChanges", "Changed partitions only a session's full walk found (insync's own; "
             "0 unless a change went unmarked)", s.fetch_session_missed_changes),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(name, doc, value=value)
        fetcher_gauges = (
            ("FailedPartitionsCount", "Partitions the replica fetchers marked failed (KIP-461)",
             s.failed_partitions),
            ("MaxLag", "Largest lag in messages of a follower partition behind its leader", s.max_lag),
            ("DeadThreadCount", "Always 0: insync's fetchers are coroutines on one event loop whose per-partition "
             "errors are isolated, so there is no thread to die", 0),
        )
        for name, doc, value in fetcher_gauges:
            family = GaugeMetricFamily(name, doc, labels=["clientId"])
            family.add_metric([REPLICA_FETCHER_CLIENT_ID], value)
            yield family
        purgatory = GaugeMetricFamily("PurgatorySize", "Requests waiting in a purgatory (DelayedOperationPurgatory)",
                                      labels=["delayedOperation"])
        purgatory.add_metric(["Produce"], s.produce_purgatory_size)
        purgatory.add_metric(["Fetch"], s.fetch_purgatory_size)
        yield purgatory
        yield from _cleaner_gauges(s)
        yield CounterMetricFamily("IsrShrinksPerSec", "ISR shrinks committed by partitions led here",
                                  value=s.isr_shrinks)
        yield CounterMetricFamily("IsrExpandsPerSec", "ISR expansions committed by partitions led here",
                                  value=s.isr_expands)


def _cleaner_gauges(s: MetricsSnapshot) -> Iterator[Any]:
    """Kafka's log cleaner gauges, JMX `kafka.log:type=LogCleaner,name=<name>` and `type=LogCleanerManager`, with
    the name's dashes as underscores (Prometheus names take none)."""
    c = s.cleaner
    gauges = (
        ("max_dirty_percent", "LogCleanerManager: the cleanable ratio of the dirtiest compacted log, in percent",
         c.max_dirty_percent),
        ("uncleanable_partitions_count", "LogCleanerManager: compacted logs an unexpected error stopped cleaning",
         s.uncleanable_partitions),
        ("max_clean_time_secs", "LogCleaner: how long the last clean took", c.max_clean_time_secs),
        ("cleaner_recopy_percent", "LogCleaner: bytes written over bytes read by the last clean, in percent",
         c.cleaner_recopy_percent),
        ("max_buffer_utilization_percent", "LogCleaner: how full the last clean's offset map was, in percent",
         c.max_buffer_utilization_percent),
        ("max_compaction_delay_secs", "LogCleaner: how far past max.compaction.lag.ms the most overdue log was",
         c.max_compaction_delay_secs),
    )
    for name, doc, value in gauges:
        yield GaugeMetricFamily(name, doc, value=value)


class NodeMetrics:
    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_CoreCollector(snapshot))
        self.requests = Counter("RequestsPerSec", "Requests handled, by API", ["request"],
                                registry=self.registry)
        self.latency = Histogram("TotalTimeMs", "Request time from receipt to response, by API", ["request"],
                                 buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        # Kafka's socket-server-metrics successful-authentication-total and failed-authentication-total
        self.authentications = Counter("successful_authentication", "SASL authentications that succeeded, by "
                                       "listener", ["listener"], registry=self.registry)
        self.failed_authentications = Counter("failed_authentication", "SASL authentications that failed, by "
                                              "listener", ["listener"], registry=self.registry)
        # Each API's two children, looked up once: `labels()` costs a lock and a dict walk per call, twice a
        # request. Bounded by the APIs a node answers (the listener refuses the others before dispatch).
        self._per_api: dict[str, tuple[Any, Any]] = {}
        self._server: Any = None

    def observe_request(self, api_name: str, elapsed_ms: float) -> None:
        children = self._per_api.get(api_name)
        if children is None:
            children = self._per_api[api_name] = (self.requests.labels(api_name), self.latency.labels(api_name))
        children[0].inc()
        children[1].observe(elapsed_ms)

    def observe_authentication(self, listener: str, succeeded: bool) -> None:
        (self.authentications if succeeded else self.failed_authentications).labels(listener).inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Start the HTTP endpoint in a daemon thread (prometheus-client's own server)."""
        assert port > 0
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None


def snapshot(core: BrokerCore, events_written: Mapping[str, int]) -> MetricsSnapshot:
    """Gauges from the partitions and fetchers; the ISR meters count the isr_shrink/isr_expand events written."""
    led = [p for p in core.partitions.values() if p.is_leader]
    return MetricsSnapshot(
        under_replicated_partitions=sum(1 for p in led if p.is_under_replicated),
        under_min_isr_partitions=sum(1 for p in led if p.is_under_min_isr),
        failed_partitions=core.failed_partitions_count,
        max_lag=max((s.max_lag for s in core.fetchers.sessions.values()), default=0),
        isr_shrinks=events_written.get("isr_shrink", 0),
        isr_expands=events_written.get("isr_expand", 0),
        produce_purgatory_size=core.produce.purgatory_size,
        fetch_purgatory_size=core.fetch_server.purgatory_size,
        fetch_sessions=len(core.fetch_server.sessions),
        fetch_session_partitions=core.fetch_server.sessions.partitions_cached,
        fetch_session_missed_changes=core.fetch_server.sessions.missed_changes,
        cleaner=replace(cleaner.metrics) if (cleaner := core.log_manager.cleaner) is not None else CleanerMetrics(),
        uncleanable_partitions=len(cleaner.uncleanable) if cleaner is not None else 0,
    )
