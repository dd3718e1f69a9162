"""Each cluster has its own id, as Kafka's (a random UUID in 22 base64url characters): every broker answers it in
Metadata and DescribeCluster, and a restarted controller keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import start, wait_until
from insync.admin_requests import request
from insync.chaos import cluster
from insync.protocol.kio import build_defaults, request_class
from insync.wire.versions import DESCRIBE_CLUSTER, METADATA

pytestmark = pytest.mark.timeout(180)


def cluster_ids(spec: cluster.ClusterSpec) -> set[str]:
    """The cluster id every broker answers, by Metadata and by DescribeCluster."""
    answers = set()
    for broker in spec.brokers:
        metadata = request(broker.address, build_defaults(request_class(METADATA, 12), topics=()), 10)
        described = request(broker.address, build_defaults(request_class(DESCRIBE_CLUSTER, 1)), 10)
        answers |= {metadata.cluster_id, described.cluster_id}
    return answers


def settled_id(spec: cluster.ClusterSpec) -> str:
    """The one id all brokers answer, once each has read it from the metadata."""
    wait_until(lambda: len(cluster_ids(spec)) == 1 and "" not in cluster_ids(spec) and None not in cluster_ids(spec),
               30, "every broker to answer the same cluster id")
    (cluster_id,) = cluster_ids(spec)
    return str(cluster_id)


def test_a_cluster_has_its_own_id_on_every_broker_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    spec = start(tmp_path / "a", brokers=2)
    try:
        cluster_id = settled_id(spec)
        assert len(cluster_id) == 22 and cluster_id != "insync-cluster-0001"
        spec = cluster.stop_node(spec, cluster.CONTROLLER_ID)
        spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
        cluster.wait_listening(spec.controller)
        for broker in spec.brokers:  # the brokers register again, with the id they learnt first
            spec = cluster.stop_node(spec, broker.node_id)
            spec = cluster.start_node(spec, broker.node_id)
        cluster.wait_registered(spec, 30)
        assert settled_id(spec) == cluster_id
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
    other = start(tmp_path / "b", brokers=1)
    try:
        assert settled_id(other) != cluster_id
    finally:
        cluster.down(cluster.ClusterSpec.load(other.directory), 10.0)


def test_a_cluster_whose_picked_port_was_taken_first_starts_again_on_new_ports(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the pick of a free port and a node's bind, a parallel test's process may take it: the node exits with
    `address already in use`, and `cluster.up` starts the new cluster again on new ports (not a failed test)."""
    import socket

    taker = socket.socket()
    taker.bind(("127.0.0.1", 0))
    taker.listen()
    taken = taker.getsockname()[1]
    picks = iter([True])
    pick = cluster.free_ports

    def first_pick_taken(count: int) -> list[int]:
        ports = pick(count)
        return [taken, *ports[1:]] if next(picks, False) else ports

    monkeypatch.setattr(cluster, "free_ports", first_pick_taken)
    try:
        spec = cluster.up(str(tmp_path / "c"), 1, 0, ["broker.session.timeout.ms=6000"])
    finally:
        taker.close()
    try:
        assert taken not in {n.port for n in spec.nodes} | {n.metrics_port for n in spec.nodes}
        assert settled_id(spec)
    finally:
        cluster.down(spec, 30)
