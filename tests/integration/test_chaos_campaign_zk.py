"""A chaos campaign run on metadata.store=zookeeper: the controller faults hit the active controller, and the
standby takes over under the workload (issue 20: "controller kills/pauses (with ZooKeeper, the standby takes
over)").

One 30 s run with two controllers and a ZooKeeper server of its own: the first controller fault makes the standby
win the election, the second hits that new active controller (the first one having been started again as a
standby), and acks=all with min ISR 2 must still show no forbidden anomaly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from insync.chaos import campaign, cluster
from insync.chaos.zookeeper import available

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow,
              pytest.mark.skipif(available() is not None, reason=f"ZooKeeper: {available()}")]

SEED, DURATION_S = 5, 30.0
KINDS = ("controller-pause", "controller-kill", "kill", "pause")


def test_controller_faults_hand_over_to_the_standby_and_nothing_forbidden_is_seen(tmp_path: Path) -> None:
    plan, = campaign.plan_campaign(1, SEED, DURATION_S, KINDS, zookeeper=True)
    controller_faults = [f.kind for f in plan.faults if f.kind.startswith("controller-")]
    assert len(controller_faults) >= 2, "pick a seed whose run has two controller faults"

    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--runs", "1", "--seed",
                          str(SEED), "--duration", str(DURATION_S), "--faults", ",".join(KINDS), "--zookeeper",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    data = json.loads((tmp_path / "run-0" / "results.json").read_text())
    assert data["ok"] and data["forbidden"] == 0 and data["metadata_store"] == "zookeeper", data["examples"][:5]
    assert data["complete_partitions"] == [0, 1, 2] and data["sends"]["ok"] > 1000
    victims = [f["fault"].split()[-1] for f in data["faults"] if " controller " in f["fault"]]
    # The first controller fault hits controller 0; the standby (1001) won, so the next one hits it.
    assert victims[:2] == [str(cluster.CONTROLLER_ID), "1001"], data["faults"]
    logs = "".join(p.read_text() for p in (tmp_path / "run-0" / "cluster").glob("node-100*/stdout.log"))
    assert "Controller 1001 won the election" in logs
