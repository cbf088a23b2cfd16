"""`stszone explain` of a pod whose template binds it to a node the cluster does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import builders as b
from webhook.cli import main


def test_a_template_bound_to_a_missing_node_says_its_pods_run_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """spec.nodeName ghost in the template, and no node ghost in the cluster: no pod of the set
    can run (PodGC deletes a pod bound to a node that does not exist). A node the view does not
    hold is not judged (one of that name may yet join), so the zones it "allows" are no answer:
    the line says the node does not exist."""
    sts = b.statefulset("pinned", replicas=2, annotations={"stszone.io/zones": "a,b,c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "ghost"
    nodes = [b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")]
    path = tmp_path / "cluster.json"
    items = [*nodes, sts, b.sts_pod("pinned", 1)]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert main(["explain", "--cluster", str(path), "pinned-1"]) == 0
    (line,) = [s for s in capsys.readouterr().out.splitlines() if "own constraints:" in s]
    assert "node ghost" in line and "does not exist" in line and "run nowhere" in line, line
    assert main(["explain", "--cluster", str(path), "pinned-1", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["missingNode"] == "ghost"


def test_a_template_bound_to_a_node_of_the_cluster_is_judged_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """spec.nodeName n1, a node in a: the constraints allow a only."""
    sts = b.statefulset("pinned", replicas=2, annotations={"stszone.io/zones": "a,b,c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "n1"
    path = tmp_path / "cluster.json"
    items = [b.node("n1", "a"), b.node("n2", "b"), sts, b.sts_pod("pinned", 0, node="n1")]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert main(["explain", "--cluster", str(path), "pinned-0"]) == 0
    (line,) = [s for s in capsys.readouterr().out.splitlines() if "own constraints:" in s]
    assert line == "  own constraints: allow a of a, b, c", line


def test_a_set_being_deleted_is_not_said_to_strand_its_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same template bound to ghost, the set being deleted: its controller makes no pod
    any more, so none is stranded on ghost, as the guard and the audit count it (the members
    hold zones as usual); explain's constraints line says no "run nowhere" either."""
    sts = b.statefulset("pinned", replicas=2, annotations={"stszone.io/zones": "a,b,c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "ghost"
    sts["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    sts["metadata"]["finalizers"] = ["foregroundDeletion"]
    nodes = [b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")]
    path = tmp_path / "cluster.json"
    items = [*nodes, sts, b.sts_pod("pinned", 1)]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert main(["explain", "--cluster", str(path), "pinned-1"]) == 0
    out = capsys.readouterr().out
    assert "run nowhere" not in out and "never runs" not in out, out
    assert main(["explain", "--cluster", str(path), "pinned-1", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["missingNode"] is None
