"""The saved cluster every command's ``--cluster`` help asks for: one command, said alike, that
saves what the view reads, the Namespace objects (their opt-in label) included.

kubectl is played by a filter on the kinds its resource list names, over a cluster of three
labelled nodes and namespace ``cap``, which is not opted in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.helpexamples import ROOT, help_text
from webhook import cli

COMMANDS = ("serve", "review", "audit", "explain", "rebalance")
#: kubectl's names for the kinds of the cluster below.
KINDS = {"nodes": "Node", "pods": "Pod", "sts": "StatefulSet", "namespaces": "Namespace"}
SAVED = re.compile(r"from a saved `kubectl get (\S+) -A -o yaml`")


def _said(command: str) -> str:
    """``stszone COMMAND --help`` on one line."""
    return " ".join(help_text(command).split())


def _kubectl_get(resources: str) -> dict[str, Any]:
    """What ``kubectl get RESOURCES -A -o json`` lists of the cluster."""
    cluster = [
        *(b.node(f"n-{z}", z) for z in ("zone-a", "zone-b", "zone-c")),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cap"}},
    ]
    kinds = {KINDS.get(r) for r in resources.split(",")}
    return {"kind": "List", "items": [o for o in cluster if o["kind"] in kinds]}


def test_every_command_asks_for_one_saved_cluster_with_its_namespaces() -> None:
    saved = {command: SAVED.findall(_said(command)) for command in COMMANDS}
    assert all(len(found) == 1 for found in saved.values()), saved
    assert len({found[0] for found in saved.values()}) == 1, saved
    assert "namespaces" in saved["serve"][0].split(","), saved
    for command in COMMANDS:  # the stdin example is the command's own
        piped = f"-o json | stszone {command} --cluster -"
        assert piped in _said(command), command


def test_the_saved_cluster_of_the_help_keeps_a_namespace_not_opted_in_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """review of a pod in namespace cap, with the cluster saved as review --help says: not
    sent to stszone, answered unchanged (without the Namespace objects, every namespace is
    taken as opted in and the pod gets a zone)."""
    (resources,) = SAVED.findall(_said("review"))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(_kubectl_get(resources)))
    request = ROOT / "tests" / "fixtures" / "admission" / "003-Pod-CREATE.json"
    status = cli.main(["review", "--cluster", str(cluster), str(request)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "namespace cap is not opted in" in err, err
    assert "patch" not in json.loads(out)["response"]
