"""Assemble Apache Kafka releases from Maven Central into insync's cache (`make kafka`): the releases given, or
those the compatibility checks run. With `--streams`, each release's Kafka Streams jars too (`make kafka-streams`)."""

from __future__ import annotations

import sys

from insync.chaos import kafka_dist

CHECKED = ("4.1", "4", "3.9")  # tests/kafka_ref/reference.py VERSIONS

if __name__ == "__main__":
    streams = sys.argv[1:2] == ["--streams"]
    for version in sys.argv[1 + streams :] or CHECKED:
        dist = kafka_dist.with_streams(version) if streams else kafka_dist.assemble(version)
        print(f"Kafka {dist.version}: {dist.classpath.count(':') + 1} jars in {dist.libs.parent}")
