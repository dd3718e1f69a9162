"""The demo's observer follows its own topic: other topics' events (the group coordinator's
`__consumer_offsets`) stay out of its event panel and its per-act figures."""

from __future__ import annotations

import json
from pathlib import Path

from insync.chaos import cluster
from insync.demo.observe import ClusterObserver, summarise


def test_events_of_other_topics_are_left_out(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, brokers=1, port=0)
    log_dir = spec.node(1).log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    shrink = {"v": 1, "broker": 1, "type": "isr_shrink", "partition": 0, "isr_before": [1, 2], "isr_after": [1],
              "removed": [{"broker": 2, "reason": "stuck"}]}
    lines = [{**shrink, "ts_ms": 1000, "topic": "demo"}, {**shrink, "ts_ms": 1001, "topic": "__consumer_offsets"},
             {"v": 1, "ts_ms": 1002, "broker": 0, "type": "broker_fenced", "broker_id": 2}]
    (log_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    observer = ClusterObserver(spec, "demo", 2)
    observer.poll_events()  # the events alone: no cluster is running to describe partitions
    assert [(e["type"], e.get("topic")) for e in observer.events] == [("isr_shrink", "demo"), ("broker_fenced", None)]
    assert len(observer.recent) == 2
    assert summarise("act", observer.events, 0, 2000, 0, 0).shrinks == 1
