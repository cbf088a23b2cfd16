"""A short churn on the lab: ``bench/churn.py --minutes 1.5 --seed 7`` exits 0.

The run starts its own two replicas, takes seeded random steps (StatefulSets created, scaled
both ways and deleted; nodes cordoned, relabelled, deleted and re-created, a zone emptied; a
replica SIGTERMed or SIGKILLed; the API server restarted) and checks its five invariants after
every step (see ``bench/churn.py``). It needs the lab's scripts (``$STSZONE_LAB_SCRIPTS``,
else ``../shared/lab`` beside the repository) and its folder (``$STSZONE_LAB``, else
``~/stszone-lab``), and restores the lab however it ends. Its figures are printed (``pytest
-s``) and written to ``churn.json`` in the test's directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.kube import Kubectl, lab_file

ROOT = Path(__file__).resolve().parents[2]
SEED = 7
MINUTES = 1.5


def test_a_short_churn_keeps_every_invariant(kubectl: Kubectl, tmp_path: Path) -> None:
    if not lab_file("nodes.sh").is_file():
        pytest.skip("no lab scripts (nodes.sh, up.sh): set STSZONE_LAB_SCRIPTS to run the churn")
    figures = tmp_path / "churn.json"
    command = [
        sys.executable, str(ROOT / "bench" / "churn.py"),
        "--minutes", str(MINUTES), "--seed", str(SEED), "--json", str(figures),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        env={**os.environ, "STSZONE_E2E_KUBECONFIG": kubectl.kubeconfig},
        capture_output=True,
        text=True,
        timeout=MINUTES * 60 + 600,
        check=False,
        cwd=ROOT,
    )
    print(done.stdout)
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    summary = json.loads(figures.read_text())
    assert summary["steps"] >= 10, summary
    checks = summary["invariant_checks"]
    assert checks["1 pods in their zones"] == summary["steps"], checks
    assert checks["5 gauges agree with audit"] == 1, checks
