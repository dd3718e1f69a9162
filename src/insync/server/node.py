"""One insync process: the roles of `process.roles` on one event loop, until SIGTERM or SIGINT.

`run(config)` sets up logging (`server.log` in Kafka's log4j layout, in the first log dir, beside
`events.jsonl`), starts the controller role and/or the broker role, and on a signal stops them gracefully:
listeners stop accepting, in-flight requests get a deadline, the broker checkpoints its high watermarks and
closes its logs. What the two roles share (the cluster id, the metered dispatcher, listener parsing, the node's
notion of now) is in `server/role.py`, which both import; this module only composes them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
from pathlib import Path

from insync import malloc
from insync.config import BrokerConfig
from insync.kafkalog import KafkaLogFormatter
from insync.server.broker_node import BrokerNode
from insync.server.controller_node import ControllerNode


def configure_logging(log_dir: str) -> None:
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(Path(log_dir) / "server.log")
    handler.setFormatter(KafkaLogFormatter())
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(KafkaLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler, console]
    root.setLevel(logging.INFO)


async def serve(config: BrokerConfig) -> int:
    """Run the node's roles until a signal; the process exit code."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    roles = set(config.node.process_roles)
    controller = ControllerNode(config) if "controller" in roles else None
    async with asyncio.TaskGroup() as group:
        if controller is not None:
            group.create_task(controller.run(stop))
        if "broker" in roles:
            group.create_task(BrokerNode(config).run(stop))
    return controller.exit_code if controller is not None else 0


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one, as the JVM does for Kafka (HotSpot's `MaxFDLimit`, on by
    default): each connection is a descriptor, and a shell's soft limit (often 1,024) would leave clients waiting in
    the listen backlog. The limit now in force (the soft one as it was where the system refuses)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or soft <= hard, (soft, hard)
    if soft == hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # an infinite hard limit some systems will not take as the soft one
        return soft
    return hard


def run(config: BrokerConfig) -> int:
    """Run the node until a signal. With `INSYNC_PROFILE_DIR` set, the whole run is profiled (cProfile) and the
    stats are written to `<dir>/node-<id>.prof` at exit, a CPU profile of a real node under real traffic."""
    configure_logging(config.log_dirs()[0])
    malloc.keep_freed_buffers()  # fetch responses are megabyte buffers: reuse them (insync.malloc)
    open_files = raise_open_files_limit()
    node_id = config.node.node_id
    logging.getLogger("insync.node").info("Starting node %d with roles %s (open files limit %d)", node_id,
                                          ",".join(config.node.process_roles), open_files)
    profile_dir = os.environ.get("INSYNC_PROFILE_DIR")
    if not profile_dir:
        return asyncio.run(serve(config))
    import cProfile

    profiler = cProfile.Profile()
    try:
        code: int = profiler.runcall(asyncio.run, serve(config))
    finally:
        Path(profile_dir).mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(Path(profile_dir) / f"node-{node_id}.prof"))
    return code
