"""`insync demo [--fast] [--dir DIR]`: the main job (`make demo`). See `insync.demo.run` for the acts."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from insync.cli.logs import client_log


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="the seeds' faults live on a local cluster, then the analysis")
    parser.add_argument("--fast", action="store_true", help="short timeouts (about 66 s on 2 cores), no analysis")
    parser.add_argument("--dir", default=None, help="where clusters, logs and the report go (default: a temp dir)")
    parser.add_argument("--no-analysis", action="store_true", help="skip the Spark analysis report")
    parser.add_argument("--no-monitor", action="store_true",
                        help="do not run insync monitor (Spark Structured Streaming) beside the clusters; --fast "
                             "and --secure never run it")
    parser.add_argument("--secure", action="store_true",
                        help="every cluster SASL_SSL (cluster up --security sasl_ssl) with ACLs on: clients, tools "
                             "and brokers authenticate and encrypt, the demo runs as the super user admin")
    parser.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from insync.demo import run

    directory = Path(args.dir or tempfile.mkdtemp(prefix="insync-demo-"))
    directory.mkdir(parents=True, exist_ok=True)
    console = Console(width=max(Console().width, 110))  # the per-act table needs more than 80 columns
    timing = run.FAST if args.fast else run.NORMAL
    client_log_path = directory / "clients.log"
    with client_log(client_log_path), Live(console=console, refresh_per_second=4, transient=False) as live:
        demo = run.Demo(directory, timing, show=live.update,
                        say=lambda text: live.console.print(f"\n{text}", markup=False, highlight=False),
                        security="sasl_ssl" if args.secure else "plaintext",
                        monitor=_monitor(args, console, directory))
        result = demo.run()
    if "monitor_alerts" in result:
        kinds = Counter(f"{a['kind']} {a['topic']}-{a['partition']}" for a in result["monitor_alerts"])
        console.print("insync monitor alerts (also in each cluster's alerts.jsonl and __insync_alerts): "
                      + (", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "none"))
    table = Table(title="insync demo: per act")
    for column in ("act", "shrinks", "expands", "URP s", "offline s", "acked", "errors"):
        table.add_column(column, no_wrap=True)
    for act in result["acts"]:
        table.add_row(act["name"], str(act["shrinks"]), str(act["expands"]), str(act["urp_s"]),
                      str(act["offline_s"]), str(act["acked"]), str(act["produce_errors"]))
    console.print(table)
    ok = True
    for segment in result["segments"]:
        v = segment["verdict"]
        ok &= v["lost"] == 0 and v["duplicated"] == 0 and v["reordered"] == 0
        console.print(f"{segment['name']}: acknowledged {v['acked']}, lost {v['lost']}, duplicated "
                      f"{v['duplicated']}, reordered {v['reordered']}")
    console.print("event logs:\n  " + "\n  ".join(result["event_logs"]))
    console.print(f"client logs (connection errors while brokers are down are expected): {client_log_path}")
    if "monitor_alerts" in result:
        console.print(f"Spark's own log (the monitor's query): {directory / 'spark.log'}")
    if not (args.fast or args.no_analysis):
        result["reports"] = _analyse(directory, console)
    console.print(f"summary: {run.save(directory, result)}")
    return 0 if ok else 1


def _monitor(args: argparse.Namespace, console: Any, directory: Path) -> Any:
    """The live monitor beside the clusters, unless turned off, --fast, --secure or without pyspark."""
    if args.no_monitor or args.fast or args.secure:
        return None
    if importlib.util.find_spec("pyspark") is None:
        console.print("Spark is not installed (pip install 'insync[spark]'): no live monitor")
        return None
    from insync.demo.monitor import DemoMonitor

    return DemoMonitor(directory / "spark.log")


def _analyse(directory: Path, console: Any) -> list[str]:
    """One report per cluster: the two clusters reuse broker ids, so their logs must not be merged."""
    if importlib.util.find_spec("pyspark") is None:
        console.print("Spark is not installed (pip install 'insync[spark]'): no analysis report")
        return []
    reports = []
    for cluster_dir in sorted(p for p in directory.iterdir() if (p / "cluster.json").exists()):
        out = directory / "analysis" / cluster_dir.name
        console.print(f"Running the replication-health analysis of {cluster_dir.name} on Spark ...")
        done = subprocess.run([sys.executable, "-m", "insync.cli.main", "analyze", str(cluster_dir),
                               "--out", str(out)], timeout=600)
        if done.returncode != 0:
            console.print(f"the analysis of {cluster_dir.name} failed (exit {done.returncode})")
            continue
        console.print(f"analysis report: {out / 'report.html'}")
        reports.append(str(out / "report.html"))
    return reports
