"""A consumer's Fetch to a follower on a real 3-broker cluster, raw (no client library in between): from v11,
which carries client metadata, the follower answers below its own high watermark (KIP-392) as Kafka does; an
older version is refused with NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import datetime
import socket
import struct
from typing import Any

import pytest
from kio.index import load_request_schema

from conftest import _read, produce_raw, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, nested
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)

TOPIC = "fetch-follower"


def fetch_raw(address: str, version: int, offset: int = 0) -> Any:
    """One consumer Fetch of partition 0 of TOPIC (by name, so v12 at most) at broker `address`; the partition's
    answer."""
    cls = load_request_schema(1, version)
    partition = build(nested(cls, "FetchPartition"), partition=0, current_leader_epoch=-1, fetch_offset=offset,
                      last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    body = build(cls, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                 topics=(build(nested(cls, "FetchTopic"), topic=TOPIC, partitions=(partition,)),))
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(encode_request(body, 78))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = decode_response(1, version, _read(sock, size))
    assert int(response.error_code) == 0
    return response.responses[0].partitions[0]


def test_a_follower_serves_a_consumer_fetch_v11_and_later(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, TOPIC, 1, 3, {})
    [row] = describe_rows(insync_cluster.bootstrap, [TOPIC])
    leader = insync_cluster.node(row.leader).address
    batch = build_batch([(b"k%d" % i, b"v%d" % i) for i in range(3)])
    assert produce_raw(leader, TOPIC, batch) == 0
    follower = insync_cluster.node(next(b for b in row.replicas if b != row.leader)).address
    # acks=all returned once the followers have the batch; each learns the high watermark on its next fetch
    wait_until(lambda: fetch_raw(follower, 12).high_watermark == 3, 10, "the follower's high watermark")

    answer = fetch_raw(follower, 12)
    assert (answer.error_code, answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (
        0, 3, 3, 0)
    assert bytes(answer.records) == bytes(fetch_raw(leader, 12).records)
    assert answer.aborted_transactions is None and answer.preferred_read_replica == -1
    past = fetch_raw(follower, 12, offset=3)  # nothing committed past it yet: empty, no error
    assert (past.error_code, bytes(past.records or b"")) == (0, b"")
    old = fetch_raw(follower, 10)  # no client metadata: the leader only, as in Kafka
    assert (old.error_code, old.high_watermark) == (6, -1)
