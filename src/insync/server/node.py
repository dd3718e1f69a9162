"""One insync process: the roles of `process.roles` on one event loop, until SIGTERM or SIGINT.

`run(config)` sets up logging (`server.log` in Kafka's log4j layout, in the first log dir, beside
`events.jsonl`), starts the controller role and/or the broker role, and on a signal stops them gracefully:
listeners stop accepting, in-flight requests get a deadline, the broker checkpoints its high watermarks and
closes its logs. Everything shared by the two roles lives here: the cluster id, API names for metrics,
listener parsing, and the node's notion of now.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from insync import malloc
from insync.clock import Clock
from insync.config import BrokerConfig, ConfigError
from insync.kafkalog import KafkaLogFormatter
from insync.protocol.codec import DecodedRequest
from insync.server.metrics import NodeMetrics
from insync.wire import versions

CLUSTER_ID = "insync-cluster-0001"

API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    32: "DescribeConfigs", 56: "AlterPartition", 60: "DescribeCluster", 62: "BrokerRegistration",
    63: "BrokerHeartbeat", 8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
    12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
}


class MeteredDispatcher:
    """What both roles give the listener: their ApiVersions table, the error-35 body built from it, and per-API
    request counts and latencies around the role's own `_handle`."""

    api_versions: Mapping[int, tuple[int, int]]
    clock: Clock
    metrics: NodeMetrics

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return dict(self.api_versions)

    def unsupported_api_versions_response(self) -> Any:
        return versions.unsupported_version_response(self.api_versions)

    async def handle(self, request: DecodedRequest, peer: str) -> Any:
        start = self.clock.monotonic_ms()
        try:
            return await self._handle(request, peer)
        finally:
            self.metrics.observe_request(API_NAMES.get(request.api_key, str(request.api_key)),
                                         self.clock.monotonic_ms() - start)

    async def _handle(self, request: DecodedRequest, peer: str) -> Any:
        """The response body to `request` from the client at `peer` (host:port), or None for none."""
        raise NotImplementedError


def listener_address(url: str) -> tuple[str, int]:
    """`PLAINTEXT://127.0.0.1:9092` -> ("127.0.0.1", 9092); a malformed listener names itself."""
    _, _, address = url.rpartition("://")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"listener {url!r} is not NAME://host:port")
    return host, int(port)


def monotonic_now(clock: Clock) -> Callable[[], int]:
    """Wall-clock milliseconds (events and lag are wall times) that never go backwards, as the cores assert."""
    last = 0

    def now() -> int:
        nonlocal last
        last = max(last, clock.now_ms())
        return last

    return now


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
    from insync.server.broker_node import BrokerNode
    from insync.server.controller_node import ControllerNode

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    roles = set(config.get_list("process.roles"))
    controller = ControllerNode(config) if "controller" in roles else None
    async with asyncio.TaskGroup() as group:
        if controller is not None:
            group.create_task(controller.run(stop))
        if "broker" in roles:
            group.create_task(BrokerNode(config).run(stop))
    return controller.exit_code if controller is not None else 0


def run(config: BrokerConfig) -> int:
    """Run the node until a signal. With `INSYNC_PROFILE_DIR` set, the whole run is profiled (cProfile) and the
    stats are written to `<dir>/node-<id>.prof` at exit: how the README's CPU profile was taken."""
    configure_logging(config.log_dirs()[0])
    malloc.keep_freed_buffers()  # fetch responses are megabyte buffers: reuse them (insync.malloc)
    node_id = config.get_int("node.id")
    logging.getLogger("insync.node").info("Starting node %d with roles %s", node_id,
                                          ",".join(config.get_list("process.roles")))
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
