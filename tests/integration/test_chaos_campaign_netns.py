"""A campaign run under the opt-in network fault kinds and power loss, on a namespaced cluster.

One run (seed 20, 50 s) whose schedule holds each of `nemesis.OPT_IN_KINDS` and `power-loss` once: isolate,
leader-cut, bridge, majorities ring, one-way loss, bandwidth, random loss, and the leader losing what it had not
fsynced. acks=all with min ISR 2 must still show no forbidden anomaly, every partition must read back
completely, and the namespaces must be gone afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from insync.chaos import campaign, nemesis, netns

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

REASON = netns.unavailable()
if REASON is not None:
    pytest.skip(f"needs network namespaces: {REASON}", allow_module_level=True)

SEED, DURATION_S = 20, 50.0


def test_power_loss_and_network_faults_find_nothing_forbidden(tmp_path: Path) -> None:
    # latency has its own campaign run (test_nfqueue_latency.py): nine kinds do not fit in one 50 s run
    kinds = (*(k for k in nemesis.OPT_IN_KINDS if k != "latency"), "power-loss")
    plan = campaign.plan_run(0, SEED, DURATION_S, kinds)
    assert {f.kind for f in plan.faults} == set(kinds), "pick a seed whose run covers every kind"

    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--runs", "1", "--seed",
                          str(SEED), "--duration", str(DURATION_S), "--faults", ",".join(kinds), "--out",
                          str(tmp_path)], capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    data = json.loads((tmp_path / "run-0" / "results.json").read_text())
    assert data["ok"] and data["forbidden"] == 0, data["examples"][:5]
    assert data["complete_partitions"] == [0, 1, 2] and data["sends"]["ok"] > 1000
    started = [f["fault"] for f in data["faults"]]
    assert len(started) == len(plan.faults), (started, plan.faults)  # each fault began and ended
    assert any(f.startswith("power loss") for f in started) and any(f.startswith("leader-cut") for f in started)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    run = json.loads((tmp_path / "run-0" / "cluster" / "cluster.json").read_text())["network"]["run"]
    assert f"{netns.PREFIX}{run}" not in listed
