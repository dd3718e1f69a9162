"""A Spark source task reading through a leader SIGKILL: it finds the new leader and reads every record once.

3 brokers, RF 3, min ISR 2, acks=all records. The task (`kafka_io.RangeFetch`, the body of every read task)
fetches in small pieces; after its first batch the partition's leader is killed. The task must look the new
leader up and go on from where it was: every offset of the planned range exactly once, in order, with the values
that were acknowledged.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

pytest.importorskip("numba")

from confluent_kafka import Producer  # noqa: E402

from conftest import start, wait_until  # noqa: E402
from insync.admin import describe_rows, ensure_topic  # noqa: E402
from insync.chaos import cluster  # noqa: E402
from insync.spark.source.kafka_io import (  # noqa: E402
    Metadata,
    OffsetRange,
    RangeFetch,
    admin_config,
    forget_admin_client,
)
from insync.types import TopicPartition  # noqa: E402

pytestmark = pytest.mark.timeout(180)

TOPIC = "spark-failover"
RECORDS = 3_000


def leader_of(spec: cluster.ClusterSpec, without: int = -1) -> int:
    bootstrap = ",".join(b.address for b in spec.brokers if b.node_id != without)
    return next(r.leader for r in describe_rows(bootstrap, [TOPIC]) if r.partition == 0)


def test_task_follows_a_new_leader_after_sigkill(tmp_path: Path) -> None:
    spec = start(tmp_path)
    bootstraps = {spec.bootstrap}
    try:
        ensure_topic(spec.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: len(next(iter(describe_rows(spec.bootstrap, [TOPIC]))).isr) == 3, 30, "a full ISR")
        # Small batches (about 50 records), so a 4 KiB fetch takes a few and the read needs many fetches.
        producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.num.messages": 50})
        for i in range(RECORDS):
            producer.produce(TOPIC, b"value-%d" % i, b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        with Metadata({"bootstrap.servers": spec.bootstrap}) as md:
            high = md.latest([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
        assert high == RECORDS

        conf = {"bootstrap.servers": spec.bootstrap, "max.partition.fetch.bytes": "4096"}
        fetch = RangeFetch(OffsetRange(TOPIC, 0, 0, high), conf, include_headers=False, fail_on_data_loss=True,
                           poll_timeout_ms=60_000)
        batches = fetch.batches()
        first = next(batches)
        victim = leader_of(spec)
        spec = cluster.stop_node(spec, victim, deadline_s=0, sig=signal.SIGKILL)
        bootstraps.add(spec.bootstrap)
        rest = list(batches)  # bounded by pollTimeoutMs: a new leader must turn up well within it

        offsets = [o for b in (first, *rest) for o in b.column("offset").to_pylist()]
        values = [v for b in (first, *rest) for v in b.column("value").to_pylist()]
        assert offsets == list(range(RECORDS))
        assert values == [b"value-%d" % i for i in range(RECORDS)]
        assert len(rest) > 1 and first.num_rows < RECORDS  # the kill really fell in the middle of the read
        assert leader_of(spec, without=victim) not in (victim, -1)
        # The driver's kept AdminClient last heard of the killed leader: it must ask again before ListOffsets.
        with Metadata({"bootstrap.servers": spec.bootstrap}) as md:
            assert md.latest([TopicPartition(TOPIC, 0)]) == {TopicPartition(TOPIC, 0): RECORDS}
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
        # `Metadata` keeps its AdminClient for the process (a driver reuses it): without the cluster it would print
        # connection failures to this worker's stderr until it is reaped.
        for bootstrap in bootstraps:
            forget_admin_client(admin_config({"bootstrap.servers": bootstrap}))
