"""What a broker does when one of its log directories fails: Kafka's ReplicaManager.handleLogDirFailure, sans-IO.

A log that hits an I/O error reports its directory to the log manager's failure channel
(`storage.log_dir_failure`). The broker core then asks `LogDirFailures.fail` what follows, and carries it out:
every hosted partition whose log is in that directory stops (its fetcher is removed, its ISR proposal withdrawn;
its log, offline, answers every produce and fetch with KAFKA_STORAGE_ERROR), and the directory joins the ones
reported to the controller in each heartbeat (Kafka's BrokerHeartbeat OfflineLogDirs, KIP-858), so that the
controller moves the leaderships away and shrinks the ISRs. When every log directory of the broker has failed
there is nothing left to serve: the broker halts, with Kafka's log line, and the controller fences it when its
session runs out. A directory stays offline until the broker restarts and recovers its logs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from insync.types import TopicPartition

_DIRECTORY_NAMESPACE = uuid.UUID("6b2f3c4e-8a51-4d7e-9c0a-1f2e3d4c5b6a")


def directory_id(log_dir: str) -> str:
    """A log directory's id, stable across restarts (Kafka keeps a random one in meta.properties; insync derives
    it from the absolute path, which is what names the directory to the operator too)."""
    assert log_dir.startswith("/"), f"log directory {log_dir!r} is not absolute"
    return str(uuid.uuid5(_DIRECTORY_NAMESPACE, log_dir))


@dataclass(frozen=True, slots=True)
class DirFailure:
    log_dir: str
    partitions: tuple[TopicPartition, ...]  # hosted partitions in it: stop serving and fetching them
    halt_message: str | None  # every log dir has failed: halt the broker with this line


class LogDirFailures:
    def __init__(self, log_dirs: Sequence[str]) -> None:
        assert log_dirs, "a broker has at least one log directory"
        assert len(set(log_dirs)) == len(log_dirs), f"log directories {list(log_dirs)} repeat"
        self.log_dirs = tuple(log_dirs)
        self._offline: list[str] = []
        self.halt_message: str | None = None

    @property
    def offline_log_dirs(self) -> tuple[str, ...]:
        return tuple(self._offline)

    @property
    def offline_directory_ids(self) -> tuple[str, ...]:
        """What the heartbeat reports (Kafka's OfflineLogDirs)."""
        return tuple(directory_id(d) for d in self._offline)

    def fail(self, log_dir: str, hosted: Iterable[TopicPartition]) -> DirFailure | None:
        """`log_dir` failed; `hosted` are the partitions whose logs are in it. None when it already had."""
        if log_dir in self._offline:
            return None
        assert log_dir in self.log_dirs, f"{log_dir} is not one of the log directories {list(self.log_dirs)}"
        self._offline.append(log_dir)
        if len(self._offline) == len(self.log_dirs):
            self.halt_message = f"Shutdown broker because all log dirs in {', '.join(self.log_dirs)} have failed"
        failure = DirFailure(log_dir, tuple(sorted(hosted)), self.halt_message)
        assert len(self._offline) <= len(self.log_dirs)
        return failure
