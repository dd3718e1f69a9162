"""Automatic leader balancing on real processes (issue 19): after a broker's clean stop moved its leaderships away
and its restart brought it back into the ISRs, the controller elects it back as the preferred leader by itself,
one `leader.imbalance.check.interval.seconds` later (3 s here), as Kafka's KRaft controller does."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import events, start, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster

pytestmark = pytest.mark.timeout(120)

TOPIC = "balanced"


def test_leadership_returns_to_the_preferred_replicas_after_a_restart(tmp_path: Path) -> None:
    spec = start(tmp_path, extra=["leader.imbalance.check.interval.seconds=3"])
    try:
        ensure_topic(spec.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 30, "full ISRs")
        preferred = {r.partition: r.replicas[0] for r in describe_rows(spec.bootstrap, [TOPIC])}
        assert all(r.leader == preferred[r.partition] for r in describe_rows(spec.bootstrap, [TOPIC]))
        victim = preferred[0]
        spec = cluster.stop_node(spec, victim, deadline_s=15)  # controlled shutdown: its leaderships move
        live = ",".join(b.address for b in spec.brokers if b.node_id != victim)
        assert describe_rows(live, [TOPIC])[0].leader != victim
        spec = cluster.start_node(spec, victim)
        wait_until(lambda: all(r.leader == preferred[r.partition] for r in describe_rows(spec.bootstrap, [TOPIC])),
                   60, f"broker {victim} leading its preferred partitions again")
        back = [e for e in events(spec, cluster.CONTROLLER_ID, "leader_change")
                if e["reason"] == "preferred" and e["leader_after"] == victim]
        assert back and {e["topic"] for e in back} == {TOPIC}
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
