"""A Spark standalone cluster for a test: a master and workers started from pyspark's own distribution
(`spark-class`), each a process in a session of its own on 127.0.0.1, with its log and work dir under the test's
directory; and `insync analyze` run as a command, in a session of its own too. Everything started here is killed
(its whole process group: a worker's executors are its children) when the test ends, whatever happens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

import insync
from insync.chaos.cluster import free_ports
from insync.waiting import wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_CORES = 1
WORKER_MEMORY = "1g"
START_TIMEOUT_S = 90.0  # a JVM's start on two busy cores
STOP_GRACE_S = 10.0
HTTP_TIMEOUT_S = 5.0
# The master's web UI is asked directly: a proxy from the environment must not stand between it and the test.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:P
    ui_url: str  # the master's web UI


def master_state(ui_url: str) -> dict[str, Any]:
    """The master's state as its web UI gives it in JSON (`workers`, each with its `state`, `cores`, ...)."""
    with _DIRECT.open(f"{ui_url}/json", timeout=HTTP_TIMEOUT_S) as response:
        state: dict[str, Any] = json.load(response)
    return state


def alive_workers(ui_url: str) -> list[dict[str, Any]]:
    return [w for w in master_state(ui_url)["workers"] if w["state"] == "ALIVE"]


@contextmanager
def _process(argv: Sequence[str], log: Path, env: dict[str, str], cwd: Path | None = None,
             output: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` running in a session of its own, its standard error in `log` (its output too, unless `output` is
    given); its whole process group killed on exit."""
    with open(log, "wb") as err, open(output or os.devnull, "wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out if output else err,
                                   stderr=err, env=env, cwd=cwd, start_new_session=True)
    try:
        yield process
    finally:
        _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group (a worker then stops its executors), then SIGKILL to whatever of the group is
    left once the process itself has gone or would not go."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
    process.wait(timeout=STOP_GRACE_S)


def _still_running(process: subprocess.Popen[bytes], log: Path) -> None:
    if process.poll() is not None:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{process.args!r} exited with {process.returncode}:\n{tail}")


def _env(directory: Path) -> dict[str, str]:
    """The daemons' environment: Spark's home, the loopback, the executors' scratch space under `directory`. (The
    executors' Python is the driver's to say: insync.spark.session does.)"""
    local_dirs = directory / "local"
    local_dirs.mkdir(parents=True, exist_ok=True)
    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)  # pip's pyspark is one
    return os.environ | {"SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(local_dirs)}


@contextmanager
def running(directory: Path, workers: int = 2) -> Iterator[StandaloneCluster]:
    """A master and `workers` workers (WORKER_CORES cores, WORKER_MEMORY each), all registered when this yields."""
    assert workers > 0, workers
    directory.mkdir(parents=True, exist_ok=True)
    env = _env(directory)
    spark_class = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    master_port, ui_port, *worker_ui_ports = free_ports(2 + workers)
    cluster = StandaloneCluster(f"spark://127.0.0.1:{master_port}", f"http://127.0.0.1:{ui_port}")
    with ExitStack() as stack:
        log = directory / "master.log"
        master = stack.enter_context(_process([spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                               str(master_port), "--webui-port", str(ui_port)], log, env))

        def master_up() -> bool:
            _still_running(master, log)
            return "workers" in master_state(cluster.ui_url)

        wait_until(master_up, START_TIMEOUT_S, f"the Spark master's web UI at {cluster.ui_url}",
                   retry_on=(OSError,))
        started = []
        for n, worker_ui_port in enumerate(worker_ui_ports, start=1):
            work_dir = directory / f"worker-{n}"
            work_dir.mkdir()
            log = directory / f"worker-{n}.log"
            started.append((stack.enter_context(_process(
                [spark_class, WORKER_CLASS, cluster.master_url, "--host", "127.0.0.1", "--cores", str(WORKER_CORES),
                 "--memory", WORKER_MEMORY, "--webui-port", str(worker_ui_port), "--work-dir", str(work_dir)],
                log, env)), log))

        def all_registered() -> bool:
            for process, worker_log in started:
                _still_running(process, worker_log)
            return len(alive_workers(cluster.ui_url)) == workers

        wait_until(all_registered, START_TIMEOUT_S, f"{workers} workers ALIVE at {cluster.ui_url}",
                   retry_on=(OSError,))
        yield cluster


def analyze(argv: Sequence[str], cwd: Path, name: str, timeout_s: float) -> str:
    """`insync analyze ARGV...` run in `cwd` as a process of its own (a Spark driver of its own), its standard
    error in `cwd`/NAME.log; its standard output. Its process group is killed if it outlives `timeout_s`."""
    # The source tree first, absolute: the command runs in another directory than the test.
    source = str(Path(insync.__file__).resolve().parents[1])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)}
    log, output = cwd / f"{name}.log", cwd / f"{name}.out"
    with _process([sys.executable, "-m", "insync.cli.main", "analyze", *argv], log, env, cwd, output) as process:
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"insync analyze {' '.join(argv)} ran over {timeout_s:g} s; see {log}") from None
    assert code == 0, f"insync analyze {' '.join(argv)} exited with {code}:\n{log.read_text(errors='replace')[-4000:]}"
    return output.read_text()
