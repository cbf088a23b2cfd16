"""The kubectl commands a `stszone rebalance` dry run prints: the last one of a step waits, as
--apply does before its next step, until the set counts every replica available."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import rebalancing as r
from webhook.cli import main

#: db-1 in zone-a and db-3 in zone-b, each where the other belongs: two steps, db-1's first.
MISPLACED = {0: "a1", 1: "a2", 2: "c1", 3: "b1"}


def _step_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The commands of the dry run's first step (``--timeout 4``), as -o json gives them."""
    saved = tmp_path / "cluster.json"
    saved.write_text(json.dumps({"kind": "List", "items": r.cluster(MISPLACED)}))
    assert main(["rebalance", "--cluster", str(saved), "--timeout", "4", "-o", "json"]) == 0
    (db,) = json.loads(capsys.readouterr().out)["statefulsets"]
    commands: list[str] = db["steps"][0]["commands"]
    return commands


def test_a_step_ends_waiting_for_every_replica_to_be_available(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the wait for the new pod to be Ready, the step waits for status.availableReplicas
    to count all four replicas (minReadySeconds: a Ready pod is available only later)."""
    *_, ready, available = _step_commands(tmp_path, capsys)
    assert ready == "kubectl -n shop wait pod/db-1 --for=condition=Ready --timeout=4s"
    assert available == (
        "kubectl -n shop wait statefulset/db "
        "--for=jsonpath='{.status.availableReplicas}'=4 --timeout=4s"
    )
