"""A short chaos campaign on real processes: two runs whose schedules cover every fault kind between them.

`insync chaos campaign` starts a new 3-broker cluster per run, runs three producers (acks=all idempotent,
acks=all, acks=1), a consumer group and an assign-mode reader under the faults, reads every partition back and
checks the history. acks=all with min ISR 2 and no unclean election must show no forbidden anomaly: no lost
acks=all write, no duplicate from the idempotent producer, no inconsistent offset outside acks=1, no poll that
goes back or skips. Each run leaves history.jsonl, results.json and report.html; the campaign campaign.json and
index.html.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from insync.chaos import campaign, nemesis

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]

SEED, RUNS, DURATION_S = 13, 2, 40.0


def test_a_short_campaign_covers_every_fault_kind_and_finds_nothing_forbidden(tmp_path: Path) -> None:
    plans = campaign.plan_campaign(RUNS, SEED, DURATION_S, tuple(nemesis.KINDS))
    assert {f.kind for p in plans for f in p.faults} == set(nemesis.KINDS), "pick a seed whose runs cover every kind"

    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--runs", str(RUNS),
                          "--seed", str(SEED), "--duration", str(DURATION_S), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    *_, totals_line, last_line = out.stdout.splitlines()
    assert totals_line.split()[0] == "all" and totals_line.endswith(f"{RUNS} ok, 0 not")
    assert last_line.startswith(f"{RUNS} runs in "), last_line

    started = []
    for plan in plans:
        directory = tmp_path / f"run-{plan.run}"
        data = json.loads((directory / "results.json").read_text())
        assert data["ok"] and data["forbidden"] == 0 and data["client_errors"] == [], data["examples"][:5]
        assert data["complete_partitions"] == [0, 1, 2] and data["sends"]["ok"] > 1000
        assert len(data["faults"]) == len(plan.faults), (data["faults"], plan.faults)  # each fault began and ended
        started += [f["fault"] for f in data["faults"]]
        assert (directory / "history.jsonl").stat().st_size > 0 and "<svg" in (directory / "report.html").read_text()
    assert len(started) == sum(len(p.faults) for p in plans)
    totals = json.loads((tmp_path / "campaign.json").read_text())
    assert (totals["runs"], totals["ok_runs"], totals["forbidden"], totals["faults"]) == (RUNS, RUNS, 0, len(started))
    assert f"{RUNS} of {RUNS} runs ok" in (tmp_path / "index.html").read_text()
