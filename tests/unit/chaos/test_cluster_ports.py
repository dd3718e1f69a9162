"""Ports for a test cluster's nodes come from below the kernel's ephemeral range (where outgoing connections get
their local ports), and a broker that exits before registering fails the start at once, naming its log."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec, NodeSpec
from insync.waiting import WaitTimeout

pytestmark = pytest.mark.timeout(30)


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low = cluster._ephemeral_low()
    assert low is not None  # Linux
    ports = cluster.free_ports(40)
    assert len(set(ports)) == 40
    assert all(cluster.PICKED_PORTS_LOW <= p < low for p in ports), ports
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        # Only two ports below the range: the one in use and one free.
        monkeypatch.setattr(cluster, "PICKED_PORTS_LOW", busy)
        monkeypatch.setattr(cluster, "PICKED_PORTS_ROOM_MIN", 2)
        monkeypatch.setattr(cluster, "_ephemeral_low", lambda: busy + 2)
        picked = cluster.free_ports(1)
        assert picked != [busy]
        if cluster._bindable(busy + 1):
            assert picked == [busy + 1]


def test_without_room_below_the_range_the_kernel_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text("10500\t60999\n")
    assert cluster._ephemeral_low(str(narrow)) == 10500
    assert cluster._ephemeral_low(str(tmp_path / "absent")) is None
    (tmp_path / "garbage").write_text("not a range\n")
    assert cluster._ephemeral_low(str(tmp_path / "garbage")) is None
    real_low = int(Path(cluster.EPHEMERAL_RANGE_FILE).read_text().split()[0])
    monkeypatch.setattr(cluster, "_ephemeral_low", lambda: 10500)  # 500 ports of room: too few
    assert all(p >= real_low for p in cluster.free_ports(5))


def test_a_broker_that_exits_fails_the_wait_for_registration_at_once(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (port,) = cluster.free_ports(1)  # nothing listens: the metadata request fails, the exit is seen first
    spec = ClusterSpec(str(tmp_path), (NodeSpec(1, "broker", port, 0, str(tmp_path / "node-1"), gone.pid),))
    with pytest.raises(RuntimeError, match=r"node 1 exited before the brokers registered \(see .*node-1/stdout.log\)"):
        cluster.wait_registered(spec, 20.0)


def test_a_cluster_that_does_not_register_names_each_nodes_last_log_lines(tmp_path: Path) -> None:
    alive = subprocess.Popen(["sleep", "30"])
    try:
        (port,) = cluster.free_ports(1)
        node_dir = tmp_path / "node-1"
        node_dir.mkdir()
        (node_dir / "stdout.log").write_text("first\nsecond\nthird\nRegistration refused: no controller\n")
        spec = ClusterSpec(str(tmp_path), (NodeSpec(1, "broker", port, 0, str(node_dir), alive.pid),))
        with pytest.raises(WaitTimeout, match=r"brokers \[1\] registered; last lines: node 1: second \| third \| "
                                              r"Registration refused: no controller"):
            cluster.wait_registered(spec, 1.0)
    finally:
        alive.kill()
        alive.wait()
