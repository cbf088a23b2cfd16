"""The kubectl commands a `stszone rebalance` dry run prints, run as printed (through bash, its
quoting and all) by the kubectl on PATH against the fake API server: the last one of a step
waits, as --apply does before its next step, until the set counts every replica available."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import rebalancing as r
from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from tests.tools import require
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


@pytest.mark.parametrize("available", [4, 3], ids=["every replica", "one short"])
async def test_the_printed_wait_ends_only_when_every_replica_is_available(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], available: int
) -> None:
    """The printed command, through bash (its quoting and all), against a set of 4 replicas
    whose status counts ``available``: with all 4 it ends at once, "condition met"; one short,
    it is still waiting a second later and fails when its --timeout (4 s) runs out. (How
    kubectl then follows the set's changes is kubectl's; what is ours is a command whose
    condition reads the field and the count right.)"""
    kubectl = require("kubectl", why="running the printed kubectl commands")
    command = _step_commands(tmp_path, capsys)[-1]
    async with FakeApi(fixtures=False) as fake:
        fake.discovery = True
        sts: dict[str, Any] = r.statefulset(4)
        sts["status"]["availableReplicas"] = available
        fake.put("statefulsets", sts)
        config = write_kubeconfig(tmp_path / "kubeconfig", server=fake.url)
        env = {
            **os.environ,
            "PATH": f"{Path(kubectl).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": str(config),
            "KUBECACHEDIR": str(tmp_path / "kube-cache"),
        }
        run = await asyncio.create_subprocess_exec(
            "bash", "-c", command, env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        ended = asyncio.ensure_future(run.communicate())
        if available < 4:
            await asyncio.sleep(1.0)
            assert not ended.done(), await ended  # still waiting
        out, err = await asyncio.wait_for(ended, timeout=40)
        code = await run.wait()
    said = (code, out.decode().strip(), err.decode().strip())
    if available == 4:
        assert said[:2] == (0, "statefulset.apps/db condition met"), said
    else:
        assert code != 0 and "timed out waiting for the condition" in said[2], said
