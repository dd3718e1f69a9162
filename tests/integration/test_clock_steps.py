"""A stepped wall clock (chaos/clock_step.py) on a follower, the leader and the controller of a 3-broker insync
cluster under the campaign's workload (clock_scenario.py): no ISR shrinks, no broker is fenced, no partition is
under-replicated at any sample, and the checker finds nothing forbidden. The cores time intervals on the monotonic
clock (server/role.py's steady time), so a step of minutes moves none of their deadlines."""

from __future__ import annotations

from pathlib import Path

import clock_scenario
import pytest

from conftest import FAST, events
from insync.chaos import clock_step, cluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

REASON = clock_step.unavailable()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)


def test_steps_of_the_wall_clock_shrink_no_isr_and_fence_no_broker(tmp_path: Path) -> None:
    spec = cluster.up(str(tmp_path / "cluster"), 3, 0, [*FAST, *clock_scenario.SETTINGS], clock_steps=True)
    try:
        outcome = clock_scenario.run(spec, tmp_path)
        shrinks = [e for b in spec.brokers for e in events(spec, b.node_id, "isr_shrink")]
        assert clock_scenario.logged(spec, outcome, "] Shrinking ISR from") == []
        fenced = events(spec, cluster.CONTROLLER_ID, "broker_fenced")  # before the shutdown fences them all
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
    assert len(outcome.steps) == 9 and outcome.samples > 100, outcome
    assert outcome.under_replicated == (), outcome.under_replicated[:10]
    assert (shrinks, fenced) == ([], []), (shrinks, fenced, outcome.steps)
    assert outcome.check.sends.get("ok", 0) > 5000, outcome.check.sends
    assert not outcome.check.forbidden, outcome.check.examples(5)
    assert outcome.client_errors == (), outcome.client_errors
