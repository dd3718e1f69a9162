"""Network faults between the nodes of a namespaced cluster, as data: which packets to drop, how to shape a link.

A `NetFaults` is the whole network state the harness wants: `drops` maps a directed link to the percentage of its
packets lost (100: cut), `shapes` maps a node to what its outgoing traffic goes through (`Shape`: netem, tbf;
`incoming` puts its delay on what it receives too), and `ingress` to the rate of what it receives (tbf on the
root end of its veth: a slow link into one follower, which shaping the leader's egress cannot make). Faults add
up (`with_drops`, `with_shape`, `with_ingress`), `heal` is the empty state, and `chaos/netns.py` installs a
state. The partitions are Jepsen's: `isolate`, `leader_cut` (a leader from its followers, both still reaching the
controller: the classic ISR data-loss case), `bridge`, `majorities_ring`, `one_way`, and `lossy` (random loss on
every link of one node, made with nft so kernels without netem have it too). Clients in the root namespace are
never cut. Drops are made at the destination (nft's input hook), so the sender sees silence (a timeout), as with
a real partition, where dropping at the sender would hand it an immediate EPERM.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from insync.config import ConfigError

Link = tuple[int, int]  # (source node, destination node)
NFT_TABLE = "insync_chaos"
TBF_BURST_BYTES_MIN = 16 * 1024  # at least a few full packets, or tbf drops instead of queueing
TBF_LATENCY_MS = 1000  # how long a packet may queue behind the rate limit before tbf drops it


@dataclass(frozen=True, slots=True)
class Shape:
    """What one node's outgoing traffic goes through; 0 means none of it."""

    delay_ms: int = 0
    jitter_ms: int = 0
    loss_percent: float = 0.0
    rate_kbit: int = 0
    clients: bool = False  # the delay on the root namespace's clients too (netem on eth0 always delays them)
    incoming: bool = False  # the delay and loss on what its peers send it too: both ways of its link are slow

    def __post_init__(self) -> None:
        if min(self.delay_ms, self.jitter_ms, self.rate_kbit) < 0 or not 0 <= self.loss_percent <= 100:
            raise ConfigError(f"a link shape needs non-negative figures and a loss within 0..100, got {self}")
        if self.jitter_ms and not self.delay_ms:
            raise ConfigError("jitter needs a delay to vary around (--ms)")
        if self.clients and not self.needs_netem:
            raise ConfigError("--clients needs a delay or a loss to put on the clients' packets (--ms)")
        if self.incoming and not self.needs_netem:
            raise ConfigError("a slow way in needs a delay or a loss to put on the packets a node receives")

    @property
    def needs_netem(self) -> bool:
        return bool(self.delay_ms or self.loss_percent)


@dataclass(frozen=True, slots=True)
class NetFaults:
    drops: Mapping[Link, float] = field(default_factory=dict)
    shapes: Mapping[int, Shape] = field(default_factory=dict)
    ingress: Mapping[int, int] = field(default_factory=dict)  # node -> kbit/s of what it receives

    def with_drops(self, links: Mapping[Link, float]) -> NetFaults:
        merged = dict(self.drops)
        for link, percent in links.items():
            merged[link] = max(percent, merged.get(link, 0.0))
        return replace(self, drops=merged)

    def with_shape(self, node: int, shape: Shape) -> NetFaults:
        return replace(self, shapes={**self.shapes, node: shape})

    def with_ingress(self, node: int, rate_kbit: int) -> NetFaults:
        if rate_kbit <= 0:
            raise ConfigError(f"an ingress limit needs a rate above 0 kbit/s, got {rate_kbit}")
        return replace(self, ingress={**self.ingress, node: rate_kbit})

    def received(self, node: int) -> Shape:
        """What traffic into `node` goes through on the root end of its veth: its ingress rate, and with netem the
        delay and loss of an `incoming` shape (the nfqueue daemons hold those packets in its namespace instead)."""
        shape = self.shapes.get(node, Shape())
        rate_kbit = self.ingress.get(node, 0)
        if not shape.incoming:
            return Shape(rate_kbit=rate_kbit)
        return Shape(shape.delay_ms, shape.jitter_ms, shape.loss_percent, rate_kbit)

    def to_json(self) -> str:
        return json.dumps({"drops": [[s, d, p] for (s, d), p in sorted(self.drops.items())],
                           "shapes": {str(n): [s.delay_ms, s.jitter_ms, s.loss_percent, s.rate_kbit, s.clients,
                                               s.incoming] for n, s in sorted(self.shapes.items())},
                           "ingress": {str(n): kbit for n, kbit in sorted(self.ingress.items())}})

    @classmethod
    def from_json(cls, text: str) -> NetFaults:
        try:
            data = json.loads(text)
            drops = {(int(s), int(d)): float(p) for s, d, p in data["drops"]}
            shapes = {int(n): Shape(int(d), int(j), float(loss), int(r), *(bool(flag) for flag in flags[:2]))
                      for n, (d, j, loss, r, *flags) in dict(data["shapes"]).items()}  # older files lack flags
            ingress = {int(n): int(kbit) for n, kbit in dict(data.get("ingress", {})).items()}  # none before
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigError(f"not a network fault description: {exc}") from None
        return cls(drops, shapes, ingress)


def _both_ways(groups_a: Sequence[int], groups_b: Sequence[int]) -> dict[Link, float]:
    return {link: 100.0 for a in groups_a for b in groups_b if a != b for link in ((a, b), (b, a))}


def isolate(nodes: Sequence[int], victim: int) -> dict[Link, float]:
    _check_members(nodes, [victim])
    return _both_ways([victim], [n for n in nodes if n != victim])


def leader_cut(leader: int, followers: Sequence[int]) -> dict[Link, float]:
    if not followers:
        raise ConfigError(f"leader {leader} has no followers to cut it from")
    return _both_ways([leader], followers)


def bridge(nodes: Sequence[int]) -> dict[Link, float]:
    """Two halves cut from each other; the middle node (in id order) sees both."""
    if len(nodes) < 3:
        raise ConfigError(f"a bridge needs at least 3 nodes, the cluster has {len(nodes)}")
    ordered = sorted(nodes)
    middle = len(ordered) // 2
    return _both_ways(ordered[:middle], ordered[middle + 1:])


def majorities_ring(nodes: Sequence[int]) -> dict[Link, float]:
    """Nodes on a ring (id order), each seeing the neighbours within `reach`: a majority with itself, a
    different majority for each node. With 3 nodes every node sees every other, so nothing is cut."""
    if len(nodes) < 4:
        raise ConfigError(f"a majorities ring cuts something only from 4 nodes, the cluster has {len(nodes)}")
    ordered = sorted(nodes)
    count = len(ordered)
    reach = math.ceil((count // 2) / 2)
    cut: dict[Link, float] = {}
    for i, a in enumerate(ordered):
        for j, b in enumerate(ordered):
            if min((i - j) % count, (j - i) % count) > reach:
                cut[(a, b)] = 100.0
    return cut


def one_way(nodes: Sequence[int], source: int, destination: int, percent: float = 100.0) -> dict[Link, float]:
    _check_members(nodes, [source, destination])
    if source == destination or not 0 < percent <= 100:
        raise ConfigError(f"one-way loss needs two different nodes and a percentage in (0, 100], got "
                          f"{source} -> {destination} at {percent}%")
    return {(source, destination): percent}


def lossy(nodes: Sequence[int], node: int, percent: float) -> dict[Link, float]:
    _check_members(nodes, [node])
    if not 0 < percent < 100:
        raise ConfigError(f"loss needs a percentage in (0, 100) (all of a node's packets lost is isolate), got "
                          f"{percent}")
    return {link: percent for other in nodes if other != node for link in ((node, other), (other, node))}


def _check_members(nodes: Sequence[int], wanted: Sequence[int]) -> None:
    missing = sorted(set(wanted) - set(nodes))
    if missing:
        raise ConfigError(f"no node {', '.join(map(str, missing))} in the cluster (nodes: "
                          f"{', '.join(map(str, sorted(nodes)))})")


def nft_script(node: int, drops: Mapping[Link, float], addresses: Mapping[int, str]) -> str:
    """The nft commands that make `node`'s namespace drop what `drops` says arrives at it (replacing any
    earlier ones); an empty chain when nothing does. The table and its base chain stay (declared, and made
    only the first time) and only the rules change: deleting a base chain unregisters its hook, and the
    kernel then drops every packet the namespace's NFQUEUEs hold (the latency daemons', nfqueue_ctl.py)."""
    rules = []
    for (source, destination), percent in sorted(drops.items()):
        if destination != node:
            continue
        chance = "" if percent >= 100 else f"numgen random mod 10000 < {round(percent * 100)} "
        rules.append(f"add rule inet {NFT_TABLE} input ip saddr {addresses[source]} {chance}drop")
    chain = "\n".join(["  chain input {", "    type filter hook input priority 0; policy accept;", "  }"])
    return "\n".join([f"table inet {NFT_TABLE} {{", chain, "}", f"flush chain inet {NFT_TABLE} input", *rules, ""])


def tc_commands(shape: Shape, device: str = "eth0", netem: bool = True) -> list[list[str]]:
    """tc invocations giving `device` this shape: the root qdisc removed, then netem (delay, jitter, loss) at the
    root and tbf (rate) below it, or tbf alone (also when `netem` is False: delays are made elsewhere)."""
    commands = [["tc", "qdisc", "del", "dev", device, "root"]]
    parent = ["root"]
    if shape.needs_netem and netem:
        figures = ["delay", f"{shape.delay_ms}ms", *([f"{shape.jitter_ms}ms"] if shape.jitter_ms else [])]
        figures += ["loss", f"{shape.loss_percent}%"] if shape.loss_percent else []
        commands.append(["tc", "qdisc", "add", "dev", device, "root", "handle", "1:", "netem", *figures])
        parent = ["parent", "1:1"]
    if shape.rate_kbit:
        burst = max(TBF_BURST_BYTES_MIN, shape.rate_kbit * 1000 // 8 // 100)  # 10 ms of traffic at the rate
        commands.append(["tc", "qdisc", "add", "dev", device, *parent, "handle", "2:", "tbf", "rate",
                         f"{shape.rate_kbit}kbit", "burst", str(burst), "latency", f"{TBF_LATENCY_MS}ms"])
    return commands
