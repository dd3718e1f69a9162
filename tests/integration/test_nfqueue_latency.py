"""Latency and jitter without netem: the nfqueue daemons (chaos/nfqueue.py) between real network namespaces.

TCP round trips between two namespaces with and without 50 ms +/- 10 ms on one node's packets: every delayed
round trip takes at least the delay less the jitter, the spread shows the jitter, and healing removes the
delay, the daemons and the rules. Then a campaign run whose only faults are `latency` on a namespaced cluster:
acks=all with min ISR 2 loses nothing. Figures are printed (`-s`), not asserted beyond what the schedule
guarantees (a packet is never let go before its due time); on a kernel with netem the same faults go through
netem and only the delay's lower bound is checked.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos import campaign, netns, nfqueue_ctl
from insync.chaos.partitions import NetFaults, Shape

pytestmark = pytest.mark.timeout(240)

REASON = netns.unavailable() or nfqueue_ctl.unavailable()
if REASON is not None:
    pytest.skip(f"needs network namespaces and iptables-legacy: {REASON}", allow_module_level=True)

DELAY_MS, JITTER_MS = 50, 10
ROUND_TRIPS = 30
PORT = 7791

ECHO = f"""
import socket
server = socket.create_server(("0.0.0.0", {PORT}))
print("listening", flush=True)
connection, _ = server.accept()
while data := connection.recv(64):
    connection.sendall(data)
"""

PING = f"""
import json, socket, sys, time
connection = socket.create_connection((sys.argv[1], {PORT}), timeout=10)
connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range({ROUND_TRIPS}):
    start = time.monotonic()
    connection.sendall(b"x")
    assert connection.recv(64) == b"x"
    rtts.append((time.monotonic() - start) * 1000)
print(json.dumps(rtts))
"""


@pytest.fixture()
def two_nodes() -> Iterator[netns.Network]:
    network = netns.create([1, 2])
    try:
        yield network
    finally:
        netns.destroy(network)


def round_trips_ms(network: netns.Network, from_clients: bool = False) -> list[float]:
    """`ROUND_TRIPS` one-byte TCP exchanges from node 1's namespace (or the root namespace's, where clients are)
    to an echo server in node 2's."""
    echo = subprocess.Popen([*netns.exec_prefix(network, 2), sys.executable, "-c", ECHO], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert echo.stdout is not None and echo.stdout.readline() == "listening\n"
        client = [] if from_clients else netns.exec_prefix(network, 1)
        out = subprocess.run([*client, sys.executable, "-c", PING, network.addresses[2]],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return [float(x) for x in json.loads(out)]
    finally:
        echo.kill()
        echo.wait(timeout=10)


def daemons(network: netns.Network) -> dict[int, tuple[str, ...]]:
    pids = [int(p) for n in network.addresses for p in subprocess.run(
        ["ip", "netns", "pids", network.namespace(n)], capture_output=True, text=True, check=True).stdout.split()]
    return nfqueue_ctl.running(pids)


def summary(rtts: list[float]) -> str:
    return f"median {statistics.median(rtts):.1f} ms, min {min(rtts):.1f}, max {max(rtts):.1f}"


def test_latency_and_jitter_delay_round_trips_and_heal_removes_them(two_nodes: netns.Network,
                                                                    tmp_path: Path) -> None:
    before = round_trips_ms(two_nodes)
    netns.install(two_nodes, NetFaults(shapes={2: Shape(DELAY_MS, JITTER_MS)}), str(tmp_path))
    user_space = not netns.check_supported(two_nodes, NetFaults(shapes={2: Shape(DELAY_MS, JITTER_MS)}))
    if user_space:  # node 2's packets are held where they arrive: one daemon, in node 1's namespace
        assert list(daemons(two_nodes).values()) == [nfqueue_ctl.daemon_args(2, Shape(DELAY_MS, JITTER_MS))]
    delayed = round_trips_ms(two_nodes)
    netns.install(two_nodes, NetFaults(), str(tmp_path))
    after = round_trips_ms(two_nodes)
    print(f"\nround trips without: {summary(before)}; with {DELAY_MS} +/- {JITTER_MS} ms: {summary(delayed)}; "
          f"healed: {summary(after)}")
    assert min(delayed) >= DELAY_MS - JITTER_MS  # never let go before its due time
    assert statistics.median(delayed) - statistics.median(before) >= DELAY_MS - JITTER_MS
    assert max(delayed) - min(delayed) > JITTER_MS / 2  # the jitter is there (load only widens it)
    assert min(after) < DELAY_MS - JITTER_MS and daemons(two_nodes) == {}
    rules = subprocess.run([*netns.exec_prefix(two_nodes, 1), "iptables-legacy", "-S", "INPUT"],
                           capture_output=True, text=True, check=True).stdout
    assert "NFQUEUE" not in rules
    if user_space:
        log = (tmp_path / "nfqueue-2-to-1.log").read_text()
        assert int(log.split(" packets held")[0].split()[-1]) >= ROUND_TRIPS, log  # its last words, stopping


def test_a_killed_daemon_lets_packets_through_and_a_stopped_one_is_healed(two_nodes: netns.Network,
                                                                         tmp_path: Path) -> None:
    faults = NetFaults(shapes={2: Shape(DELAY_MS)})
    if netns.check_supported(two_nodes, faults):
        pytest.skip("this kernel has netem: no daemon to kill")
    netns.install(two_nodes, faults, str(tmp_path))
    (killed,) = daemons(two_nodes)
    os.kill(killed, signal.SIGKILL)
    assert min(round_trips_ms(two_nodes)) < DELAY_MS  # no daemon bound to the queue: --queue-bypass
    netns.install(two_nodes, faults, str(tmp_path))  # the missing daemon started again
    (stopped,) = daemons(two_nodes)
    assert stopped != killed
    os.kill(stopped, signal.SIGSTOP)  # stuck: what it holds stays held, until the heal below
    netns.install(two_nodes, NetFaults(), str(tmp_path))
    assert daemons(two_nodes) == {} and min(round_trips_ms(two_nodes)) < DELAY_MS
    assert "packets held" in (tmp_path / "nfqueue-2-to-1.log").read_text()  # woken, it stopped in good order


def test_clients_are_delayed_only_when_asked(two_nodes: netns.Network, tmp_path: Path) -> None:
    netns.install(two_nodes, NetFaults(shapes={2: Shape(DELAY_MS)}), str(tmp_path))
    assert min(round_trips_ms(two_nodes, from_clients=True)) < DELAY_MS or \
        netns.check_supported(two_nodes, NetFaults(shapes={2: Shape(DELAY_MS)}))  # netem delays clients anyway
    netns.install(two_nodes, NetFaults(shapes={2: Shape(DELAY_MS, clients=True)}), str(tmp_path))
    clients, peers = round_trips_ms(two_nodes, from_clients=True), round_trips_ms(two_nodes)
    print(f"\nround trips with {DELAY_MS} ms and --clients: from a client {summary(clients)}; from a peer "
          f"{summary(peers)}")
    assert min(clients) >= DELAY_MS and min(peers) >= DELAY_MS
    netns.install(two_nodes, NetFaults(), str(tmp_path))
    assert min(round_trips_ms(two_nodes, from_clients=True)) < DELAY_MS and daemons(two_nodes) == {}


def test_destroying_the_namespaces_stops_the_daemons(tmp_path: Path) -> None:
    network = netns.create([1, 2, 3])
    try:
        netns.install(network, NetFaults(shapes={3: Shape(20, loss_percent=1.0)}), str(tmp_path))
        running = daemons(network)
        assert netns.check_supported(network, NetFaults(shapes={3: Shape(20)})) or len(running) == 2
    finally:
        netns.destroy(network)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"{netns.PREFIX}{network.run}" not in listed
    assert nfqueue_ctl.running(running) == {}  # the daemons were stopped, not left holding the namespaces


@pytest.mark.slow
def test_a_campaign_under_latency_loses_no_acknowledged_write(tmp_path: Path) -> None:
    seed, duration_s = 1, 18.0
    plan = campaign.plan_run(0, seed, duration_s, ("latency",))
    assert len(plan.faults) >= 2
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--runs", "1", "--seed",
                          str(seed), "--duration", str(duration_s), "--faults", "latency", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    data = json.loads((tmp_path / "run-0" / "results.json").read_text())
    assert data["ok"] and data["forbidden"] == 0, data["examples"][:5]
    assert data["complete_partitions"] == [0, 1, 2] and data["sends"]["ok"] > 300
    assert [f["fault"].split()[0] for f in data["faults"]] == ["latency"] * len(plan.faults)
    logs = list((tmp_path / "run-0" / "cluster").glob("nfqueue-*.log"))
    assert all("packets held" in log.read_text() for log in logs)  # each daemon stopped, and said so
    probe = netns.create([1])
    try:
        assert logs or netns.check_supported(probe, NetFaults(shapes={1: Shape(DELAY_MS)})), "no daemon, no netem"
    finally:
        netns.destroy(probe)
