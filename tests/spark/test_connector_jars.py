"""Assembling Spark's Kafka connector jars into the cache (insync.spark.connector_jars), with a stand-in `mvn` that
serves only the versions a test names and counts its runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from insync import maven
from insync.spark import connector_jars as cj

FAKE_MVN = """#!{python}
import pathlib, re, sys
args = sys.argv[1:]
log = pathlib.Path({log!r})
log.write_text(log.read_text() + "run\\n" if log.exists() else "run\\n")
pom = pathlib.Path("pom.xml").read_text()
version = re.search(r"<artifactId>spark-sql-kafka-0-10_2.13</artifactId><version>([^<]+)<", pom)[1]
out = pathlib.Path(next(a for a in args if a.startswith("-DoutputDirectory="))[len("-DoutputDirectory="):])
excluded = next(a for a in args if a.startswith("-DexcludeArtifactIds="))[len("-DexcludeArtifactIds="):].split(",")
if version not in {served!r}:
    print("[ERROR] Could not find artifact spark-sql-kafka-0-10_2.13:jar:" + version)
    sys.exit(1)
out.mkdir(parents=True)
for name in ["spark-sql-kafka-0-10_2.13-" + version, "kafka-clients-3.9.2", "scala-library-2.13.15"]:
    if re.sub(r"-\\d+\\.\\d+.*$", "", name) not in excluded:
        (out / (name + ".jar")).write_bytes(b"PK")
"""


def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: set[str]) -> Path:
    """Put a stand-in `mvn` first on PATH and the cache under `tmp_path`; returns the file it logs its runs to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mvn-runs"
    script = bin_dir / "mvn"
    script.write_text(FAKE_MVN.format(python=sys.executable, log=str(log), served=served))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("INSYNC_CACHE", str(tmp_path / "cache"))
    return log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_candidates_are_pysparks_version_then_the_previous_minors_first_release() -> None:
    assert cj.version_candidates("4.3.0") == ["4.3.0", "4.2.0"]
    assert cj.version_candidates("4.2.1") == ["4.2.1", "4.1.0"]
    assert cj.version_candidates("4.0.2") == ["4.0.2"]


def test_artifact_ids_are_read_from_jar_names(tmp_path: Path) -> None:
    for name in ["spark-sql-kafka-0-10_2.13-4.2.0.jar", "zstd-jni-1.5.7-7.jar", "scala-library-2.13.18.jar",
                 "hadoop-client-api-3.5.0.jar", "README.txt"]:
        (tmp_path / name).write_bytes(b"")
    assert cj.shipped_artifacts(tmp_path) == ["hadoop-client-api", "scala-library", "spark-sql-kafka-0-10_2.13",
                                              "zstd-jni"]


def test_a_complete_set_is_assembled_once_and_leaves_out_what_pyspark_ships(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_mvn(tmp_path, monkeypatch, {"4.3.0"})
    jars = cj.connector_jars("4.3.0")
    assert [Path(j).name for j in jars] == ["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.3.0.jar"]
    assert all(Path(j).parent == tmp_path / "cache" / "spark-kafka" / "4.3.0" / "jars" for j in jars)
    assert cj.connector_jars("4.3.0") == jars
    assert runs(log) == 1
    assert (cj.cache_dir("4.3.0") / cj.MARKER).read_text().strip().endswith(":4.3.0")


def test_an_unserved_version_falls_back_and_the_marker_names_the_version_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_mvn(tmp_path, monkeypatch, {"4.2.0"})
    jars = cj.connector_jars("4.3.0")
    assert "spark-sql-kafka-0-10_2.13-4.2.0.jar" in [Path(j).name for j in jars]
    assert (cj.cache_dir("4.3.0") / cj.MARKER).read_text().strip() == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    assert runs(log) == 2


def test_a_set_without_its_marker_is_assembled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_mvn(tmp_path, monkeypatch, {"4.3.0"})
    half = cj.cache_dir("4.3.0") / "jars"
    half.mkdir(parents=True)
    (half / "kafka-clients-3.9.2.jar").write_bytes(b"")  # an interrupted download
    assert len(cj.connector_jars("4.3.0")) == 2
    assert runs(log) == 1
    assert sorted(p.name for p in cj.cache_dir("4.3.0").iterdir()) == [cj.MARKER, "jars"]  # no staging left


def test_a_failure_names_each_version_tried_and_what_maven_said(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake_mvn(tmp_path, monkeypatch, set())
    with pytest.raises(maven.MavenError) as failure:
        cj.connector_jars("4.3.0")
    for version in ("4.3.0", "4.2.0"):
        assert f"Maven could not fetch spark-sql-kafka-0-10_2.13 {version} (exit 1):\n[ERROR] Could not find" in str(
            failure.value)
    assert not (cj.cache_dir("4.3.0") / cj.MARKER).exists()


def test_no_maven_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("INSYNC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(maven.MavenError, match="no mvn on PATH"):
        cj.connector_jars("4.3.0")
