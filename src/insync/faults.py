"""Faults on demand for a running broker: a small JSON file the broker polls.

`insync chaos slow-reads|fail-partition|delay|clear` write `<node dir>/faults.json` atomically (write to a
temporary file, then rename); a broker started with `fault.injection.enable=true` polls it (every
`POLL_INTERVAL_MS`) and applies it to its disk layer (slow reads of one partition's log: KIP-501), its fetcher
(one partition's appends raise: KIP-461) and its replication traffic (added latency). A broker without that
setting never reads the file, and the CLI refuses to write it, naming the setting. Process faults (pause,
resume, kill, restart) are signals and need no cooperation from the broker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from insync.config import BrokerConfig, ConfigError

FAULTS_FILE = "faults.json"
POLL_INTERVAL_MS = 200


@dataclass(frozen=True, slots=True)
class FaultSpec:
    slow_reads_ms: dict[str, int] = field(default_factory=dict)  # "topic-partition" -> latency of each read
    failed_partitions: tuple[str, ...] = ()  # "topic-partition" whose follower appends raise
    delay_ms: int = 0  # added to every replication request this broker sends

    def to_json(self) -> str:
        return json.dumps({"slow_reads_ms": self.slow_reads_ms, "failed_partitions": list(self.failed_partitions),
                           "delay_ms": self.delay_ms}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FaultSpec:
        try:
            data = json.loads(text)
            slow = {str(k): int(v) for k, v in dict(data.get("slow_reads_ms", {})).items()}
            failed = tuple(str(p) for p in data.get("failed_partitions", []))
            delay = int(data.get("delay_ms", 0))
        except (ValueError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{FAULTS_FILE} is not a fault description: {exc}") from None
        if delay < 0 or any(v < 0 for v in slow.values()):
            raise ConfigError(f"{FAULTS_FILE}: latencies must not be negative")
        return cls(slow, failed, delay)


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def read_faults(node_directory: str | Path) -> FaultSpec:
    path = Path(node_directory) / FAULTS_FILE
    if not path.exists():
        return FaultSpec()
    return FaultSpec.from_json(path.read_text())


def write_faults(node_directory: str | Path, spec: FaultSpec) -> None:
    config = BrokerConfig.from_sources(Path(node_directory) / "server.properties")
    if not config.node.fault_injection_enable:
        raise ConfigError(f"the broker in {node_directory} was not started with fault.injection.enable=true; "
                          "restart it with --config fault.injection.enable=true to inject faults")
    path = Path(node_directory) / FAULTS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(spec.to_json())
    tmp.replace(path)
