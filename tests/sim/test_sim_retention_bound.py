"""Issue 16's simulator case: retention must not move a leader's log start past its high watermark.

Two brokers, RF 2, min ISR 2: the follower pauses, leaves the ISR, and the HW freezes; acks=1 writes go on with
a small `retention.bytes`. Before the fix the leader's log start ran past its HW (the checker's
`log_start_offset <= high_watermark` invariant) and the follower, back, restarted its log at the leader's log
start, skipping records no replica had ever had.
"""

from __future__ import annotations

from typing import Any

import pytest

from insync.sim.run import run_scenario
from insync.sim.scenario import parse_scenario


def _document(seed: int) -> dict[str, Any]:
    return {
        "name": "retention-below-min-isr", "seed": seed, "duration_s": 30, "quiesce_s": 15,
        "cluster": {"brokers": 2},
        "broker": {"min.insync.replicas": 2, "replica.lag.time.max.ms": 5_000, "log.segment.bytes": 4096,
                   "log.retention.bytes": 16384, "log.retention.check.interval.ms": 1000},
        "topic": {"name": "t", "partitions": 1, "replication_factor": 2},
        "producers": [{"acks": 1, "rate_msgs_per_s": 500, "batch_records": 10}],
        "faults": [{"at_s": 5, "kind": "pause", "target": "follower", "duration_s": 20}],
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_retention_keeps_the_log_start_at_or_below_the_high_watermark(seed: int) -> None:
    result = run_scenario(parse_scenario(_document(seed)))
    assert result.under_min_isr_ms > 12_000, f"seed {seed}: the ISR stayed below min ISR while writes went on"
    assert not result.invariant_violations, (seed, result.invariant_violations[:3])
    skipped = [e for e in result.events if e["type"] in ("truncate", "log_start_bounded")]
    assert skipped == [], f"seed {seed}: the follower skipped records: {skipped[:2]}"
    assert result.acked_records > 10_000 and result.divergent_logs == 0
