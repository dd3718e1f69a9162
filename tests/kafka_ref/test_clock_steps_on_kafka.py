"""The clock-step scenario (tests/integration/clock_scenario.py) on Kafka 4.1, with the same settings and the same
steps as on insync (tests/integration/test_clock_steps.py), recording what Kafka does (docs/chaos.md). Its KRaft
controller times broker sessions with `time.nanoseconds()` (monotonic): no broker is fenced. Its ISR check compares
`time.milliseconds()` (the wall clock) with each follower's lastCaughtUpTimeMs, but a follower fetching all along
refreshes that within a fetch round trip of the step, so the isr-expiration check only shrinks the ISR if it runs
inside that window: the shrinks and the under-replicated samples are printed, not asserted. It checks Kafka, not
insync, so `make compat-kafka-runs` runs it rather than CI's `make compat`."""

from __future__ import annotations

import os
from pathlib import Path

import clock_scenario
import pytest

from insync.chaos import clock_step, cluster

pytestmark = pytest.mark.timeout(400)

REASON = clock_step.unavailable() if os.environ.get("INSYNC_KAFKA_RUNS") == "all" else \
    "Kafka's own clock-step run is make compat-kafka-runs' (INSYNC_KAFKA_RUNS=all)"
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)


def test_kafka_under_the_same_clock_steps(tmp_path: Path) -> None:
    spec = cluster.up(str(tmp_path / "cluster"), 3, 0, clock_scenario.SETTINGS, engine="kafka:4.1", clock_steps=True)
    try:
        outcome = clock_scenario.run(spec, tmp_path)
        shrinks = clock_scenario.logged(spec, outcome, "] Shrinking ISR from")
        fenced = clock_scenario.logged(spec, outcome, "] Fencing broker")
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
    print("steps:", *outcome.steps, "under-replicated:", *outcome.under_replicated[:40], "shrinks:",
          *(line[:220] for line in shrinks), "sends:", outcome.check.sends, sep="\n")
    assert len(outcome.steps) == 9 and outcome.samples > 100, outcome
    assert fenced == [], fenced
    assert outcome.check.sends.get("ok", 0) > 5000, outcome.check.sends
    assert not outcome.check.forbidden, outcome.check.examples(5)
