"""A consumer's Fetch to a follower on a real 3-broker cluster, raw (no client library in between): from v11,
which carries client metadata, the follower answers below its own high watermark (KIP-392) as Kafka does; an
older version is refused with NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import pytest

from conftest import fetch_partition, produce_raw, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)

TOPIC = "fetch-follower"


def test_a_follower_serves_a_consumer_fetch_v11_and_later(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, TOPIC, 1, 3, {})
    [row] = describe_rows(insync_cluster.bootstrap, [TOPIC])
    leader = insync_cluster.node(row.leader).address
    batch = build_batch([(b"k%d" % i, b"v%d" % i) for i in range(3)])
    assert produce_raw(leader, TOPIC, batch) == 0
    follower = insync_cluster.node(next(b for b in row.replicas if b != row.leader)).address
    # acks=all returned once the followers have the batch; each learns the high watermark on its next fetch
    wait_until(lambda: fetch_partition(follower, TOPIC, 12).high_watermark == 3, 10, "the follower's high watermark")

    answer = fetch_partition(follower, TOPIC, 12)
    assert (answer.error_code, answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (
        0, 3, 3, 0)
    assert bytes(answer.records) == bytes(fetch_partition(leader, TOPIC, 12).records)
    assert answer.aborted_transactions is None and answer.preferred_read_replica == -1
    past = fetch_partition(follower, TOPIC, 12, offset=3)  # nothing committed past it yet: empty, no error
    assert (past.error_code, bytes(past.records or b"")) == (0, b"")
    old = fetch_partition(follower, TOPIC, 10)  # no client metadata: the leader only, as in Kafka
    assert (old.error_code, old.high_watermark) == (6, -1)
