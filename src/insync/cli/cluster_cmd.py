"""`insync cluster up|status|down`: a local cluster of real processes on 127.0.0.1 (see chaos/cluster.py)."""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from insync.chaos import cluster

REGISTRATION_DEADLINE_S = 60.0
METADATA_TIMEOUT_S = 5.0


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
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="processes, brokers and partition health")
    status.add_argument("--dir", required=True)
    status.set_defaults(func=_status)

    down = commands.add_parser("down", help="stop every node: SIGTERM, then SIGKILL after a deadline")
    down.add_argument("--dir", required=True)
    down.add_argument("--deadline-s", type=float, default=cluster.STOP_DEADLINE_S)
    down.set_defaults(func=_down)


def up(directory: str, brokers: int, port: int, overrides: list[str], controllers: int = 1) -> cluster.ClusterSpec:
    """Start a cluster and wait until every broker is registered and visible in metadata. Controller 0 starts
    first and is the active one; any others start after it listens, as standbys."""
    spec = cluster.layout(directory, brokers, port, overrides, controllers)
    spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
    cluster.wait_listening(spec.controller)
    for standby in spec.controllers[1:]:
        spec = cluster.start_node(spec, standby.node_id)
    for broker in spec.brokers:
        spec = cluster.start_node(spec, broker.node_id)
    try:
        for broker in spec.brokers:
            cluster.wait_listening(broker)
        wait_registered(spec, REGISTRATION_DEADLINE_S)
    except Exception:
        down(spec, cluster.STOP_DEADLINE_S)
        raise
    return spec


def wait_registered(spec: cluster.ClusterSpec, deadline_s: float) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    wanted = {b.node_id for b in spec.brokers}
    deadline = time.monotonic() + deadline_s
    seen: set[int] = set()
    while time.monotonic() < deadline:
        try:
            seen = set(admin.list_topics(timeout=METADATA_TIMEOUT_S).brokers)
        except Exception:
            seen = set()
        if seen >= wanted:
            return
        time.sleep(0.2)
    raise TimeoutError(f"brokers {sorted(wanted - seen)} not registered after {deadline_s} s")


def down(spec: cluster.ClusterSpec, deadline_s: float) -> cluster.ClusterSpec:
    """Brokers first (all at once: each checkpoints and closes its logs), then the controller."""
    for broker in spec.brokers:
        if broker.pid is not None and cluster.pid_alive(broker.pid):
            cluster.signal_node(spec, broker.node_id, signal.SIGTERM)
    for broker in spec.brokers:
        spec = cluster.stop_node(spec, broker.node_id, deadline_s)
    for controller in spec.controllers[1:]:  # standbys first: stopping the active one first would promote one
        spec = cluster.stop_node(spec, controller.node_id, deadline_s)
    return cluster.stop_node(spec, cluster.CONTROLLER_ID, deadline_s)


def _up(args: argparse.Namespace) -> int:
    spec = up(args.dir, args.brokers, args.port, args.config, args.controllers)
    print(f"cluster up: controller {spec.controller.address}, {len(spec.brokers)} brokers")
    print(f"bootstrap servers: {spec.bootstrap}")
    return 0


def _down(args: argparse.Namespace) -> int:
    spec = down(cluster.ClusterSpec.load(args.dir), args.deadline_s)
    print(f"cluster down: {len(spec.nodes)} nodes stopped")
    return 0


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _status(args: argparse.Namespace) -> int:
    spec = cluster.ClusterSpec.load(args.dir)
    print(f"{'node':>4}  {'role':<10}  {'address':<21}  {'pid':>7}  state")
    for node in spec.nodes:
        running = node.pid is not None and cluster.pid_alive(node.pid)
        state = "running" if running else "stopped"
        if running and len(spec.controllers) > 1 and node.roles == "controller":
            # Only the active controller listens; the others campaign in ZooKeeper.
            state = "running, active" if _listening(node.port) else "running, standby"
        print(f"{node.node_id:>4}  {node.roles:<10}  {node.address:<21}  {node.pid or '-':>7}  {state}")
    try:
        from insync.cli.topics_cmd import describe_rows

        rows = describe_rows(spec.bootstrap)
    except Exception as exc:  # no broker answering is a status, not a crash
        print(f"partitions: unavailable ({exc})")
        return 1
    under = sum(1 for r in rows if len(r.isr) < len(r.replicas))
    under_min = sum(1 for r in rows if len(r.isr) < r.min_isr)
    offline = sum(1 for r in rows if r.leader < 0)
    print(f"partitions: {len(rows)} total, {under} under-replicated, {under_min} under min ISR, {offline} offline")
    return 0
