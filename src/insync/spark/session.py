"""The shared SparkSession builder: one configuration for the CLI, the benchmark and the tests.

Spark is pinned to UTC everywhere (session time zone, JVM defaults, parquet timestamps stored as UTC instants) so
that no output depends on the machine's zone. Local masters, and standalone masters on this machine (whose
executors, JVMs of their own, connect back to the driver), bind to 127.0.0.1 (Spark otherwise picks a non-loopback
address, REFERENCE 14). Python workers run the driver's interpreter (PYSPARK_PYTHON, which has pyarrow).

Local masters also talk to their Python workers over Unix domain sockets instead of loopback TCP
(`spark.python.unix.domain.socket.enabled`, Spark 4.1+, off by default), where the platform has them: every
Arrow batch a Python data source yields crosses that socket, and a Unix socket costs less time and CPU than TCP.
pyspark's worker daemon removes its socket file only when the session stops, so a session built here is also
stopped when the interpreter exits (a program that never calls `stop()` would otherwise leave a `.<uuid>.sock`
in the temp dir).
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

LOCAL_DRIVER_MEMORY = "4g"  # local masters run the executors inside the driver JVM
LOCAL_SHUFFLE_PARTITIONS_PER_CORE = 4
UTC_JVM = "-Duser.timezone=UTC"
# Java 17's default collector, G1, runs concurrent marking threads beside the tasks; on a small machine they take
# the cores the tasks need. The throughput collector suits a batch of short-lived rows: every stage of
# `insync analyze` runs faster with it, parsing most.
LOCAL_GC = "-XX:+UseParallelGC"
# Transparent huge pages for the heap, which shorten `insync analyze`, where the kernel offers them (Linux with THP
# `always` or `madvise`; elsewhere the JVM would warn at every start).
LOCAL_HUGE_PAGES = "-XX:+UseTransparentHugePages"
THP_MODE_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"
# HotSpot leaves a method of more than 8,000 bytes of bytecode to the interpreter. Spark's generated code for a
# stage with many expressions (the Kafka log parser's CASE over line kinds) passes that, and such a stage runs
# markedly slower interpreted than compiled.
LOCAL_JIT = "-XX:-DontCompileHugeMethods"
# PySpark's DataFrame debugging records the Python call site of every Column and DataFrame call in the JVM, four
# more py4j round trips each, which is most of the time building the analysis's plans (thousands of expressions).
# Without it, an error in a query names the failing expression but not the Python line that built it.
DATAFRAME_DEBUGGING = "false"


def _kernel_offers_huge_pages(mode_file: str = THP_MODE_FILE) -> bool:
    """True when the kernel's THP mode (the bracketed word of `mode_file`) lets a process ask for huge pages."""
    try:
        with open(mode_file, encoding="ascii") as f:
            text = f.read()
    except OSError:
        return False
    return "[always]" in text or "[madvise]" in text


def local_jvm_options() -> str:
    """The driver JVM's options on a local master (where the executors run inside it): UTC, the throughput
    collector, huge methods compiled, huge pages where offered."""
    options = [UTC_JVM, LOCAL_GC, LOCAL_JIT]
    if _kernel_offers_huge_pages():
        options.append(LOCAL_HUGE_PAGES)
    return " ".join(options)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
STANDALONE_SCHEME = "spark://"


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def is_loopback_cluster(master: str) -> bool:
    """True for a standalone master (or, with high availability, every one of them) on this machine."""
    if not master.startswith(STANDALONE_SCHEME):
        return False
    hosts = [address.rpartition(":")[0] or address for address in master.removeprefix(STANDALONE_SCHEME).split(",")]
    return all(host in LOOPBACK_HOSTS for host in hosts)


def build_session(master: str = "local[*]", *, app_name: str = "insync", shuffle_partitions: int | None = None,
                  conf: Mapping[str, str] | None = None, jars: Sequence[str] = ()) -> SparkSession:
    """Start (or return the running) SparkSession for `master`, in UTC, with `jars` on its classpath (they take
    effect only for a session this call starts: the JVM's classpath is fixed when it launches)."""
    assert master, "master must be a Spark master URL"
    assert all(jar.endswith(".jar") for jar in jars), jars
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    local = is_local_master(master)
    # A cluster elsewhere must reach the driver at an address of this machine's that it can route to, which is
    # Spark's own choice (or the operator's `spark.driver.host`); one on this machine can use the loopback.
    loopback = local or is_loopback_cluster(master)
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    driver_jvm = local_jvm_options() if local else UTC_JVM  # a cluster's executors are its operator's to tune
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.sql.dataFrameDebugging.enabled", DATAFRAME_DEBUGGING)
               .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
               .config("spark.driver.extraJavaOptions", driver_jvm)
               .config("spark.executor.extraJavaOptions", UTC_JVM))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if loopback:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if local:
        builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
        if hasattr(socket, "AF_UNIX"):
            builder = builder.config("spark.python.unix.domain.socket.enabled", "true")
    if shuffle_partitions is None and local:
        # Spark's default of 200 shuffle partitions is sized for clusters: on a laptop it makes each shuffle
        # 200 tiny tasks. A few per core keep both cores busy and the tasks few.
        shuffle_partitions = LOCAL_SHUFFLE_PARTITIONS_PER_CORE * (os.cpu_count() or 1)
    if shuffle_partitions is not None:
        assert shuffle_partitions > 0, shuffle_partitions
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    atexit.register(spark.stop)  # a no-op for a session already stopped
    spark.sparkContext.setLogLevel("ERROR")
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    return spark
