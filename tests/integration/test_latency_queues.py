"""Issue 17 on real processes: with a consumer tailing, acks=all writes at a steady rate build no queue.

A 3-broker cluster, RF 3, min ISR 2; `insync bench latency`'s two processes: a confluent-kafka producer at
linger.ms=0, acks=all, 500 records a second for 10 s (after a 2 s warm-up), and a consumer tailing the partition.
Meanwhile the test samples the leader: its produce purgatory (`PurgatorySize{delayedOperation="Produce"}`) and the
gap between its log end offset and its high watermark (ListOffsets latest as the debugging replica, then as a
consumer). It asserts counts, never times: the purgatory stays within what one connection may have in flight,
the gap and the records the producer had sent but not yet seen acknowledged stay under two seconds of records,
and every record is acknowledged and read. Before the listener answered pipelined requests as they came (one
request at a time a connection), the producer's unacknowledged records grew by about 350 a second, without end
(3,969 and 4,215 at the end of two runs), while the purgatory held one request and the gap stayed near 200: the
queue was in the socket, so only the producer's count shows it. A machine so loaded that every answer takes
hundreds of milliseconds stays under the bound (406 unacknowledged at most, on 2 cores at load 5).
"""

from __future__ import annotations

import re
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import start
from insync import errors, limits
from insync.admin import describe_rows
from insync.admin_requests import DEBUGGING_REPLICA_ID, LIST_OFFSETS, LIST_OFFSETS_VERSION, request
from insync.bench import latency
from insync.bench.targets import Target
from insync.chaos import cluster
from insync.protocol.kio import build, error_of, nested, request_class

pytestmark = pytest.mark.timeout(120)

TOPIC = "tailed"
RATE = 500.0
SECONDS = 10.0
SAMPLE_EVERY_S = 0.1
CONSUMER_REPLICA_ID = -1
LATEST_TIMESTAMP = -1
PRODUCE_PURGATORY = re.compile(r'^PurgatorySize\{delayedOperation="Produce"\} (\S+)$', re.MULTILINE)


def _latest(address: str, replica_id: int) -> int:
    """ListOffsets latest of partition 0: the high watermark for a consumer, the log end offset for the
    debugging replica."""
    cls = request_class(LIST_OFFSETS, LIST_OFFSETS_VERSION)
    asked = build(nested(cls, "ListOffsetsPartition"), partition_index=0, current_leader_epoch=-1,
                  timestamp=LATEST_TIMESTAMP)
    body = request(address, build(cls, replica_id=replica_id, isolation_level=0, topics=(
        build(nested(cls, "ListOffsetsTopic"), name=TOPIC, partitions=(asked,)),)), 5.0)
    answer = body.topics[0].partitions[0]
    assert error_of(answer.error_code) is errors.NONE
    return int(answer.offset)


def _produce_purgatory(metrics_port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    found = PRODUCE_PURGATORY.search(text)
    assert found is not None, "no PurgatorySize{delayedOperation=\"Produce\"} on the leader's metrics"
    return int(float(found.group(1)))


@dataclass
class _Leader:
    """The largest produce purgatory and log-end-to-high-watermark gap seen on the leader, sampled until `done`."""

    address: str
    metrics_port: int
    done: threading.Event = field(default_factory=threading.Event)
    samples: int = 0
    purgatory_max: int = 0
    gap_max: int = 0

    def sample(self) -> None:
        while not self.done.wait(SAMPLE_EVERY_S):  # bounded: the test sets `done` in a finally
            high_watermark = _latest(self.address, CONSUMER_REPLICA_ID)
            # Read after the HW, so the gap may count records appended in between: never less than the true one.
            log_end = _latest(self.address, DEBUGGING_REPLICA_ID)
            self.purgatory_max = max(self.purgatory_max, _produce_purgatory(self.metrics_port))
            self.gap_max = max(self.gap_max, log_end - high_watermark)
            self.samples += 1


def test_a_tailing_consumer_and_steady_acks_all_writes_build_no_queue(tmp_path: Path) -> None:
    spec = start(tmp_path / "cluster")
    try:
        target = Target("insync", spec.bootstrap, 3)
        target.ensure_topic(TOPIC, 1)
        node = spec.node(describe_rows(spec.bootstrap, [TOPIC])[0].leader)
        leader = _Leader(node.address, node.metrics_port)
        sampler = threading.Thread(target=leader.sample, daemon=True)
        sampler.start()
        try:
            result = latency.run(target, latency.plan_for(target, TOPIC, rate=RATE, seconds=SECONDS, warmup_s=2.0))
        finally:
            leader.done.set()
            sampler.join(10)
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
    print(result.to_json(), leader)
    assert result.records_sent >= RATE * SECONDS * 0.9
    assert result.errors == 0 and result.records_acked == result.records_read == result.records_sent
    assert leader.samples >= 10, "the leader was hardly sampled"
    assert result.outstanding_max <= 2 * RATE, "the producer's unacknowledged records grew past 2 s of records"
    assert leader.gap_max <= 2 * RATE, "the leader's log end ran more than 2 s of records ahead of its HW"
    assert leader.purgatory_max <= limits.INFLIGHT_REQUESTS_PER_CONNECTION_MAX
