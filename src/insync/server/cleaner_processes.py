"""The log cleaner's workers (Kafka's `kafka-log-cleaner-thread-N`): processes of their own, the executor that
`storage.log_cleaner` hands its jobs to, so that cleaning never runs on the event loop nor takes its GIL.

Departure from Kafka, whose cleaners are threads: a clean is Python work on every record, and a thread doing it
took the GIL from the event loop at each of its socket calls, and produce latency grew a hundredfold while a large
log was cleaned (docs/benchmarks.md). At most `log.cleaner.threads` processes, spawned when a clean
needs one (never a fork of the running broker) and niced (`NICE`: the event loops come first on a busy machine),
each own an offset map of its share of `log.cleaner.dedupe.buffer.size`, a `RealDisk` and a `Throttler` at its
share of `log.cleaner.io.max.bytes.per.second`. A job goes over a pipe with bare copies of its old segments; the
`PreparedClean` that comes back gets this side's job and segments again (the swap compares them). An abort
(`check_done` raising here) reaches the worker through its Event, checked between batches. A worker that dies
counts in `dead_threads` (Kafka's DeadThreadCount) and is not started again, as Kafka's threads are not.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from insync.config import CleanerConfig
from insync.server.throttler import Throttler
from insync.storage.cleaner import CleaningAborted, CleanJob, PreparedClean, run_clean
from insync.storage.disk import Disk, RealDisk
from insync.storage.log_cleaner import Outcome, map_bytes_per_thread
from insync.storage.offset_map import OffsetMap
from insync.storage.segment import LogSegment
from insync.types import TopicPartition

log = logging.getLogger("insync.storage")

NICE = 10  # added to a worker's niceness: request handling first, cleaning with what is left
# Linux shares the CPU between autogroups (sessions) before it looks at niceness, so a worker takes a session of its
# own and gives it the lowest weight; otherwise it competes at its broker's weight with every other process.
AUTOGROUP_NICE = 19
PR_SET_PDEATHSIG = 1
JOIN_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _Running:
    job: CleanJob
    check_done: Callable[[], None]


class _Worker:
    def __init__(self, index: int, config: CleanerConfig) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.abort = context.Event()
        self.process = context.Process(target=serve, args=(child, self.abort, config), daemon=True,
                                       name=f"kafka-log-cleaner-thread-{index}")
        self.process.start()
        child.close()
        self.running: _Running | None = None


class CleanerProcesses:
    def __init__(self, config: CleanerConfig, disk: Disk) -> None:
        self.config = config
        self.disk = disk
        self._workers: list[_Worker] = []
        self._done: list[tuple[CleanJob, Outcome]] = []
        self._started = False
        self._spawned = 0
        self.dead_threads = 0

    def start(self) -> None:
        self._started = self.config.enable

    def _free_worker(self) -> _Worker:
        """An idle worker; the next is spawned when none is (a broker that never cleans runs none)."""
        idle = next((w for w in self._workers if w.running is None), None)
        if idle is None:
            idle = _Worker(self._spawned, self.config)
            self._spawned += 1
            self._workers.append(idle)
        return idle

    def close(self) -> None:
        for worker in self._workers:
            worker.abort.set()  # a clean in progress stops at its next batch
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self._workers:
            worker.process.join(JOIN_TIMEOUT_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(JOIN_TIMEOUT_S)
            worker.conn.close()
        self._workers.clear()
        self._started = False

    def pids(self) -> list[int]:
        return [worker.process.pid for worker in self._workers if worker.process.pid is not None]

    def room(self) -> int:
        idle = sum(1 for worker in self._workers if worker.running is None)
        return idle + (self.config.threads - self._spawned) if self._started else 0

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None:
        assert all(w.running is None or w.running.job.topic_partition != job.topic_partition for w in self._workers)
        assert self.room() > 0
        worker = self._free_worker()
        worker.abort.clear()
        worker.running = _Running(job, check_done)
        worker.conn.send(_bare(job))

    def completed(self) -> list[tuple[CleanJob, Outcome]]:
        for worker in list(self._workers):
            self._collect(worker, 0)
        done, self._done = self._done, []
        return done

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        worker = next((w for w in self._workers if w.running is not None and w.running.job.topic_partition == tp),
                      None)
        return worker is None or self._collect(worker, timeout_s)

    def _collect(self, worker: _Worker, timeout_s: float) -> bool:
        """Take the worker's outcome if it is there within `timeout_s`; pass on an abort first. True when the
        worker is free (or gone)."""
        running = worker.running
        if running is None:
            return True
        outcome: Outcome
        try:
            running.check_done()
        except CleaningAborted:
            worker.abort.set()
        try:
            if not worker.conn.poll(timeout_s):
                if worker.process.is_alive():
                    return False
                raise EOFError
            received = worker.conn.recv()
        except (EOFError, OSError):
            self._workers.remove(worker)
            self.dead_threads += 1
            outcome = RuntimeError(f"log cleaner process {worker.process.name} died "
                                   f"(exit code {worker.process.exitcode})")
            log.error("%s", outcome)
        except Exception as exc:  # noqa: BLE001  # an outcome pickle could not rebuild: the worker goes on
            outcome = RuntimeError(f"unreadable outcome from {worker.process.name}: {exc!r}")
        else:
            outcome = _joined(running.job, received)
        worker.running = None
        self._done.append((running.job, outcome))
        return True


def _bare(job: CleanJob) -> CleanJob:
    """The job with copies of its segments that hold only what a clean reads, and no open descriptor."""
    segments = []
    for segment in job.segments:
        copy = LogSegment(RealDisk(), segment.directory, segment.base_offset, segment.created_ms,
                          segment.index_interval_bytes, segment.file_suffix)
        copy.size, copy.next_offset = segment.size, segment.next_offset
        segments.append(copy)
    return replace(job, segments=tuple(segments), last_offsets_of_producers=dict(job.last_offsets_of_producers))


def _joined(job: CleanJob, outcome: Outcome) -> Outcome:
    """A worker's outcome with this side's job and old segments."""
    if not isinstance(outcome, PreparedClean):
        return outcome
    ours = {segment.base_offset: segment for segment in job.segments}
    replacements = tuple((tuple(ours[old.base_offset] for old in olds), cleaned)
                         for olds, cleaned in outcome.replacements)
    return replace(outcome, job=job, replacements=replacements)


def serve(conn: Connection, abort: Any, config: CleanerConfig) -> None:
    """A worker: cleans each job it is sent until it is sent None, its pipe closes or its broker is gone."""
    broker = os.getppid()
    _lower_priority()
    disk = RealDisk()
    offset_map = OffsetMap(map_bytes_per_thread(config), config.dedupe_buffer_load_factor)
    throttler = Throttler(config.io_max_bytes_per_second / max(1, config.threads))

    def check_done() -> None:
        if abort.is_set() or os.getppid() != broker:
            raise CleaningAborted("the broker asked the clean to stop, or is gone")

    while True:  # bounded by the broker: it sends None, or its end of the pipe closes with it
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            outcome = run_clean(job, disk, offset_map, throttler.maybe_throttle, check_done)
        finally:
            disk.close()  # handles of the old segments, which the swap deletes
        try:
            conn.send(outcome)
        except (TypeError, AttributeError, ValueError) as exc:  # an error of a kind pickle cannot carry
            conn.send(RuntimeError(f"{outcome!r} ({exc})"))


def _lower_priority() -> None:
    """Below every request handler (module doc), and gone with the broker (SIGTERM when its thread ends)."""
    with contextlib.suppress(OSError):
        os.setsid()
        Path("/proc/self/autogroup").write_text(str(AUTOGROUP_NICE))
    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
