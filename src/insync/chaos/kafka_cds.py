"""Class-data sharing for the reference Kafka's JVMs: each JVM maps the classes an earlier one loaded instead of
loading them from a hundred jars again, which shortens every tool's start and a node's.

`flags(dist, kind)` gives the options for a JVM of `kind` (`server`: brokers and controllers; `tools`: the
command-line tools; `format`: kafka-storage's format). With a published archive for that kind, the JVM uses it.
Without one, the first JVM to ask trains it (`-XX:ArchiveClassesAtExit`, written when it exits, a clean stop or
SIGTERM) while the others run plain; the next call publishes the archive once its writer is gone and a JVM maps it
with `-Xshare:on`. A truncated archive would crash a JVM that maps it, hence the check. An archive is kept per
release, JDK and classpath in the release's cache directory; CDS's own log lines are off, so a tool prints the same
with or without one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from insync.chaos.kafka_dist import KafkaDist

KINDS = ("server", "tools", "format")
CHECK_TIMEOUT_S = 60.0
START_GRACE_S = 120.0  # a marker is written before its JVM starts, whose command line shows once its exec is done
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # an unusable archive warns on stdout, which tools print to
NO_CRASH_FILES = ("-XX:ErrorFile=/dev/null", "-XX:-CreateCoredumpOnCrash")  # a bad archive crashes the check
_TRAINER = ".trainer"  # beside the archive: the part file its training JVM writes at exit
_JDK: dict[str, str] = {}


def flags(dist: KafkaDist, kind: str) -> tuple[str, ...]:
    """The JVM options that use, or train, the class archive of `kind` for this release and JDK."""
    assert kind in KINDS, kind
    archive = _archive(dist, kind)
    if archive is None:
        return ()
    publish(archive, dist.classpath)
    if archive.is_file():
        return (f"-XX:SharedArchiveFile={archive}", *QUIET)
    trainer = archive.with_name(archive.name + _TRAINER)
    part = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:12]}.part")
    try:
        with open(trainer, "x", encoding="utf-8") as marker:  # one trainer at a time, across processes
            marker.write(str(part))
    except FileExistsError:
        return ()
    return (f"-XX:ArchiveClassesAtExit={part}", *QUIET)


def publish(archive: Path, classpath: str) -> None:
    """Publish (or discard) what the trainer of `archive` wrote, once its JVM is gone; a no-op otherwise."""
    trainer = archive.with_name(archive.name + _TRAINER)
    try:
        part = Path(trainer.read_text(encoding="utf-8"))
        age_s = time.time() - trainer.stat().st_mtime
    except (FileNotFoundError, ValueError):
        return
    if _running(str(part)) or (not part.is_file() and age_s < START_GRACE_S):
        return
    if part.is_file() and not archive.is_file() and _usable(part, classpath):
        with contextlib.suppress(FileNotFoundError):  # another process published it first
            os.replace(part, archive)
    part.unlink(missing_ok=True)
    trainer.unlink(missing_ok=True)  # a trainer killed before it could write leaves no part: the next one trains


def _archive(dist: KafkaDist, kind: str) -> Path | None:
    jdk = _jdk_tag()
    if jdk is None:
        return None
    directory = dist.libs.parent / "cds"
    directory.mkdir(exist_ok=True)
    # An archive maps only under the classpath it was written with (a release with Kafka Streams has a longer one).
    classpath = hashlib.sha256(dist.classpath.encode()).hexdigest()[:8]
    return directory / f"{kind}-{jdk}-{classpath}.jsa"


def _jdk_tag() -> str | None:
    """A short tag of the `java` on PATH (its real path, size and mtime): an archive only maps into the JDK that
    wrote it."""
    found = shutil.which("java")
    if found is None:
        return None
    real = os.path.realpath(found)
    if real not in _JDK:
        stat = os.stat(real)
        _JDK[real] = hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return _JDK[real]


def _running(needle: str) -> bool:
    """Whether a live process names `needle` on its command line (the trainer, not yet exited)."""
    wanted = needle.encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                    if wanted in cmdline.read():
                        return True
            except OSError:  # gone meanwhile
                continue
    return False


def _usable(part: Path, classpath: str) -> bool:
    """Whether a JVM maps `part` whole (`-Xshare:on` fails rather than fall back)."""
    try:
        done = subprocess.run(["java", f"-XX:SharedArchiveFile={part}", "-Xshare:on", *QUIET, *NO_CRASH_FILES,
                               "-cp", classpath, "-version"],
                              capture_output=True, timeout=CHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0
