"""The log cleaner's threads (Kafka's `kafka-log-cleaner-thread-N`): the executor `storage.log_cleaner` hands its
jobs to, so that cleaning never runs on the event loop.

`log.cleaner.threads` threads take jobs from one queue; each owns an offset map of its share of
`log.cleaner.dedupe.buffer.size` and a `RealDisk` of its own (file handles are never shared with the event loop),
and all of them share one `Throttler` at `log.cleaner.io.max.bytes.per.second`. A thread only runs
`cleaner.run_clean` and queues what it gave; the event loop takes it in `completed` and does the swap.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from insync.config import CleanerConfig
from insync.server.throttler import Throttler
from insync.storage.cleaner import CleanJob, run_clean
from insync.storage.disk import Disk, RealDisk
from insync.storage.log_cleaner import Outcome, map_bytes_per_thread
from insync.storage.offset_map import OffsetMap
from insync.types import TopicPartition

log = logging.getLogger("insync.storage")

JOIN_TIMEOUT_S = 30.0


class CleanerThreads:
    def __init__(self, config: CleanerConfig, disk: Disk) -> None:
        self.config = config
        self.disk = disk
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self._jobs: queue.Queue[tuple[CleanJob, Callable[[], None], threading.Event] | None] = queue.Queue()
        self._done: queue.SimpleQueue[tuple[CleanJob, Outcome]] = queue.SimpleQueue()
        self._running: dict[TopicPartition, threading.Event] = {}
        self._threads: list[threading.Thread] = []
        self.dead_threads = 0

    def start(self) -> None:
        if not self.config.enable:
            return
        for index in range(self.config.threads):
            thread = threading.Thread(target=self._work, name=f"kafka-log-cleaner-thread-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT_S)
        self._threads.clear()

    def room(self) -> int:
        return len(self._threads) - len(self._running)

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None:
        assert job.topic_partition not in self._running and self.room() > 0, job.topic_partition
        finished = threading.Event()
        self._running[job.topic_partition] = finished
        self._jobs.put((job, check_done, finished))

    def completed(self) -> list[tuple[CleanJob, Outcome]]:
        done = []
        for _ in range(len(self._running)):
            try:
                job, outcome = self._done.get_nowait()
            except queue.Empty:
                break
            self._running.pop(job.topic_partition, None)
            done.append((job, outcome))
        return done

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        finished = self._running.get(tp)
        return finished is None or finished.wait(timeout_s)

    def _work(self) -> None:
        disk = RealDisk() if isinstance(self.disk, RealDisk) else self.disk
        offset_map = OffsetMap(map_bytes_per_thread(self.config), self.config.dedupe_buffer_load_factor)
        try:
            for item in iter(self._jobs.get, None):
                job, check_done, finished = item
                try:
                    outcome = run_clean(job, disk, offset_map, self.throttler.maybe_throttle, check_done)
                finally:
                    if isinstance(disk, RealDisk) and disk is not self.disk:
                        disk.close()  # handles of the old segments, which the swap deletes
                self._done.put((job, outcome))
                finished.set()
        except BaseException:
            self.dead_threads += 1  # Kafka's DeadThreadCount
            log.exception("Log cleaner thread %s died", threading.current_thread().name)
            raise
