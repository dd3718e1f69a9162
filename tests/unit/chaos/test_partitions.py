"""Jepsen's partitions as directed links to drop, the nft and tc they become, and the script steps naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.chaos import cluster, nemesis, network, partitions, script
from insync.chaos.partitions import NetFaults, Shape
from insync.config import ConfigError

NODES = [0, 1, 2, 3]


def cut_pairs(links: dict[tuple[int, int], float]) -> set[frozenset[int]]:
    assert all(((b, a) in links) for a, b in links), "partitions are symmetric"
    return {frozenset(link) for link in links}


def test_isolate_cuts_one_node_from_all_others() -> None:
    assert cut_pairs(partitions.isolate(NODES, 2)) == {frozenset({2, n}) for n in (0, 1, 3)}


def test_leader_cut_keeps_the_controller() -> None:
    assert cut_pairs(partitions.leader_cut(1, [2, 3])) == {frozenset({1, 2}), frozenset({1, 3})}


def test_bridge_leaves_the_middle_node_seeing_both_halves() -> None:
    assert cut_pairs(partitions.bridge([0, 1, 2, 3, 4])) == {frozenset({a, b}) for a in (0, 1) for b in (3, 4)}


@pytest.mark.parametrize("count", [4, 5, 6, 7])
def test_majorities_ring_gives_each_node_a_different_majority(count: int) -> None:
    nodes = list(range(count))
    links = partitions.majorities_ring(nodes)
    seen = {a: frozenset(b for b in nodes if (a, b) not in links) for a in nodes}
    assert all(len(view) > count // 2 for view in seen.values())
    assert len(set(seen.values())) == count
    assert links  # something is cut


def test_one_way_drops_one_direction_only() -> None:
    assert partitions.one_way(NODES, 1, 2, 30) == {(1, 2): 30}


@pytest.mark.parametrize(("make", "message"), [
    (lambda: partitions.isolate(NODES, 9), "no node 9 in the cluster"),
    (lambda: partitions.leader_cut(1, []), "leader 1 has no followers"),
    (lambda: partitions.bridge([1, 2]), "a bridge needs at least 3 nodes"),
    (lambda: partitions.majorities_ring([0, 1, 2]), "only from 4 nodes"),
    (lambda: partitions.one_way(NODES, 1, 1), "two different nodes"),
    (lambda: partitions.one_way(NODES, 1, 2, 0), r"percentage in \(0, 100\]"),
    (lambda: Shape(jitter_ms=5), "jitter needs a delay"),
    (lambda: Shape(loss_percent=101), "loss within 0..100"),
    (lambda: NetFaults.from_json("{}"), "not a network fault description"),
    (lambda: NetFaults().with_ingress(2, 0), "an ingress limit needs a rate above 0 kbit/s, got 0"),
    (lambda: Shape(rate_kbit=800, incoming=True), "a slow way in needs a delay or a loss"),
])
def test_bad_partitions_are_named(make: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()  # type: ignore[operator]


def test_faults_add_up_and_survive_json() -> None:
    faults = NetFaults().with_drops({(1, 2): 30}).with_drops({(1, 2): 100, (2, 1): 100})
    faults = faults.with_shape(3, Shape(delay_ms=50, jitter_ms=10, rate_kbit=800))
    assert faults.drops == {(1, 2): 100, (2, 1): 100}
    assert NetFaults.from_json(faults.to_json()) == faults
    limited = faults.with_ingress(2, 400)
    assert limited.ingress == {2: 400} and NetFaults.from_json(limited.to_json()) == limited
    # A state written before ingress limits existed reads as none.
    assert NetFaults.from_json('{"drops": [], "shapes": {}}') == NetFaults()


def test_nft_drops_at_the_destination() -> None:
    addresses = {1: "198.18.0.11", 2: "198.18.0.12", 3: "198.18.0.13"}
    text = partitions.nft_script(2, {(1, 2): 100, (3, 2): 25, (2, 1): 100}, addresses)
    assert "ip saddr 198.18.0.11 drop" in text
    assert "ip saddr 198.18.0.13 numgen random mod 10000 < 2500 drop" in text
    assert "198.18.0.12" not in text  # what node 2 sends is dropped where it arrives, not here
    assert "drop" not in partitions.nft_script(3, {}, addresses)


def test_shapes_round_trip_through_json_with_and_without_clients() -> None:
    faults = NetFaults(shapes={2: Shape(50, 10, 1.0, 800, clients=True), 3: Shape(rate_kbit=100),
                               4: Shape(10, 3, incoming=True)})
    assert NetFaults.from_json(faults.to_json()) == faults
    before = '{"drops": [], "shapes": {"2": [50, 10, 0.0, 0]}}'  # written before shapes had `clients`
    assert NetFaults.from_json(before).shapes == {2: Shape(50, 10)}
    clients_only = '{"drops": [], "shapes": {"2": [50, 10, 0.0, 0, true]}}'  # and before they had `incoming`
    assert NetFaults.from_json(clients_only).shapes == {2: Shape(50, 10, clients=True)}


def test_what_a_node_receives_goes_through_its_ingress_rate_and_an_incoming_delay() -> None:
    faults = NetFaults(shapes={2: Shape(10, 3, rate_kbit=800, incoming=True), 3: Shape(50)}).with_ingress(2, 3600)
    assert faults.received(2) == Shape(10, 3, rate_kbit=3600)  # its own egress rate stays on its eth0
    assert faults.received(3) == Shape()  # an outgoing delay only
    assert faults.received(1) == Shape()
    commands = partitions.tc_commands(faults.received(2), device="isyh2")
    assert [c[5:9] for c in commands[1:]] == [["root", "handle", "1:", "netem"], ["parent", "1:1", "handle", "2:"]]
    assert [c[5] for c in partitions.tc_commands(faults.received(2), device="isyh2", netem=False)[1:]] == ["root"]


def test_tc_puts_tbf_under_netem() -> None:
    assert partitions.tc_commands(Shape()) == [["tc", "qdisc", "del", "dev", "eth0", "root"]]
    both = partitions.tc_commands(Shape(delay_ms=50, jitter_ms=10, loss_percent=1, rate_kbit=8000))
    assert both[1][5:] == ["root", "handle", "1:", "netem", "delay", "50ms", "10ms", "loss", "1%"]
    assert both[2][5:9] == ["parent", "1:1", "handle", "2:"] and "8000kbit" in both[2]
    assert partitions.tc_commands(Shape(rate_kbit=100))[1][5] == "root"


def test_network_steps_parse_with_and_without_a_node() -> None:
    assert script.parse_step({"at_s": 1, "action": "ring"}, 0) == script.Step(1.0, "ring", None)
    step = script.parse_step({"at_s": 2, "action": "one-way", "broker": 1, "peer": 2, "percent": 50}, 0)
    assert (step.broker, step.peer, step.percent) == (1, 2, 50.0)
    with pytest.raises(ConfigError, match=r"step 1 \(bandwidth\) needs kbit"):
        script.parse_step({"at_s": 1, "action": "bandwidth", "broker": 1}, 0)
    with pytest.raises(ConfigError, match=r"step 1 \(isolate\) needs broker"):
        script.parse_step({"at_s": 1, "action": "isolate"}, 0)
    latency = {"at_s": 1, "action": "latency", "broker": 2, "ms": 50, "clients": True}
    assert script.parse_step(latency, 0).clients
    with pytest.raises(ConfigError, match="clients must be true or false, got 'yes'"):
        script.parse_step({**latency, "clients": "yes"}, 0)


def test_network_faults_need_a_namespaced_cluster(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, 3, 0)
    with pytest.raises(ConfigError, match="not started with --netns"):
        script.apply(spec, script.Step(0, "isolate", 1))
    with pytest.raises(ConfigError, match="partition must be one of"):
        network.cut_links(spec, "halves")


def test_network_kinds_are_opt_in() -> None:
    assert not set(nemesis.parse_kinds("all")) & set(nemesis.OPT_IN_KINDS)
    assert nemesis.parse_kinds("leader-cut,kill") == ("leader-cut", "kill")
    assert {k for k, v in nemesis.REGISTRY.items() if v.needs_netns} == set(nemesis.OPT_IN_KINDS)


def test_loss_is_random_drops_on_every_link_of_a_node_both_ways() -> None:
    assert partitions.lossy([1, 2, 3], 2, 20) == {(2, 1): 20, (1, 2): 20, (2, 3): 20, (3, 2): 20}
    with pytest.raises(ConfigError, match=r"loss needs a percentage in \(0, 100\)"):
        partitions.lossy([1, 2, 3], 2, 100)
    step = script.parse_step({"at_s": 0, "action": "loss", "broker": 2, "percent": 20}, 0)
    assert (step.broker, step.percent) == (2, 20.0)
    with pytest.raises(ConfigError, match=r"\(loss\) needs percent"):
        script.parse_step({"at_s": 0, "action": "loss", "broker": 2}, 0)
