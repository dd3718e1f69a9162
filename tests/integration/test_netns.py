"""A cluster with each node in its own network namespace (`insync cluster up --netns`), and the network faults.

Clients in the root namespace reach every broker; each partition drops exactly the links it names (probed by
TCP connections from inside each namespace); cutting a leader from its followers shrinks the ISR to the leader
without losing an acknowledged write, and healing brings the followers back; tbf (and netem, where the kernel
has it) shape a node's link; `cluster down` leaves no namespace, veth or bridge behind.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FAST, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, history, netns, network, script
from insync.config import ConfigError

pytestmark = pytest.mark.timeout(240)

REASON = netns.unavailable()
if REASON is not None:
    pytest.skip(f"needs network namespaces: {REASON}", allow_module_level=True)

PROBE = """
import socket, sys, json
result = {}
for target in json.loads(sys.argv[1]):
    try:
        socket.create_connection((target[1], target[2]), timeout=0.7).close()
        result[target[0]] = True
    except OSError:
        result[target[0]] = False
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    directory = tmp_path_factory.mktemp("netns")
    started = cluster.up(str(directory), 3, 0, FAST, namespaces=True)
    try:
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(directory), 10.0)


def reachable(spec: cluster.ClusterSpec) -> set[tuple[int, int]]:
    """Every (from, to) pair of nodes where a TCP connection from `from`'s namespace to `to`'s listener works."""
    assert spec.network is not None
    probes = {}
    for node in spec.nodes:
        targets = [[n.node_id, n.host, n.port] for n in spec.nodes if n.node_id != node.node_id]
        probes[node.node_id] = subprocess.Popen([*netns.exec_prefix(spec.network, node.node_id), sys.executable,
                                                 "-c", PROBE, json.dumps(targets)], stdout=subprocess.PIPE, text=True)
    pairs = set()
    for source, process in probes.items():
        out, _ = process.communicate(timeout=30)
        pairs |= {(source, int(target)) for target, ok in json.loads(out).items() if ok}
    return pairs


def all_pairs(spec: cluster.ClusterSpec) -> set[tuple[int, int]]:
    return {(a.node_id, b.node_id) for a in spec.nodes for b in spec.nodes if a.node_id != b.node_id}


def test_clients_in_the_root_namespace_reach_every_broker(spec: cluster.ClusterSpec) -> None:
    assert spec.network is not None
    assert all(ipaddress.ip_address(n.host) in netns.SUPERNET for n in spec.nodes)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert all(spec.network.namespace(n.node_id) in listed for n in spec.nodes)
    ensure_topic(spec.bootstrap, "reach", 3, 3, {"min.insync.replicas": "2"})
    workload = history.ProduceWorkload(spec.bootstrap, "reach", rate=200, run_id="reach")
    workload.start()
    time.sleep(1)
    verdict = history.verdict(workload.stop(), history.read_back(spec.bootstrap, "reach", "reach"))
    assert verdict.acked > 0 and verdict.ok, verdict
    assert reachable(spec) == all_pairs(spec)


def drop_rules(spec: cluster.ClusterSpec, node: int) -> int:
    assert spec.network is not None
    return subprocess.run([*netns.exec_prefix(spec.network, node), "nft", "list", "ruleset"],
                          capture_output=True, text=True, check=True).stdout.count(" drop")


@pytest.mark.parametrize("step", [
    script.Step(0, "isolate", 2), script.Step(0, "bridge", None), script.Step(0, "ring", None),
    script.Step(0, "one-way", 1, peer=2),
], ids=lambda s: s.action)
def test_each_partition_cuts_exactly_its_links(spec: cluster.ClusterSpec, step: script.Step) -> None:
    """A TCP connection needs both directions, so a link dropped one way stops connections either way; that it
    is one way shows in where the rules are: only at the destination."""
    cut = set(network.cut_links(spec, step.action, step.broker, step.peer))
    try:
        script.apply(spec, step)
        assert reachable(spec) == all_pairs(spec) - cut - {(b, a) for a, b in cut}
        if step.action == "one-way":
            assert (drop_rules(spec, 1), drop_rules(spec, 2)) == (0, 1)
    finally:
        network.heal(spec)
    assert reachable(spec) == all_pairs(spec)
    assert all(drop_rules(spec, n.node_id) == 0 for n in spec.nodes)


def test_loss_drops_a_share_on_every_link_of_a_node(spec: cluster.ClusterSpec) -> None:
    try:
        out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "loss", "3", "--percent", "30",
                              "--dir", spec.directory], capture_output=True, text=True, timeout=60, check=True).stdout
        assert "loss: done; 6 links dropping packets" in out, out
        assert [drop_rules(spec, n) for n in (0, 1, 2, 3)] == [1, 1, 1, 3]
    finally:
        network.heal(spec)


def test_a_script_with_network_steps_heals_at_its_end(spec: cluster.ClusterSpec) -> None:
    plan = script.Script(topic="scripted", partitions=1, rate=100, duration_s=4,
                         steps=(script.Step(1, "isolate", 2), script.Step(2, "bandwidth", 3, kbit=8000)))
    verdict = script.run_script(spec, plan, log=lambda _line: None)
    assert verdict.acked > 0 and verdict.ok, verdict
    assert network.current(spec).drops == {} and all(drop_rules(spec, n.node_id) == 0 for n in spec.nodes)
    assert "tbf" not in qdiscs(spec, 3)


def test_leader_cut_from_its_followers_shrinks_the_isr_and_loses_nothing(spec: cluster.ClusterSpec) -> None:
    topic = "cut"
    # The script before isolated broker 2: on a loaded machine it may still be fenced (and so not a place for a
    # replica, as in Kafka) when this test starts.
    cluster.wait_registered(spec, 60.0)
    ensure_topic(spec.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    workload = history.ProduceWorkload(spec.bootstrap, topic, rate=200, run_id="cut")
    workload.start()
    try:
        time.sleep(1)
        leader = describe_rows(spec.bootstrap, [topic])[0].leader
        out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "leader-cut", topic, "0", "--dir",
                              spec.directory], capture_output=True, text=True, timeout=60, check=True).stdout
        assert "leader-cut: done; 4 links dropping packets" in out, out
        # The followers cannot fetch, the leader still reaches the controller: it shrinks the ISR to itself.
        wait_until(lambda: describe_rows(spec.bootstrap, [topic])[0].isr == (leader,), 30,
                   f"the ISR shrunk to the leader {leader}")
        network.heal(spec)
        # A fetch whose answer the cut dropped is retried by TCP (its back-off grows with the cut) or given up at
        # replica.socket.timeout.ms (30 s, Kafka's default); catching up and the ISR change come after that.
        wait_until(lambda: len(describe_rows(spec.bootstrap, [topic])[0].isr) == 3, 60, "the followers back")
        time.sleep(1)
    finally:
        network.heal(spec)
        produced = workload.stop()
    verdict = history.verdict(produced, history.read_back(spec.bootstrap, topic, "cut"))
    assert verdict.acked > 0, verdict
    assert (verdict.lost, verdict.duplicated, verdict.reordered) == (0, 0, 0), verdict


def qdiscs(spec: cluster.ClusterSpec, node: int) -> str:
    assert spec.network is not None
    return subprocess.run([*netns.exec_prefix(spec.network, node), "tc", "qdisc", "show", "dev", "eth0"],
                          capture_output=True, text=True, check=True).stdout


def test_bandwidth_and_latency_shape_one_node_and_heal_removes_them(spec: cluster.ClusterSpec) -> None:
    try:
        script.apply(spec, script.Step(0, "bandwidth", 3, kbit=20000))
        assert "tbf 2:" in qdiscs(spec, 3) and "rate 20Mbit" in qdiscs(spec, 3)
        script.apply(spec, script.Step(0, "latency", 3, ms=20, jitter_ms=5))
        assert spec.network is not None
        if netns.check_supported(spec.network, network.current(spec)):
            assert "netem 1:" in qdiscs(spec, 3) and "tbf 2:" in qdiscs(spec, 3)
        else:  # no netem in this kernel: the tbf alone, the delay made in user space (test_nfqueue_latency.py)
            assert "tbf 2:" in qdiscs(spec, 3) and "netem" not in qdiscs(spec, 3)
        assert reachable(spec) == all_pairs(spec)
    finally:
        network.heal(spec)
    assert "tbf" not in qdiscs(spec, 3) and "netem" not in qdiscs(spec, 3)


def test_down_leaves_no_namespace_veth_or_bridge(tmp_path: Path) -> None:
    small = cluster.up(str(tmp_path), 1, 0, FAST, namespaces=True)
    assert small.network is not None
    mine = f"{netns.PREFIX}{small.network.run}"
    cluster.down(small, 10.0)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert mine not in listed and mine not in links


def test_a_failed_up_leaves_no_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[netns.Network] = []
    create = netns.create
    monkeypatch.setattr(netns, "create", lambda ids: made.append(create(ids)) or made[-1])
    with pytest.raises(ConfigError, match="no.such.setting"):
        cluster.up(str(tmp_path), 1, 0, ["no.such.setting=1"], namespaces=True)
    assert len(made) == 1
    mine = f"{netns.PREFIX}{made[0].run}"
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert mine not in listed and mine not in links
