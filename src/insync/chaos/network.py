"""Network faults against a cluster started with `--netns`: partitions, one-way loss, latency and bandwidth.

Each fault adds to the `NetFaults` kept in `DIR/network-faults.json` and the whole state is installed again
(`netns.install`), so faults combine (a partition on top of a slow link) and `heal` undoes them all at once.
`insync chaos run` heals at the end of a script, and `insync cluster down` deletes the namespaces themselves.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from insync.admin import describe_rows
from insync.chaos import cluster, netns, partitions
from insync.chaos.partitions import Link, NetFaults, Shape
from insync.config import ConfigError

PARTITIONS = ("isolate", "leader-cut", "bridge", "ring", "one-way", "loss")


def network_of(spec: cluster.ClusterSpec) -> netns.Network:
    if spec.network is None:
        raise ConfigError(f"the cluster at {spec.directory} was not started with --netns: network faults need "
                          "each node in its own namespace (insync cluster up --netns)")
    return spec.network


def current(spec: cluster.ClusterSpec) -> NetFaults:
    path = Path(spec.directory) / netns.FAULTS_FILE
    return NetFaults.from_json(path.read_text()) if path.exists() else NetFaults()


def install(spec: cluster.ClusterSpec, faults: NetFaults) -> NetFaults:
    """Put `faults` in place and record them (recorded first: a half-made install is still healed later)."""
    network = network_of(spec)
    netns.check_supported(network, faults)
    path = Path(spec.directory) / netns.FAULTS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(faults.to_json())
    tmp.replace(path)
    netns.install(network, faults, spec.directory)
    return faults


def heal(spec: cluster.ClusterSpec) -> NetFaults:
    return install(spec, NetFaults())


def cut_links(spec: cluster.ClusterSpec, kind: str, node: int | None = None, peer: int | None = None,
              percent: float = 100.0, topic: str | None = None, partition: int | None = None) -> dict[Link, float]:
    """The links partition `kind` drops (see partitions.py); `node`, `peer`, `topic`, `partition` as it needs."""
    nodes = [n.node_id for n in spec.nodes]
    if kind == "isolate":
        return partitions.isolate(nodes, _needs(node, kind, "a node"))
    if kind == "leader-cut":
        if topic is None or partition is None:
            raise ConfigError("leader-cut needs a topic and a partition")
        leader, followers = leader_and_followers(spec, topic, partition)
        return partitions.leader_cut(leader, followers)
    if kind == "bridge":
        return partitions.bridge(nodes)
    if kind == "ring":
        return partitions.majorities_ring(nodes)
    if kind == "one-way":
        return partitions.one_way(nodes, _needs(node, kind, "a source node"), _needs(peer, kind, "a peer"),
                                  percent)
    if kind == "loss":
        return partitions.lossy(nodes, _needs(node, kind, "a node"), percent)
    raise ConfigError(f"partition must be one of {', '.join(PARTITIONS)}, got {kind!r}")


def _needs(value: int | None, kind: str, what: str) -> int:
    if value is None:
        raise ConfigError(f"{kind} needs {what}")
    return value


def partition(spec: cluster.ClusterSpec, kind: str, node: int | None = None, peer: int | None = None,
              percent: float = 100.0, topic: str | None = None, partition: int | None = None) -> NetFaults:
    links = cut_links(spec, kind, node, peer, percent, topic, partition)
    return install(spec, current(spec).with_drops(links))


def shape(spec: cluster.ClusterSpec, node: int, **changes: Any) -> NetFaults:
    """Change what node `node`'s outgoing traffic goes through (Shape's fields; the others stay as they were)."""
    spec.node(node)  # an unknown node is named before anything changes
    faults = current(spec)
    return install(spec, faults.with_shape(node, replace(faults.shapes.get(node, Shape()), **changes)))


def leader_and_followers(spec: cluster.ClusterSpec, topic: str, partition: int) -> tuple[int, list[int]]:
    rows = [r for r in describe_rows(spec.bootstrap, [topic]) if r.partition == partition]
    if not rows or rows[0].leader < 0:
        raise ConfigError(f"{topic}-{partition} has no leader to cut from its followers")
    return rows[0].leader, [r for r in rows[0].replicas if r != rows[0].leader]
