"""`insync chaos fuzz`: the protocol fuzzer (chaos/fuzz.py) against a running cluster, printing a JSON summary."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from insync.chaos import cluster, fuzz
from insync.server.event_log import EVENTS_FILE


def register(commands: Any) -> None:
    sub = commands.add_parser("fuzz", help="requests built from the API schemas of every advertised API and version "
                              "(valid, boundary, mutated) under a steady acks=all workload; checks nothing broke")
    sub.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...] of the brokers")
    sub.add_argument("--requests", type=int, default=10_000)
    sub.add_argument("--seed", type=int, default=0)
    sub.add_argument("--start", type=int, default=0, help="first case index (a failed case replays alone)")
    sub.add_argument("--concurrency", type=int, default=32, help="connections sending at once")
    sub.add_argument("--rate", type=float, default=100.0, help="workload records per second")
    sub.add_argument("--controller", default="", metavar="HOST:PORT",
                     help="the controller's listener (its port is in the cluster's cluster.json): every fourth case "
                     "goes there, drawn from the controller's APIs")
    sub.add_argument("--dir", help="the cluster's directory (`insync cluster up --dir`): the nodes' memory and "
                     "liveness are checked from their processes, their logs for handlers' unexpected errors, the "
                     "controller's events for brokers fenced")
    sub.add_argument("--rss-growth-max-mb", type=int, default=256)
    sub.set_defaults(func=_fuzz)


def _fuzz(args: argparse.Namespace) -> int:
    pids: dict[int, int] = {}
    logs: tuple[Path, ...] = ()
    events: tuple[Path, ...] = ()
    if args.dir:
        spec = cluster.ClusterSpec.load(args.dir)
        nodes = (spec.controller, *spec.brokers)
        pids = {n.node_id: n.pid for n in nodes if n.pid is not None}
        logs = tuple(Path(n.directory) / "stdout.log" for n in nodes)
        events = (spec.controller.log_dir / EVENTS_FILE,)
    summary = fuzz.run(fuzz.FuzzSpec(args.bootstrap_server, args.requests, args.seed, args.concurrency, args.start,
                                     pids, args.rss_growth_max_mb * 1024 * 1024, args.rate, logs, args.controller,
                                     events))
    print(json.dumps(summary, indent=2))
    return 0 if summary["passed"] else 1
