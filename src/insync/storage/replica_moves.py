"""The replicas a broker is moving between its log dirs (AlterReplicaLogDirs): one future copy per partition.

`start(tp, destination)` creates `<tp>.<token>-future` in the destination (after cancelling a move to another dir,
as Kafka stops one whose destination changed) and stops the partition's cleaning; `step(now_ms)`, called by the
broker's timer while any move is running, gives each future copy its share of the throttle's budget
(`replica_move.copy_step`) and swaps in those that caught up (`replica_move.swap`), deleting the old copy. A copy
that fails (an I/O error in either log) is dropped and logged: the current log keeps serving, and the move can be
asked again. Start-up hands back the future copies it found (`resume`): their moves go on.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from typing import Protocol

from insync.clock import Clock
from insync.config import LONG_MAX
from insync.errors import KafkaException
from insync.storage.disk import Disk
from insync.storage.log import Log
from insync.storage.log_cleaner import LogCleaner
from insync.storage.log_dir_layout import FUTURE_SUFFIX, future_name
from insync.storage.replica_move import MoveThrottle, caught_up, copy_step, delete_log_dir, swap
from insync.types import TopicPartition


class MoveHost(Protocol):
    """What the moves need of the log manager that owns them (`LogManager`), without importing it."""

    disk: Disk
    clock: Clock
    cleaner: LogCleaner | None

    def get(self, tp: TopicPartition) -> Log | None: ...

    def online_dirs(self) -> Sequence[str]: ...

    def checkpoint_recovery_points_and_log_starts(self) -> None: ...


logger = logging.getLogger("insync.storage")

STEP_BYTES_MAX = 1 << 20  # copied per step over all moves: a step runs on the event loop


class ReplicaMoves:
    def __init__(self, manager: MoveHost) -> None:
        self._manager = manager
        self._futures: dict[TopicPartition, Log] = {}
        self._tokens: dict[TopicPartition, str] = {}
        self._rate_bytes_per_s = LONG_MAX
        self._throttle: MoveThrottle | None = None  # made at the first step, which knows the time

    def set_rate(self, rate_bytes_per_s: int) -> None:
        """`replica.alter.log.dirs.io.max.bytes.per.second`, also when it changes while the broker runs."""
        assert rate_bytes_per_s >= 0, rate_bytes_per_s
        self._rate_bytes_per_s = rate_bytes_per_s
        if self._throttle is not None:
            self._throttle.rate_bytes_per_s = rate_bytes_per_s

    @property
    def active(self) -> bool:
        return bool(self._futures)

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._futures)

    def future_dir_of(self, tp: TopicPartition) -> str | None:
        future = self._futures.get(tp)
        return None if future is None else os.path.dirname(future.directory)

    def resume(self, tp: TopicPartition, future: Log) -> None:
        name = os.path.basename(future.directory)
        assert name.endswith(FUTURE_SUFFIX) and tp not in self._futures, (tp, future.directory)
        self._futures[tp] = future
        self._tokens[tp] = name[len(str(tp)) + 1 : -len(FUTURE_SUFFIX)]
        logger.info("Resuming the move of %s to %s", tp, os.path.dirname(future.directory))

    def start(self, tp: TopicPartition, destination: str) -> None:
        """Move the partition's log to `destination` (an online dir of this broker; the caller checked)."""
        current = self._manager.get(tp)
        assert current is not None and destination in self._manager.online_dirs(), (tp, destination)
        if self.future_dir_of(tp) not in (None, destination):
            self.cancel(tp)
        if tp in self._futures or os.path.dirname(current.directory) == destination:
            return
        assert self._manager.cleaner is not None
        self._manager.cleaner.abort_and_wait(tp)
        token = uuid.uuid4().hex
        manager = self._manager
        self._futures[tp] = Log.open(f"{destination}/{future_name(tp, token)}", current.config, manager.disk,
                                     clock=manager.clock, log_start_offset=current.log_start_offset)
        self._futures[tp].failure_channel = current.failure_channel
        self._tokens[tp] = token
        logger.info("Moving %s from %s to %s", tp, os.path.dirname(current.directory), destination)

    def cancel(self, tp: TopicPartition) -> None:
        future = self._futures.pop(tp, None)
        self._tokens.pop(tp, None)
        if future is not None:
            delete_log_dir(self._manager.disk, future.directory)

    def step(self, now_ms: int) -> int:
        """Copy within the throttle's budget and swap in the copies that caught up; returns the swaps."""
        if not self._futures:
            return 0
        if self._throttle is None:
            self._throttle = MoveThrottle(self._rate_bytes_per_s, now_ms)
        budget = self._throttle.budget(now_ms, STEP_BYTES_MAX)
        swapped = 0
        for tp in sorted(self._futures):
            current, future = self._manager.get(tp), self._futures[tp]
            if current is None:
                self.cancel(tp)
                continue
            try:
                copied = copy_step(current, future, budget) if budget > 0 else 0
                self._throttle.spend(copied)
                budget = max(0, budget - copied)
                if caught_up(current, future):
                    self._swap(tp, current, future)
                    swapped += 1
            except KafkaException as exc:
                logger.error("Stopping the move of %s to %s: %s", tp, os.path.dirname(future.directory), exc)
                self.cancel(tp)
        return swapped

    def _swap(self, tp: TopicPartition, current: Log, future: Log) -> None:
        manager = self._manager
        source = os.path.dirname(current.directory)
        doomed = swap(manager.disk, manager.clock, current, future, self._tokens.pop(tp))
        del self._futures[tp]
        delete_log_dir(manager.disk, doomed)
        assert manager.cleaner is not None
        manager.cleaner.write_checkpoints()  # its checkpoint now belongs to the destination's file
        manager.checkpoint_recovery_points_and_log_starts()
        logger.info("Moved %s from %s to %s", tp, source, os.path.dirname(current.directory))
