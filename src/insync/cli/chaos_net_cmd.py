"""`insync chaos isolate|leader-cut|bridge|ring|one-way|latency|bandwidth|heal`: network faults against a cluster
started with `insync cluster up --netns` (see chaos/network.py)."""

from __future__ import annotations

import argparse
from typing import Any

from insync.chaos import cluster, network, script

HELPS = {
    "isolate": "cut one node (a broker, or controller 0) from every other node; clients still reach it",
    "leader-cut": "cut a partition's leader from its followers, both still reaching the controller",
    "bridge": "two halves cut from each other, the middle node (in id order) seeing both",
    "ring": "majorities ring: each node sees a majority, no two nodes the same one (4 nodes or more)",
    "one-way": "lose --percent (default all) of the packets from one node to another, none the other way",
    "loss": "lose --percent of the packets on every link of a node, both ways (nft: no netem needed)",
    "latency": "delay a node's outgoing packets --ms (± --jitter-ms; --percent lost): tc netem, or where the "
               "kernel has none a daemon per peer (iptables NFQUEUE; the clients too with --clients)",
    "bandwidth": "limit a node's outgoing traffic to --kbit: tc tbf",
    "heal": "remove every network fault",
}


def register(commands: Any) -> None:
    for action in script.NETWORK_ACTIONS:
        sub = commands.add_parser(action, help=HELPS[action])
        if action in ("isolate", "loss", "latency", "bandwidth"):
            sub.add_argument("broker", type=int, metavar="NODE")
        if action == "one-way":
            sub.add_argument("broker", type=int, metavar="FROM")
            sub.add_argument("peer", type=int, metavar="TO")
        if action == "leader-cut":
            sub.add_argument("topic")
            sub.add_argument("partition", type=int)
        if action in ("one-way", "latency", "loss"):
            sub.add_argument("--percent", type=float, required=action == "loss", help="packets lost, 0..100")
        if action == "latency":
            sub.add_argument("--ms", type=int, required=True)
            sub.add_argument("--jitter-ms", type=int)
            sub.add_argument("--clients", action="store_true", default=None,
                             help="delay the clients in the root namespace too (netem always does)")
        if action == "bandwidth":
            sub.add_argument("--kbit", type=int, required=True)
        sub.add_argument("--dir", required=True, help="cluster directory (started with --netns)")
        sub.set_defaults(func=_network, action=action)


def _network(args: argparse.Namespace) -> int:
    fields = ("broker", "peer", "topic", "partition", "percent", "ms", "jitter_ms", "kbit", "clients")
    step = script.parse_step({"at_s": 0, "action": args.action,
                              **{k: getattr(args, k) for k in fields if getattr(args, k, None) is not None}}, 0)
    spec = cluster.ClusterSpec.load(args.dir)
    script.apply(spec, step)
    faults = network.current(spec)
    print(f"{args.action}: done; {len(faults.drops)} links dropping packets, {len(faults.shapes)} nodes shaped")
    return 0
