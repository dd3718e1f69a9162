"""Campaign runs under the log-dir kinds: `disk-full` (each broker's log dir a small tmpfs, a leader's filled to
ENOSPC) and `disk-error` (each behind a FUSE passthrough, a leader's failing with EIO). The broker halts, the
others lead, and the heal frees the space or ends the errors and restarts it: acks=all with min ISR 2 must show
no forbidden anomaly, every partition must read back completely, and nothing may stay mounted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from insync.chaos import slow_disk, small_disk

pytestmark = [pytest.mark.timeout(200), pytest.mark.slow]

DURATION_S = 30.0


@pytest.mark.parametrize(("kind", "unavailable", "started"), [
    ("disk-full", small_disk.unavailable, "fill the log dir of broker"),
    ("disk-error", slow_disk.unavailable, "EIO on the log dir of broker"),
])
def test_a_broken_log_dir_finds_nothing_forbidden(tmp_path: Path, kind: str, unavailable: object,
                                                    started: str) -> None:
    reason = unavailable()  # type: ignore[operator]
    if reason is not None:
        pytest.skip(f"{kind} needs its file system: {reason}")
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--runs", "1", "--seed", "5",
                          "--duration", str(DURATION_S), "--faults", kind, "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    data = json.loads((tmp_path / "run-0" / "results.json").read_text())
    assert data["ok"] and data["forbidden"] == 0, data["examples"][:5]
    assert data["complete_partitions"] == [0, 1, 2] and data["sends"]["ok"] > 1000
    faults = [f["fault"] for f in data["faults"]]
    assert faults and all(f.startswith(started) for f in faults), faults
    halted = [b for b in (1, 2, 3) if "Shutdown broker because all log dirs in" in
              (tmp_path / "run-0" / "cluster" / f"node-{b}" / "stdout.log").read_text(errors="replace")]
    assert halted, "no broker halted on its broken log dir"
    assert not any(os.path.ismount(tmp_path / "run-0" / "cluster" / f"node-{b}" / "data") for b in (1, 2, 3))
