"""insync's chaos campaign on real Kafka 4.1: the same workload, faults and checker as on insync (`insync chaos
campaign --engine kafka`), with nothing forbidden found."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.chaos import campaign, kafka_cluster, nemesis

pytestmark = pytest.mark.timeout(600)


def test_a_campaign_runs_on_kafka_and_finds_nothing_forbidden(tmp_path: Path) -> None:
    engine = kafka_cluster.parse_engine("kafka:4.1")
    plans = campaign.plan_campaign(1, 11, 40.0, nemesis.parse_kinds("kill,pause"),
                                   engine=engine)
    result, = campaign.run_campaign(plans, tmp_path)
    assert result.error is None, result.error
    assert result.check.faults, "no fault was injected"
    assert result.check.sends.get("ok", 0) > 1000, result.check.sends
    assert not result.check.forbidden, result.check.forbidden
    assert (Path(result.directory) / "cluster" / "node-1" / "server.log").stat().st_size > 0  # Kafka's own log
