"""The shared session builder's settings for local masters and standalone masters on this machine
(insync.spark.session; a real standalone cluster runs the analysis in test_spark_standalone.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from insync.spark import session


def test_a_local_session_runs_in_utc_on_loopback(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"


def test_a_local_session_collects_garbage_with_the_throughput_collector(spark: SparkSession) -> None:
    # The JVM's own names for its collectors: the parallel collector's young and old generations, not G1's.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    names = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert names == {"PS Scavenge", "PS MarkSweep"}, names
    assert "-Duser.timezone=UTC" in spark.conf.get("spark.driver.extraJavaOptions")


def test_a_local_session_compiles_huge_generated_methods(spark: SparkSession) -> None:
    # Spark's generated code for a wide stage is one method over HotSpot's 8,000-byte limit for compiling it.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert hotspot.getVMOption("DontCompileHugeMethods").getValue() == "false"


@pytest.mark.parametrize(("master", "loopback"), [
    ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True), ("spark://127.0.0.1:1,localhost:2", True),
    ("spark://10.0.0.5:7077", False), ("spark://127.0.0.1:1,spark-2:7077", False), ("local[*]", False),
    ("yarn", False), ("k8s://https://127.0.0.1:6443", False)])
def test_only_standalone_masters_on_this_machine_bind_a_cluster_driver_to_loopback(master: str,
                                                                                   loopback: bool) -> None:
    assert session.is_loopback_cluster(master) is loopback


@pytest.mark.parametrize(("mode", "offered"), [("[always] madvise never", True), ("always [madvise] never", True),
                                               ("always madvise [never]", False), ("", False)])
def test_huge_pages_are_asked_for_only_where_the_kernel_offers_them(tmp_path: Path, mode: str,
                                                                    offered: bool) -> None:
    mode_file = tmp_path / "enabled"
    mode_file.write_text(mode + "\n")
    assert session._kernel_offers_huge_pages(str(mode_file)) is offered
    assert session._kernel_offers_huge_pages(str(tmp_path / "absent")) is False  # not Linux, or no THP


def test_the_running_session_asks_for_huge_pages_as_the_kernel_allows(spark: SparkSession) -> None:
    options = spark.conf.get("spark.driver.extraJavaOptions")
    assert ("-XX:+UseTransparentHugePages" in options) is session._kernel_offers_huge_pages(), options


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the platform has no Unix domain sockets")
def test_python_workers_are_reached_over_unix_domain_sockets(spark: SparkSession) -> None:
    assert spark.conf.get("spark.python.unix.domain.socket.enabled") == "true"
    plus_one = F.udf(lambda n: n + 1, LongType())  # a Python worker round trip over that socket
    assert [row[0] for row in spark.range(3).select(plus_one("id")).collect()] == [1, 2, 3]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the platform has no Unix domain sockets")
def test_a_session_never_stopped_leaves_no_worker_socket_behind() -> None:
    # A short directory of its own: a Unix socket's path is at most 107 bytes, and pytest's tmp_path under an
    # xdist worker (`.../pytest-N/popen-gw1/test_a_session_never_stopped_l0/`) leaves too few for Spark's name.
    with tempfile.TemporaryDirectory(prefix="sock", dir="/tmp") as short:
        _run_and_check_socket_dir(Path(short))


def _run_and_check_socket_dir(tmp_path: Path) -> None:
    program = (
        "from pyspark.sql import functions as F\n"
        "from pyspark.sql.types import LongType\n"
        "from insync.spark.session import build_session\n"
        f"spark = build_session('local[1]', conf={{'spark.python.unix.domain.socket.dir': {str(tmp_path)!r}}})\n"
        "plus_one = F.udf(lambda n: n + 1, LongType())\n"
        "assert spark.range(2).select(plus_one('id')).count() == 2\n"
        "import glob; print(len(glob.glob(" + repr(str(tmp_path / ".*.sock")) + ")))\n"  # the daemon's, while running
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=110, check=True)
    assert done.stdout.split()[-1] == "1", done.stdout  # the worker daemon listened there...
    assert not list(tmp_path.glob(".*.sock"))  # ...and the exit hook's stop() removed it
