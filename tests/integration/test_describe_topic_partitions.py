"""DescribeTopicPartitions (API 75) on a live cluster: librdkafka's describe_topics, paging, and `insync topics
describe` with the ELR columns of kafka-topics.sh 4.x."""

from __future__ import annotations

import subprocess
import sys

import pytest

from insync import admin_requests, errors
from insync.admin import admin_client, describe_rows, ensure_topic
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)


def test_clients_and_pages_see_every_partition(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import TopicCollection

    ensure_topic(insync_cluster.bootstrap, "dtp-a", 3, 3, {})
    ensure_topic(insync_cluster.bootstrap, "dtp-b", 2, 2, {})
    rows = {(r.topic, r.partition): r for r in describe_rows(insync_cluster.bootstrap, ["dtp-a", "dtp-b"])}
    # librdkafka (2.5+) describes topics with DescribeTopicPartitions once the broker advertises it.
    admin = admin_client(insync_cluster.bootstrap)
    for name, future in admin.describe_topics(TopicCollection(["dtp-a", "dtp-b"])).items():
        described = future.result(timeout=15)
        for p in described.partitions:
            row = rows[(name, p.id)]
            assert (p.leader.id, [n.id for n in p.replicas]) == (row.leader, list(row.replicas))
    address = insync_cluster.brokers[0].address
    paged, failed = admin_requests.describe_topic_partitions(address, ["dtp-b", "dtp-a", "nope"], 15,
                                                             page_partitions=1)
    assert [(d.topic, d.partition) for d in paged] == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2), ("dtp-b", 0),
                                                       ("dtp-b", 1)]
    assert failed == {"nope": errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert all(d.elr == () and d.last_known_elr == () and d.leader_epoch >= 0 for d in paged)
    assert all((d.isr, d.replicas) == (rows[(d.topic, d.partition)].isr, rows[(d.topic, d.partition)].replicas)
               for d in paged)


def test_topics_describe_prints_elr_columns(insync_cluster: ClusterSpec) -> None:
    ensure_topic(insync_cluster.bootstrap, "dtp-a", 3, 3, {})
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "topics", "describe", "dtp-a", "--bootstrap-server",
                          insync_cluster.bootstrap], capture_output=True, text=True, timeout=60, check=True).stdout
    lines = [line for line in out.splitlines() if "Partition: " in line and "PartitionCount" not in line]
    assert len(lines) == 3, out
    assert all(line.endswith("\tElr: \tLastKnownElr: ") for line in lines), out
