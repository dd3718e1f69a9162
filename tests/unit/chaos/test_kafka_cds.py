"""chaos/kafka_cds.py with a real JVM: one trainer at a time, its archive published only once its JVM is gone and
only when a JVM maps it whole, a dead trainer replaced, and a JVM using the archive prints what it printed before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from insync.chaos import kafka_cds
from insync.chaos.kafka_dist import KafkaDist
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
if shutil.which("java") is None:
    pytest.skip("no java on PATH (make setup installs one)", allow_module_level=True)


@pytest.fixture
def dist(tmp_path: Path) -> KafkaDist:
    """A release of one real jar (pyspark ships it): enough for a JVM to load classes from a classpath."""
    libs = tmp_path / "kafka" / "libs"
    libs.mkdir(parents=True)
    jar = next((Path(pyspark.__file__).parent / "jars").glob("commons-lang3-*.jar"))
    shutil.copy(jar, libs / jar.name)
    return KafkaDist("4.1.2", libs)


def _java(dist: KafkaDist, flags: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", *flags, "-cp", dist.classpath, "-version"], capture_output=True, text=True,
                          timeout=60, check=False)


def _archive(dist: KafkaDist, kind: str) -> Path:
    [archive] = (dist.libs.parent / "cds").glob(f"{kind}-*.jsa")
    return archive


def test_the_first_jvm_trains_the_archive_and_the_next_maps_it(dist: KafkaDist) -> None:
    training = kafka_cds.flags(dist, "tools")
    [train] = [f for f in training if f.startswith("-XX:ArchiveClassesAtExit=")]
    assert kafka_cds.flags(dist, "tools") == ()  # one trainer at a time: the others run plain meanwhile
    assert kafka_cds.flags(dist, "server")[0].startswith("-XX:ArchiveClassesAtExit=")  # each kind its own
    plain = _java(dist, ())
    trained = _java(dist, training)
    assert trained.returncode == 0 and Path(train.split("=", 1)[1]).is_file()
    using = kafka_cds.flags(dist, "tools")
    archive = _archive(dist, "tools")
    assert using[0] == f"-XX:SharedArchiveFile={archive}" and archive.is_file()
    assert not Path(train.split("=", 1)[1]).exists() and not list(archive.parent.glob("tools-*.trainer"))
    mapped = _java(dist, using)
    assert mapped.returncode == 0 and (mapped.stdout, mapped.stderr) == (plain.stdout, plain.stderr)
    assert _java(dist, (*using, "-Xshare:on")).returncode == 0  # really mapped, not silently skipped


def test_a_truncated_archive_is_discarded_not_published(dist: KafkaDist, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    training = kafka_cds.flags(dist, "tools")
    part = Path(next(f for f in training if f.startswith("-XX:ArchiveClassesAtExit=")).split("=", 1)[1])
    assert _java(dist, training).returncode == 0
    whole = part.read_bytes()
    part.write_bytes(whole[: len(whole) // 3])  # a trainer killed in the middle of writing it
    assert kafka_cds.flags(dist, "tools")[0].startswith("-XX:ArchiveClassesAtExit=")  # discarded; a new trainer
    assert not part.exists() and not list(part.parent.glob("tools-*.jsa"))
    assert not list(tmp_path.glob("hs_err*")), "the check's JVM crashed into a file"


def test_a_trainer_that_died_before_writing_is_replaced_after_the_grace(dist: KafkaDist) -> None:
    assert kafka_cds.flags(dist, "server")
    [marker] = (dist.libs.parent / "cds").glob("server-*.trainer")
    assert kafka_cds.flags(dist, "server") == ()  # within the grace: its JVM may be starting
    old = marker.stat().st_mtime - kafka_cds.START_GRACE_S - 1
    os.utime(marker, (old, old))
    again = kafka_cds.flags(dist, "server")
    assert again and again[0].startswith("-XX:ArchiveClassesAtExit=") and marker.read_text() in again[0]


def test_a_live_trainer_is_waited_for(dist: KafkaDist) -> None:
    training = kafka_cds.flags(dist, "tools")
    part = next(f for f in training if f.startswith("-XX:ArchiveClassesAtExit=")).split("=", 1)[1]
    # A process that names the part and is still running stands for the trainer's JVM: only command lines are read.
    # Its command line shows once its exec has set it up, which can be after Popen returns.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", part])
    try:
        wait_until(lambda: kafka_cds._running(part), 10.0, "the stand-in's command line")
        marker = next((dist.libs.parent / "cds").glob("tools-*.trainer"))
        old = marker.stat().st_mtime - kafka_cds.START_GRACE_S - 1
        os.utime(marker, (old, old))
        assert kafka_cds.flags(dist, "tools") == () and marker.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert kafka_cds.flags(dist, "tools")[0].startswith("-XX:ArchiveClassesAtExit=")  # it died without writing
