"""`insync analyze PATH... --out DIR [--master URL]`: the replication-health analysis on Spark.

PATH is a log file or a directory searched for `events.jsonl`, `server.log*`, `state-change.log*` and
`controller.log*`. The job writes parquet tables, `summary.json` and `report.html` into DIR (see
`insync.spark.analysis.job`).

`insync analyze --bench --out DIR [--bench-events 1000000,10000000]` instead generates synthetic logs of those
sizes under DIR and measures the analysis on each (events/s and how the time grows), writing DIR/bench.json.

Spark is imported only when the command runs, so `insync --help` stays fast and works without pyspark.
"""

from __future__ import annotations

import argparse
import json
import sys
import zoneinfo
from typing import Any

from insync.config import ConfigError

DEFAULT_MASTER = "local[*]"
DEFAULT_BENCH_EVENTS = "1000000,10000000"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "analyze", help="replication-health analysis of events.jsonl and Kafka server.log files, on Spark",
        description="Analyse broker logs (insync events.jsonl, Kafka server.log) on Spark: under-replicated, "
                    "under-min-ISR and offline intervals, flapping, shrink episodes with causes, per broker. "
                    "Writes parquet tables, summary.json and report.html into --out.")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="log files or directories to search")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--master", default=DEFAULT_MASTER, metavar="URL",
                        help=f"Spark master (default {DEFAULT_MASTER}: all local cores)")
    parser.add_argument("--flap-window-s", type=float, default=60.0, metavar="S",
                        help="a replica removed and re-added within this many seconds is flapping (default 60)")
    parser.add_argument("--log-timezone", default="UTC", metavar="ZONE",
                        help="time zone of Kafka log4j timestamps, e.g. Europe/Berlin (default UTC)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark configuration, repeatable (e.g. spark.driver.memory=8g)")
    parser.add_argument("--bench", action="store_true",
                        help="generate synthetic logs and measure the analysis instead of reading PATHs")
    parser.add_argument("--bench-events", default=DEFAULT_BENCH_EVENTS, metavar="N,N",
                        help=f"event counts for --bench (default {DEFAULT_BENCH_EVENTS})")
    parser.set_defaults(func=run)


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf expects KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf


def _check_timezone(name: str) -> str:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"--log-timezone: unknown time zone {name!r}") from exc
    return name


def _bench_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--bench-events expects comma-separated counts, got {text!r}") from exc
    if not sizes or any(n <= 0 for n in sizes):
        raise ConfigError(f"--bench-events expects positive counts, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    if args.flap_window_s <= 0:
        raise ConfigError(f"--flap-window-s must be positive, got {args.flap_window_s}")
    if args.bench and args.paths:
        raise ConfigError("--bench generates its own logs: give no PATH")
    if not args.bench and not args.paths:
        raise ConfigError("give at least one PATH (a log file or a directory), or --bench")
    from insync.spark.analysis import health, inputs
    options = health.AnalysisOptions(flap_window_ms=int(args.flap_window_s * 1000),
                                       log_timezone=_check_timezone(args.log_timezone))
    conf = _spark_conf(args.conf)
    sizes = _bench_sizes(args.bench_events) if args.bench else []
    found = None if args.bench else inputs.discover(args.paths)  # fail on a bad path before Spark starts

    from insync.spark.analysis import bench, job
    from insync.spark.session import build_session
    spark = build_session(args.master, app_name="insync-analyze", conf=conf)
    try:
        if args.bench:
            results = bench.run(spark, args.out, sizes, options)
            print(bench.describe(results))
            return 0
        assert found is not None
        summary = job.run(spark, found, args.out, options)
    finally:
        spark.stop()
    json.dump(summary, sys.stdout, indent=2)
    print(f"\nreport: {args.out}/report.html")
    return 0
