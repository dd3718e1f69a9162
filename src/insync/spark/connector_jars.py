"""Spark's own Kafka connector (`format("kafka")`) and the jars it needs, fetched with Maven into a cache.

The jars go to `${INSYNC_CACHE:-~/.cache/insync}/spark-kafka/<pyspark version>/jars`, outside any repository, and
are reused while the marker file written last says the set is complete; a half-finished set is assembled again.
Maven copies the connector with its dependencies from a small generated pom, leaving out every artifact PySpark
already ships in `pyspark/jars` (a second scala-library or hadoop client on the classpath is a duplicate class).

The connector's version is PySpark's own. Maven Central publishes a Spark release's jars some time after PyPI has
PySpark, so when that version is not served the first release of the previous minor is taken instead (the
connector's internal Spark APIs hold across one minor; a fixed version keeps the set the same on every machine); the
marker names the version used.

Only the Spark tests and `make spark-kafka-jars` call this: nothing a user installs or runs fetches these jars.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import pyspark

from insync import maven

CONNECTOR = ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
MARKER = "complete"  # written beside jars/ once every jar is in place; holds the connector version used
# An artifact's file name is `<artifactId>-<version>.jar`, the version starting with digits, a dot and digits
# (`spark-sql-kafka-0-10_2.13-4.2.0.jar`: the `-0` and `-10_2.13` parts belong to the artifact id).
JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\.\d+[^/]*)\.jar$")
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>insync</groupId><artifactId>spark-kafka-jars</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>
  </dependencies>
</project>
"""


def cache_dir(spark_version: str = pyspark.__version__) -> Path:
    return maven.cache_root() / "spark-kafka" / spark_version


def connector_jars(spark_version: str = pyspark.__version__) -> list[str]:
    """The connector's jar paths for PySpark `spark_version`, assembled first if the cache has no complete set."""
    directory = cache_dir(spark_version)
    if not (directory / MARKER).is_file():
        _assemble(directory, spark_version)
    jars = sorted(str(p) for p in (directory / "jars").glob("*.jar"))
    assert any(Path(j).name.startswith(CONNECTOR[1] + "-") for j in jars), f"no connector jar in {directory}"
    return jars


def version_candidates(spark_version: str) -> list[str]:
    """PySpark's version, then the first release of the minor before it."""
    match = re.match(r"^(\d+)\.(\d+)\.\d+", spark_version)
    assert match, f"not a release version: {spark_version}"
    major, minor = int(match[1]), int(match[2])
    candidates = [spark_version]
    if minor > 0:
        candidates.append(f"{major}.{minor - 1}.0")
    return candidates


def shipped_artifacts(jars_dir: Path) -> list[str]:
    """The artifact ids of the jars in `jars_dir` (PySpark's own), which the connector's set must not repeat."""
    names = (JAR_NAME.match(p.name) for p in jars_dir.glob("*.jar"))
    return sorted({m["artifact"] for m in names if m})


def _assemble(directory: Path, spark_version: str) -> None:
    """Fetch into a fresh directory beside the cache's, then move it in place and write the marker last."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).unlink(missing_ok=True)
    shipped = shipped_artifacts(Path(pyspark.__file__).parent / "jars")
    with tempfile.TemporaryDirectory(dir=directory, prefix="assemble-") as work:
        staging = Path(work) / "jars"
        failures = []
        for version in version_candidates(spark_version):
            try:
                _copy_dependencies(Path(work), version, staging, shipped)
                break
            except maven.MavenError as e:
                failures.append(str(e))
        else:
            raise maven.MavenError(f"no {':'.join(CONNECTOR)} for PySpark {spark_version} in {directory}: "
                                   + "\n".join(failures))
        used = next(JAR_NAME.match(p.name) for p in staging.glob(CONNECTOR[1] + "-*.jar"))
        assert used is not None
        shutil.rmtree(directory / "jars", ignore_errors=True)
        staging.rename(directory / "jars")
    (directory / MARKER).write_text(f"{':'.join(CONNECTOR)}:{used['version']}\n", encoding="utf-8")


def _copy_dependencies(work: Path, version: str, out: Path, shipped: list[str]) -> None:
    """Maven on a pom asking for the connector at `version`, its jars and their dependencies copied to `out`."""
    (work / "pom.xml").write_text(POM.format(group=CONNECTOR[0], artifact=CONNECTOR[1], version=version),
                                  encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    maven.run(work, ["dependency:copy-dependencies", f"-DoutputDirectory={out}",
                     "-DexcludeArtifactIds=" + ",".join(shipped)], f"{CONNECTOR[1]} {version}")


def main() -> int:
    """`python -m insync.spark.connector_jars`: assemble if needed, print the jar paths."""
    try:
        jars = connector_jars()
    except maven.MavenError as e:
        print(e, file=sys.stderr)
        return 1
    print("\n".join(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
