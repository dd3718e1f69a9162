"""The log cleaner's workers (Kafka's `kafka-log-cleaner-thread-N`): processes of their own, the executor that
`storage.log_cleaner` hands its jobs to, so that cleaning never runs on the event loop nor takes its GIL.

Departure from Kafka, whose cleaners are threads: a clean is Python work on every record, and a thread doing it took
the GIL from the event loop at each of its socket calls (docs/benchmarks.md). At most `log.cleaner.threads`
processes, spawned when a clean needs one (never a fork of the running broker), in a session of their own at the
lowest CPU weight (Linux shares the CPU between sessions before niceness), each with an offset map of its share of
`log.cleaner.dedupe.buffer.size`, a `RealDisk` and a `Throttler` at its share of the I/O rate. A thread per worker
carries its jobs and outcomes over the pipe, so the event loop never waits on it; the outcome is joined back to this
side's job and segments (the swap compares them). An abort kills the worker, whose work is dropped anyway, and
removes its `.cleaned` files: nothing waits on a process at the lowest priority. A worker that dies on its own is
counted in `dead_threads` (what Kafka's DeadThreadCount counts) and not started again, as Kafka's threads are not.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from insync.config import CleanerConfig
from insync.server.throttler import Throttler
from insync.storage.cleaner import CleaningAborted, CleanJob, PreparedClean, run_clean
from insync.storage.disk import Disk, RealDisk
from insync.storage.log_cleaner import Outcome, map_bytes_per_thread
from insync.storage.offset_map import OffsetMap
from insync.storage.segment import LogSegment
from insync.storage.segment_swap import CLEANED_SUFFIX
from insync.types import TopicPartition

log = logging.getLogger("insync.storage")

NICE = 10  # the worker's niceness inside its session
AUTOGROUP_NICE = 19  # its session's weight against the broker's and everyone else's
PR_SET_PDEATHSIG = 1
JOIN_TIMEOUT_S = 2.0


@dataclass(slots=True)
class _Running:
    job: CleanJob
    check_done: Callable[[], None]


class _Worker:
    """A worker process, and the thread that sends it jobs and takes its outcomes (one at a time, in turn)."""

    def __init__(self, index: int, config: CleanerConfig) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.abort = context.Event()
        self.process = context.Process(target=serve, args=(child, self.abort, config), daemon=True,
                                       name=f"kafka-log-cleaner-thread-{index}")
        self.process.start()
        child.close()
        self.jobs: queue.SimpleQueue[CleanJob | None] = queue.SimpleQueue()
        self.outcomes: queue.SimpleQueue[Outcome | None] = queue.SimpleQueue()  # None: the worker is gone
        self.running: _Running | None = None
        self._pump = threading.Thread(target=self._carry, name=f"{self.process.name}-pipe", daemon=True)
        self._pump.start()

    def _carry(self) -> None:
        for job in iter(self.jobs.get, None):  # bounded by the broker: close() sends None
            try:
                self.conn.send(job)
                self.outcomes.put(self.conn.recv())
            except (OSError, EOFError):
                self.outcomes.put(None)
                return
            except Exception as exc:  # noqa: BLE001  # an outcome pickle could not rebuild; the worker goes on
                self.outcomes.put(RuntimeError(f"unreadable outcome from {self.process.name}: {exc!r}"))

    def alive(self) -> bool:
        return self.process.exitcode is None

    def stop(self) -> None:
        """Kill the process and let its thread end; nothing it was doing is kept."""
        self.jobs.put(None)
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join(JOIN_TIMEOUT_S)
        self._pump.join(JOIN_TIMEOUT_S)  # its recv ends with the process
        self.conn.close()


class CleanerProcesses:
    def __init__(self, config: CleanerConfig, disk: Disk) -> None:
        self.config = config
        self.disk = disk  # the broker's: what a stopped worker left is removed through it
        self._workers: list[_Worker] = []
        self._done: list[tuple[CleanJob, Outcome]] = []
        self._started = False
        self._spawned = 0  # workers started and not stopped by this side: at most log.cleaner.threads
        self.dead_threads = 0

    def start(self) -> None:
        self._started = self.config.enable

    def close(self) -> None:
        """The broker is stopping: every worker is stopped; a clean in progress is dropped (the log's next open
        removes its `.cleaned` files)."""
        for worker in self._workers:
            worker.stop()
        self._workers.clear()
        self._started = False

    def pids(self) -> list[int]:
        return [worker.process.pid for worker in self._workers if worker.process.pid is not None]

    def room(self) -> int:
        self._bury_dead()
        idle = sum(1 for worker in self._workers if worker.running is None)
        return idle + (self.config.threads - self._spawned) if self._started else 0

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None:
        assert self.room() > 0
        assert all(w.running is None or w.running.job.topic_partition != job.topic_partition for w in self._workers)
        try:
            worker = next((w for w in self._workers if w.running is None), None) or self._spawn()
        except OSError as exc:  # no process could be started: the clean fails, the log stays as it is
            self._done.append((job, RuntimeError(f"could not start a log cleaner process: {exc}")))
            return
        worker.abort.clear()
        worker.running = _Running(job, check_done)
        worker.jobs.put(_bare(job))

    def completed(self) -> list[tuple[CleanJob, Outcome]]:
        for worker in list(self._workers):
            self._collect(worker)
        done, self._done = self._done, []
        return done

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        """An aborted clean of `tp` is stopped at once (its worker killed); any other is waited for."""
        worker = next((w for w in self._workers if w.running is not None and w.running.job.topic_partition == tp),
                      None)
        if worker is None or self._collect(worker):
            return True
        try:
            outcome = worker.outcomes.get(timeout=timeout_s)
        except queue.Empty:
            return False
        self._finish(worker, outcome)
        return True

    def _spawn(self) -> _Worker:
        worker = _Worker(self._spawned, self.config)
        self._spawned += 1
        self._workers.append(worker)
        return worker

    def _collect(self, worker: _Worker) -> bool:
        """Take the worker's outcome if it is there; stop it if its job was aborted. True when it is free."""
        running = worker.running
        if running is None:
            return True
        try:
            running.check_done()
        except CleaningAborted as exc:
            self._stop(worker)
            self._remove_cleaned(running.job)
            self._done.append((running.job, exc))
            return True
        try:
            outcome = worker.outcomes.get_nowait()
        except queue.Empty:
            return False
        self._finish(worker, outcome)
        return True

    def _finish(self, worker: _Worker, outcome: Outcome | None) -> None:
        running = worker.running
        assert running is not None
        worker.running = None
        if outcome is None:  # the process died under the job
            self._bury(worker)
            self._remove_cleaned(running.job)
            outcome = RuntimeError(f"log cleaner process {worker.process.name} died "
                                   f"(exit code {worker.process.exitcode})")
        self._done.append((running.job, _joined(running.job, outcome)))

    def _stop(self, worker: _Worker) -> None:
        """Stop a worker on purpose: a new one may take its place."""
        worker.stop()
        self._workers.remove(worker)
        self._spawned -= 1

    def _bury_dead(self) -> None:
        for worker in [w for w in self._workers if w.running is None and not w.alive()]:
            self._bury(worker)

    def _bury(self, worker: _Worker) -> None:
        log.error("Log cleaner process %s died (exit code %s)", worker.process.name, worker.process.exitcode)
        worker.stop()
        self._workers.remove(worker)
        self.dead_threads += 1

    def _remove_cleaned(self, job: CleanJob) -> None:
        """What a stopped or dead worker wrote (the log's next open would remove it too)."""
        try:
            for name in self.disk.listdir(job.directory):
                if name.endswith(CLEANED_SUFFIX):
                    self.disk.remove(f"{job.directory}/{name}")
        except OSError as exc:
            log.warning("Could not remove the cleaned files of a stopped clean in %s: %s", job.directory, exc)


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
    assert outcome.job.topic_partition == job.topic_partition and outcome.job.generation == job.generation
    ours = {segment.base_offset: segment for segment in job.segments}
    replacements = tuple((tuple(ours[old.base_offset] for old in olds), cleaned)
                         for olds, cleaned in outcome.replacements)
    return replace(outcome, job=job, replacements=replacements)


def serve(conn: Connection, abort: Event, config: CleanerConfig) -> None:
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
        if isinstance(outcome, BaseException) and not isinstance(outcome, CleaningAborted):
            outcome = RuntimeError(f"{type(outcome).__name__}: {outcome}")  # a kind pickle carries whatever it held
        conn.send(outcome)


def _lower_priority() -> None:
    """Below every request handler (module doc), and gone with the broker (SIGTERM when its thread ends)."""
    with contextlib.suppress(OSError):
        os.setsid()
        Path("/proc/self/autogroup").write_text(str(AUTOGROUP_NICE))
    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
