"""Kafka's own command-line tools, run as Java mains from an assembled release (chaos/kafka_dist.py).

`run(dist, "kafka-topics", ["--bootstrap-server", ..., "--list"])` is what `bin/kafka-topics.sh --list` does:
the tool's main class on the release's classpath with the tarball's tools logging (WARN and above to stderr).
It serves the compatibility checks (the same command against Kafka and insync) and the comparisons that use
Kafka's clients as the load (producer and consumer perf tests, end-to-end latency).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from insync.chaos import kafka_cds
from insync.chaos.kafka_dist import KafkaDist
from insync.config import ConfigError

TOOL_TIMEOUT_S = 180.0
# Admin tools run for a second: the client compiler alone starts them for less CPU. The clients that carry load
# get the full JIT and room to batch.
ADMIN_JVM = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
LOAD_JVM = ("-Xmx512m", "-XX:+UseG1GC")
LOAD_TOOLS = frozenset({"kafka-producer-perf-test", "kafka-consumer-perf-test", "kafka-e2e-latency",
                        "kafka-verifiable-producer", "kafka-verifiable-consumer"})
# bin/<script>.sh -> main class, as of Kafka 4.x (3.x kept a few in the core jar under `kafka.`).
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
}


@dataclass(frozen=True, slots=True)
class ToolRun:
    tool: str
    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float


def tools_log_config(dist: KafkaDist) -> Path:
    """The tarball's tools logging (WARN to stderr), written once beside the release's jars."""
    if dist.major >= 4:
        path = dist.libs.parent / "tools-log4j2.yaml"
        text = ("Configuration:\n  Appenders:\n    Console:\n      name: STDERR\n      target: SYSTEM_ERR\n"
                "      PatternLayout:\n        pattern: \"[%d] %p %m (%c)%n\"\n  Loggers:\n    Root:\n"
                "      level: WARN\n      AppenderRef:\n        - ref: STDERR\n")
    else:
        path = dist.libs.parent / "tools-log4j.properties"
        text = ("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                "log4j.appender.stderr.Target=System.err\n")
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def command(dist: KafkaDist, tool: str, args: list[str]) -> list[str]:
    if tool not in MAIN_CLASSES:
        raise ConfigError(f"unknown Kafka tool {tool!r}: one of {', '.join(sorted(MAIN_CLASSES))}")
    jvm = (*(LOAD_JVM if tool in LOAD_TOOLS else ADMIN_JVM), *kafka_cds.flags(dist, "tools"))
    return _java(dist, jvm, dist.classpath, MAIN_CLASSES[tool], args)


def _java(dist: KafkaDist, jvm: tuple[str, ...], classpath: str, main: str, args: list[str]) -> list[str]:
    config = tools_log_config(dist)
    flag = f"-Dlog4j2.configurationFile={config}" if dist.major >= 4 else f"-Dlog4j.configuration=file:{config}"
    return ["java", *jvm, flag, "-cp", classpath, main, *args]


def compile_driver(dist: KafkaDist, source: Path) -> Path:
    """Compile a test driver's Java source against the release's jars, once per source text; returns the
    directory of its classes."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = dist.libs.parent / "drivers" / f"{source.stem}-{digest}"
    if not (classes / f"{source.stem}.class").exists():
        if shutil.which("javac") is None:
            raise ConfigError(f"cannot compile {source}: no javac on PATH (make kafka installs a JDK)")
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["javac", "-nowarn", "-cp", dist.classpath, "-d", str(classes), str(source)],
                              capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise ConfigError(f"javac could not compile {source}:\n{done.stderr[-2000:]}")
    return classes


def run(dist: KafkaDist, tool: str, args: list[str], stdin: str | None = None,
        timeout_s: float = TOOL_TIMEOUT_S, cwd: Path | None = None) -> ToolRun:
    """Run one tool to completion (killed at `timeout_s`, reported as exit code -9)."""
    return _run(command(dist, tool, args), tool, args, stdin, timeout_s, cwd)


def driver_command(dist: KafkaDist, source: Path, args: list[str]) -> list[str]:
    """The command line of a test driver whose main class is named as its source file, compiled first (once): for
    a driver the caller runs beside other work and stops itself."""
    classpath = f"{compile_driver(dist, source)}:{dist.classpath}"
    return _java(dist, LOAD_JVM, classpath, source.stem, args)


def run_driver(dist: KafkaDist, source: Path, args: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> ToolRun:
    """Compile (once) and run a test driver to completion."""
    return _run(driver_command(dist, source, args), source.stem, args, None, timeout_s, None)


def _run(argv: list[str], tool: str, args: list[str], stdin: str | None, timeout_s: float,
         cwd: Path | None) -> ToolRun:
    started = time.monotonic()
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=timeout_s, cwd=cwd, check=False)
        exit_code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        exit_code = -9
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = f"killed after {timeout_s:.0f} s"
    return ToolRun(tool, tuple(args), exit_code, stdout, stderr, time.monotonic() - started)
