"""Kafka's own tools, the same commands in the same order, against a 3-broker Kafka 4.1 cluster and a 3-broker
insync cluster, both at their defaults (ACLs on, everyone allowed where no ACL is found): every difference in
exit code or normalised output is fixed or listed in tools_differences.toml with its reason. The table goes to
build/compat/kafka-tools.md (docs/compatibility.md shows it)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from reference import start_kafka
from tools_table import markdown, run_table

from insync.chaos import cluster, kafka_dist

pytestmark = pytest.mark.timeout(1200)
# ACLs on for kafka-acls, everyone allowed where no ACL is found. The automatic leader balance (first run 300 s
# after a controller takes office, on both) is off: whether it ran before kafka-leader-election is timing, not
# conformance.
ACLS_ON = ["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "allow.everyone.if.no.acl.found=true", "super.users=User:ANONYMOUS", "auto.leader.rebalance.enable=false"]
REPORT = Path(__file__).resolve().parents[2] / "build" / "compat" / "kafka-tools.md"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[cluster.ClusterSpec, cluster.ClusterSpec]]:
    kafka = start_kafka(tmp_path_factory.mktemp("kafka"), "4.1", extra=ACLS_ON)
    try:
        insync = cluster.up(str(tmp_path_factory.mktemp("insync")), 3, 0, ACLS_ON)
        try:
            yield kafka, insync
        finally:
            cluster.down(cluster.ClusterSpec.load(insync.directory), 20.0)
    finally:
        cluster.down(cluster.ClusterSpec.load(kafka.directory), 20.0)


def test_kafkas_tools_answer_alike_on_kafka_and_insync(
        clusters: tuple[cluster.ClusterSpec, cluster.ClusterSpec], tmp_path: Path) -> None:
    kafka, insync = clusters
    differences = tomllib.loads((Path(__file__).parent / "tools_differences.toml").read_text())
    rows = run_table(kafka_dist.assemble("4.1"), kafka, insync, tmp_path)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(markdown(rows, differences, kafka_dist.resolve_version("4.1")))
    detail = "\n\n".join(f"## {r.step} ({r.command})\nKafka exit {r.kafka_exit}:\n{r.kafka_output}\n"
                         f"insync exit {r.insync_exit}:\n{r.insync_output}" for r in rows if not r.identical)
    REPORT.with_suffix(".diff.txt").write_text(detail + "\n")
    timed_out = [row.step for row in rows if -9 in (row.kafka_exit, row.insync_exit)]
    assert not timed_out, f"steps killed at the tool timeout on either side (alike is not identical): {timed_out}"
    unlisted = [row for row in rows if not row.identical and row.step not in differences]
    assert not unlisted, (f"{len(unlisted)} of {len(rows)} steps differ and are not listed: "
                          f"{[r.step for r in unlisted]} (outputs in {REPORT.with_suffix('.diff.txt')})")
    stale = sorted(set(differences) - {row.step for row in rows if not row.identical})
    assert not stale, f"listed as differing but now identical (remove them): {stale}"
