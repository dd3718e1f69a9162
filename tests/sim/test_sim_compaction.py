"""Log compaction in the simulator: every broker's cleaner (inline, on its core's ticks) cleans its copy of a
compacted topic while acks=all writes go on and the leader is killed and restarts. The records' keys are unique,
so the cleaner keeps every record while it rewrites and swaps segments: no acknowledged write may go, and the
replicas' logs may not diverge."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from insync.sim.run import run_scenario
from insync.sim.scenario import parse_scenario


def _document(seed: int) -> dict[str, Any]:
    return {
        "name": "compaction-failover", "seed": seed, "duration_s": 30, "quiesce_s": 15,
        "cluster": {"brokers": 3},
        "broker": {"min.insync.replicas": 2, "log.segment.bytes": 4096, "log.cleanup.policy": "compact",
                   "log.cleaner.min.cleanable.ratio": 0.01, "log.cleaner.backoff.ms": 500},
        "topic": {"name": "t", "partitions": 2, "replication_factor": 3},
        "producers": [{"acks": -1, "rate_msgs_per_s": 300, "batch_records": 10}],
        "faults": [{"at_s": 10, "kind": "kill", "target": "leader", "duration_s": 5}],
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cleaning_under_a_leader_kill_loses_no_acknowledged_write(seed: int, caplog: pytest.LogCaptureFixture
                                                                  ) -> None:
    caplog.set_level(logging.INFO, logger="insync.storage")
    result = run_scenario(parse_scenario(_document(seed)))
    cleans = [r for r in caplog.records if r.getMessage().startswith("Cleaned log t-")]
    assert len(cleans) > 20, f"seed {seed}: the cleaners hardly ran ({len(cleans)} cleans)"
    assert not result.invariant_violations, (seed, result.invariant_violations[:3])
    assert result.acked_records > 5_000 and result.divergent_logs == 0, seed
