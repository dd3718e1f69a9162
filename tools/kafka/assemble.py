"""Assemble Apache Kafka releases from Maven Central into insync's cache (`make kafka`): the releases given, or
those the compatibility checks run."""

from __future__ import annotations

import sys

from insync.chaos import kafka_dist

CHECKED = ("4.1", "4", "3.9")  # tests/kafka_ref/reference.py VERSIONS

if __name__ == "__main__":
    for version in sys.argv[1:] or CHECKED:
        dist = kafka_dist.assemble(version)
        print(f"Kafka {dist.version}: {dist.libs}")
