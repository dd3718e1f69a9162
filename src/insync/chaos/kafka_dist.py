"""Apache Kafka assembled from Maven Central, for running real Kafka beside insync.

`assemble(version)` writes a small pom naming `org.apache.kafka:kafka_2.13` and `kafka-tools` at that version,
copies them and their dependencies into `$INSYNC_CACHE/kafka/<version>/libs` (default `~/.cache/insync`) with
`mvn dependency:copy-dependencies`, then adds the log4j binding the release tarball ships in `libs/` and the
published poms leave out (without it a 4.x broker logs nothing). A finished assembly is marked with the recipe
that made it and reused; an interrupted one is redone. Nothing in insync calls this unless asked for Kafka.

`log_config(dist, directory)` writes the tarball's logging layout (server.log, controller.log, state-change.log,
kafka-request.log, log-cleaner.log, kafka-authorizer.log) as that line does: log4j2 YAML (4.x), reload4j (3.x).

`with_streams(version)` adds the Kafka Streams library the tarball ships (`kafka-streams`, RocksDB) into
`streams-libs/` beside `libs/`, without the jars `libs/` holds, for the Streams test driver.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from insync import maven
from insync.config import ConfigError

# What `kafka`, `kafka:4.1`, `kafka:4` and `kafka:3.9` mean: the newest release of each line Maven served when
# these were chosen. `kafka:X.Y.Z` asks for an exact release.
VERSION_ALIASES = {"": "4.1.2", "4.1": "4.1.2", "4": "4.4.0", "latest": "4.4.0", "3.9": "3.9.1", "3": "3.9.1"}
RECIPE = "kafka_2.13+kafka-tools+log4j-binding v1"
MARKER = ".assembled"
STREAMS_RECIPE = "kafka-streams v1"
STREAMS_MARKER = ".streams-assembled"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>insync</groupId><artifactId>kafka-dist</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""
_STREAMS_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>insync</groupId><artifactId>kafka-streams-dist</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""
# An artifact's file name is `<artifactId>-<version>.jar`, the version starting with a digit.
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


@dataclass(frozen=True, slots=True)
class KafkaDist:
    """One assembled Kafka release: its version and the directory of its jars."""

    version: str
    libs: Path
    extra_libs: tuple[Path, ...] = ()  # libraries beside the broker's (Kafka Streams), for test drivers

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def kraft_only(self) -> bool:
        """4.0 removed ZooKeeper; 3.x here runs with ZooKeeper, as the seeds' era did."""
        return self.major >= 4

    @property
    def classpath(self) -> str:
        jars = sorted(str(p) for p in self.libs.glob("*.jar"))
        return ":".join(jars + sorted(str(p) for d in self.extra_libs for p in d.glob("*.jar")))


def resolve_version(requested: str) -> str:
    """`4.1` -> `4.1.2`; an exact `X.Y.Z` is kept; anything else is refused naming the choices."""
    if requested in VERSION_ALIASES:
        return VERSION_ALIASES[requested]
    if re.fullmatch(r"[34]\.\d+\.\d+", requested):
        return requested
    choices = ", ".join(sorted(k for k in VERSION_ALIASES if k))
    raise ConfigError(f"unknown Kafka version {requested!r}: give X.Y.Z (3.x or 4.x) or one of {choices}")


def cache_root() -> Path:
    return maven.cache_root() / "kafka"


def assembled(version: str) -> KafkaDist | None:
    """The cached release, if a finished assembly of the current recipe is there."""
    home = cache_root() / resolve_version(version)
    marker = home / MARKER
    if marker.exists() and marker.read_text() == RECIPE:
        return KafkaDist(resolve_version(version), home / "libs")
    return None


def assemble(version: str, log: bool = True) -> KafkaDist:
    """The release's jars in the cache, fetching them with Maven the first time."""
    exact = resolve_version(version)
    found = assembled(exact)
    if found is not None:
        return found
    home = cache_root() / exact
    shutil.rmtree(home, ignore_errors=True)
    libs = home / "libs"
    libs.mkdir(parents=True)
    (home / "pom.xml").write_text(_POM.format(v=exact))
    if log:
        print(f"assembling Apache Kafka {exact} from Maven Central into {home} (once)", flush=True)
    maven.run(home, ["dependency:copy-dependencies", f"-DoutputDirectory={libs}"], f"Kafka {exact}")
    binding = _log4j_binding(libs)
    if binding is not None:
        maven.run(home, ["dependency:copy", f"-Dartifact={binding}", f"-DoutputDirectory={libs}"],
                  f"the log4j binding {binding}")
    (home / MARKER).write_text(RECIPE)
    return KafkaDist(exact, libs)


def with_streams(version: str, log: bool = True) -> KafkaDist:
    """The release with its Kafka Streams jars on the classpath, fetching them with Maven the first time."""
    dist = assemble(version, log)
    home = dist.libs.parent
    streams = home / "streams-libs"
    marker = home / STREAMS_MARKER
    if not (marker.exists() and marker.read_text() == STREAMS_RECIPE):
        marker.unlink(missing_ok=True)
        shutil.rmtree(streams, ignore_errors=True)
        work = home / "streams-pom"
        work.mkdir(exist_ok=True)
        (work / "pom.xml").write_text(_STREAMS_POM.format(v=dist.version))
        if log:
            print(f"fetching Kafka Streams {dist.version} from Maven Central into {streams} (once)", flush=True)
        # A jar the broker's set already has (kafka-clients, slf4j, jackson) stays out: two versions of one
        # library on a classpath load whichever comes first.
        held = sorted({m["artifact"] for m in map(_JAR_NAME.match, (p.name for p in dist.libs.glob("*.jar"))) if m})
        assert "kafka-clients" in held, f"no kafka-clients in {dist.libs}"
        maven.run(work, ["dependency:copy-dependencies", f"-DoutputDirectory={streams}",
                         "-DexcludeArtifactIds=" + ",".join(held)], f"Kafka Streams {dist.version}")
        if not any(streams.glob(f"kafka-streams-{dist.version}.jar")):
            raise ConfigError(f"Maven brought no kafka-streams-{dist.version}.jar into {streams}")
        marker.write_text(STREAMS_RECIPE)
    return replace(dist, extra_libs=(streams,))


def _log4j_binding(libs: Path) -> str | None:
    """The slf4j -> log4j2 binding matching the jars Maven brought, or None where a binding came with them (3.x
    ships slf4j-reload4j)."""
    names = [p.name for p in libs.glob("*.jar")]
    if any(n.startswith(("slf4j-reload4j-", "log4j-slf4j")) for n in names):
        return None
    core = next((re.fullmatch(r"log4j-core-(.+)\.jar", n) for n in names if n.startswith("log4j-core-")), None)
    if core is None:
        raise ConfigError(f"no log4j-core among the jars in {libs}: cannot choose a logging binding")
    slf4j2 = any(n.startswith("slf4j-api-2.") for n in names)
    artifact = "log4j-slf4j2-impl" if slf4j2 else "log4j-slf4j-impl"
    return f"org.apache.logging.log4j:{artifact}:{core.group(1)}"


# The release tarball's logging layout: which logger goes to which file.
_FILES = (("KafkaAppender", "server.log"), ("StateChangeAppender", "state-change.log"),
          ("RequestAppender", "kafka-request.log"), ("CleanerAppender", "log-cleaner.log"),
          ("ControllerAppender", "controller.log"), ("AuthorizerAppender", "kafka-authorizer.log"))
# (logger, level, appender) for loggers that do not also go to server.log.
_ROUTES = (("kafka.request.logger", "WARN", "RequestAppender"),
           ("kafka.network.RequestChannel$", "WARN", "RequestAppender"),
           ("org.apache.kafka.controller", "INFO", "ControllerAppender"),
           ("kafka.controller", "TRACE", "ControllerAppender"),
           ("kafka.log.LogCleaner", "INFO", "CleanerAppender"),
           ("org.apache.kafka.storage.internals.log.LogCleaner", "INFO", "CleanerAppender"),
           ("state.change.logger", "INFO", "StateChangeAppender"),
           ("kafka.authorizer.logger", "INFO", "AuthorizerAppender"))
PATTERN = "[%d] %p %m (%c)%n"


def log_config(dist: KafkaDist, directory: Path) -> tuple[Path, str]:
    """Write the logging config for `dist` into `directory`; returns it and the JVM flag that selects it."""
    if dist.major >= 4:
        path = directory / "log4j2.yaml"
        path.write_text(_log4j2_yaml())
        return path, f"-Dlog4j2.configurationFile={path}"
    path = directory / "log4j.properties"
    path.write_text(_log4j1_properties())
    return path, f"-Dlog4j.configuration=file:{path}"


def _log4j2_yaml() -> str:
    lines = ["Configuration:", "  Appenders:", "    Console:", "      name: STDOUT",
             "      PatternLayout:", f'        pattern: "{PATTERN}"', "    RollingFile:"]
    for name, file in _FILES:
        lines += [f"      - name: {name}", f'        fileName: "${{sys:kafka.logs.dir}}/{file}"',
                  f'        filePattern: "${{sys:kafka.logs.dir}}/{file}.%d{{yyyy-MM-dd-HH}}"',
                  "        PatternLayout:", f'          pattern: "{PATTERN}"',
                  "        TimeBasedTriggeringPolicy:", "          modulate: true", "          interval: 1"]
    lines += ["  Loggers:", "    Root:", "      level: INFO", "      AppenderRef:", "        - ref: STDOUT",
              "        - ref: KafkaAppender", "    Logger:"]
    for logger, level, appender in _ROUTES:
        lines += [f"      - name: {logger}", f"        level: {level}", "        additivity: false",
                  "        AppenderRef:", f"          ref: {appender}"]
    return "\n".join(lines) + "\n"


def _log4j1_properties() -> str:
    lines = ["log4j.rootLogger=INFO, stdout, KafkaAppender",
             "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
             "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
             f"log4j.appender.stdout.layout.ConversionPattern={PATTERN}"]
    for name, file in _FILES:
        prefix = f"log4j.appender.{name}"
        lines += [f"{prefix}=org.apache.log4j.DailyRollingFileAppender", f"{prefix}.DatePattern='.'yyyy-MM-dd-HH",
                  f"{prefix}.File=${{kafka.logs.dir}}/{file}", f"{prefix}.layout=org.apache.log4j.PatternLayout",
                  f"{prefix}.layout.ConversionPattern={PATTERN}"]
    for logger, level, appender in _ROUTES:
        lines += [f"log4j.logger.{logger}={level}, {appender}", f"log4j.additivity.{logger}=false"]
    return "\n".join(lines) + "\n"
