"""`insync monitor --bootstrap-server HOST:PORT [--master URL]`: live replication health on Spark Structured
Streaming (see `insync.spark.monitor.job`): a table of the partitions in trouble, alerts to `__insync_alerts`."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from typing import Any

DEFAULT_MASTER = "local[2]"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "monitor", help="live replication health from __insync_events on Spark Structured Streaming",
        description="Read __insync_events as a stream, keep each partition's state, show the partitions in "
                    "trouble and write alerts (URP, flapping, leader-side, under min ISR, offline, data at risk) "
                    "to __insync_alerts. A restart with the same --checkpoint goes on without repeating alerts.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--kafka-logs", nargs="+", default=None, metavar="DIR",
                        help="monitor a Kafka cluster: its brokers' log directories (server.log, state-change.log, "
                             "controller.log, here or one level down), read as they grow, beside its metadata")
    parser.add_argument("--master", default=DEFAULT_MASTER, metavar="URL", help=f"Spark master (default {DEFAULT_MASTER})")
    parser.add_argument("--checkpoint", default=".insync-monitor", metavar="DIR",
                        help="query checkpoint and state (default .insync-monitor)")
    parser.add_argument("--alerts-file", default=None, metavar="FILE", help="also append each alert (JSON) here")
    parser.add_argument("--from-beginning", action="store_true", help="read the events already in the topic")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S", help="stop after S seconds (0: never)")
    parser.add_argument("--urp-ms", type=int, default=5000, metavar="MS", help="alert on URP longer than this")
    parser.add_argument("--min-isr-ms", type=int, default=2000, metavar="MS", help="... under min ISR longer than this")
    parser.add_argument("--offline-ms", type=int, default=2000, metavar="MS", help="... offline longer than this")
    parser.add_argument("--quiet", action="store_true", help="print alerts as lines instead of the live table")
    parser.set_defaults(func=_monitor)


def _monitor(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live

    from insync.spark.monitor.job import (
        Monitor,
        MonitorError,
        MonitorSettings,
        wait_for_events_topic,
        wait_for_kafka,
    )
    from insync.spark.monitor.rules import Thresholds
    from insync.spark.monitor.view import MonitorView
    from insync.spark.session import build_session

    for name in ("urp_ms", "min_isr_ms", "offline_ms"):
        if getattr(args, name) < 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    thresholds = Thresholds(urp_ms=args.urp_ms, min_isr_ms=args.min_isr_ms, offline_ms=args.offline_ms)
    settings = MonitorSettings(args.bootstrap_server, args.checkpoint, thresholds, from_beginning=args.from_beginning,
                               alerts_file=args.alerts_file, kafka_logs=tuple(args.kafka_logs or ()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deadline = time.monotonic() + args.duration if args.duration > 0 else float("inf")
    console = Console()
    view = MonitorView()

    def keep_going() -> bool:
        return not stop.is_set() and time.monotonic() < deadline

    spark = build_session(args.master, app_name="insync-monitor", shuffle_partitions=1)
    spark.sparkContext.setLogLevel("FATAL")  # a failed query is told (and restarted) by the monitor itself
    try:
        if settings.kafka_logs:
            wait_for_kafka(settings.bootstrap, 30.0)
        else:
            wait_for_events_topic(settings.bootstrap, 30.0)
        if args.quiet:
            def on_batch(alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
                for a in alerts:
                    console.print(f"ALERT {a['kind']} {a['topic']}-{a['partition']}: {a['cause']}", markup=False)
            _until(Monitor(spark, settings, on_batch, on_error=console.print), keep_going)
        else:
            with Live(view.render(), console=console, refresh_per_second=2) as live:
                def on_batch_live(alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
                    view.on_batch(alerts, statuses)
                    live.update(view.render())
                _until(Monitor(spark, settings, on_batch_live, on_error=live.console.print), keep_going)
    except MonitorError as exc:
        console.print(f"insync monitor: {exc}", markup=False)
        return 1
    finally:
        spark.stop()
    return 0


def _until(monitor: Any, keep_going: Any) -> None:
    monitor.start()
    try:
        while keep_going():  # bounded by --duration or a signal
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        monitor.stop()
