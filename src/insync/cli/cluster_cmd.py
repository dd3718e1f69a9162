"""`insync cluster up|status|down`: a local cluster of real processes on 127.0.0.1, or each in a network
namespace with --netns (see chaos/cluster.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from insync.admin import describe_rows
from insync.chaos import cluster, kafka_cluster, kafka_dist, secure


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("cluster", help="start, inspect and stop a local cluster")
    commands = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    commands.required = True

    up = commands.add_parser("up", help="start a controller and N brokers")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--dir", required=True, help="cluster directory (configs, logs, data)")
    up.add_argument("--port", type=int, default=9092, help="first broker port; 0 picks free ports")
    up.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="for every node")
    up.add_argument("--controllers", type=int, default=1,
                    help="controllers; more than one needs metadata.store=zookeeper (one active, the others standby)")
    up.add_argument("--netns", action="store_true",
                    help="each node in its own network namespace on a bridge, for network partitions (needs root, "
                         "iproute2 and nftables)")
    up.add_argument("--security", choices=secure.SECURITY_CHOICES, default="plaintext",
                    help="ssl: TLS with client certificates on every listener; sasl_ssl, sasl_plaintext: SASL "
                         "(PLAIN users node and admin) over TLS or not; certificates in DIR/certs, the operator's "
                         "client settings in DIR/client.properties")
    up.add_argument("--engine", default=kafka_cluster.ENGINE_INSYNC, metavar="insync|kafka[:VERSION]",
                    help="kafka runs real Apache Kafka instead (assembled from Maven Central into ~/.cache/insync "
                         f"once): kafka = {kafka_dist.VERSION_ALIASES['']}, kafka:4 = the newest 4.x, kafka:3.9 with "
                         "ZooKeeper, or kafka:X.Y.Z")
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="processes, brokers and partition health")
    status.add_argument("--dir", required=True)
    status.set_defaults(func=_status)

    down = commands.add_parser("down", help="stop every node: SIGTERM, then SIGKILL after a deadline")
    down.add_argument("--dir", required=True)
    down.add_argument("--deadline-s", type=float, default=cluster.STOP_DEADLINE_S)
    down.set_defaults(func=_down)


def _up(args: argparse.Namespace) -> int:
    spec = cluster.up(args.dir, args.brokers, args.port, args.config, args.controllers, args.netns, args.security,
                      args.engine)
    first = "zookeeper" if spec.controller.roles == kafka_cluster.ZOOKEEPER_ROLE else "controller"
    print(f"cluster up: {first} {spec.controller.address}, {len(spec.brokers)} brokers")
    if spec.engine != kafka_cluster.ENGINE_INSYNC:
        for line in kafka_cluster.settings_lines(kafka_cluster.dist_for(spec.engine)):
            print(line)
    print(f"bootstrap servers: {spec.bootstrap}")
    if spec.security != "plaintext":
        print(f"client settings ({spec.security}): {Path(spec.directory) / secure.CLIENT_PROPERTIES} "
              "(confluent-kafka, kcat -F, insync --command-config)")
    return 0


def _down(args: argparse.Namespace) -> int:
    spec = cluster.down(cluster.ClusterSpec.load(args.dir), args.deadline_s)
    print(f"cluster down: {len(spec.nodes)} nodes stopped")
    return 0


def _status(args: argparse.Namespace) -> int:
    spec = cluster.ClusterSpec.load(args.dir)
    print(f"{'node':>4}  {'role':<10}  {'address':<21}  {'pid':>7}  state")
    for node in spec.nodes:
        running = node.pid is not None and cluster.pid_alive(node.pid)
        state = "running" if running else "stopped"
        if running and len(spec.controllers) > 1 and node.roles == "controller" and \
                spec.engine == kafka_cluster.ENGINE_INSYNC:
            # Only the active controller listens; the others campaign in ZooKeeper.
            state = "running, active" if cluster.listening(node.port, node.host) else "running, standby"
        print(f"{node.node_id:>4}  {node.roles:<10}  {node.address:<21}  {node.pid or '-':>7}  {state}")
    try:
        rows = describe_rows(spec.bootstrap)
    except Exception as exc:  # no broker answering is a status, not a crash
        print(f"partitions: unavailable ({exc})")
        return 1
    under = sum(1 for r in rows if len(r.isr) < len(r.replicas))
    under_min = sum(1 for r in rows if len(r.isr) < r.min_isr)
    offline = sum(1 for r in rows if r.leader < 0)
    print(f"partitions: {len(rows)} total, {under} under-replicated, {under_min} under min ISR, {offline} offline")
    return 0
