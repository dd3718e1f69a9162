"""Kafka's LogDirFailureChannel: where a log reports the I/O error that takes its whole log directory offline.

A log that fails to write (ENOSPC, EIO, EROFS, ...) or to read calls `maybe_add_offline_log_dir` with its log
directory, once per directory: the first report is logged and queued, later ones are dropped. The broker core
takes the queue (`take_new`) after every call and stops serving the partitions in those directories
(`broker.dir_failure`). Nothing here does I/O: the channel is a set and a queue, bounded by the directories.
"""

from __future__ import annotations

import logging
from collections import deque

logger = logging.getLogger("insync.storage")

LOG_DIRS_MAX = 64  # Kafka puts no limit on log.dirs; this one bounds the channel


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: set[str] = set()
        self._new: deque[str] = deque(maxlen=LOG_DIRS_MAX)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: Exception) -> None:
        """Mark `log_dir` offline after `error`; `message` says what was being done (Kafka logs both)."""
        assert log_dir, "a log directory has a path"
        if log_dir in self._offline:
            return
        assert len(self._offline) < LOG_DIRS_MAX, f"more than {LOG_DIRS_MAX} log directories failed"
        self._offline.add(log_dir)
        self._new.append(log_dir)
        logger.error("%s: %s", message, error)

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self._offline

    @property
    def has_new(self) -> bool:
        return bool(self._new)

    def take_new(self) -> list[str]:
        """The directories that went offline since the last call, in the order they failed."""
        new = list(self._new)
        self._new.clear()
        assert all(d in self._offline for d in new)
        return new
