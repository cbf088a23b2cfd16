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


def _pinned(tmp_path: Path, *, deleting: bool) -> str:
    """A saved cluster: set pinned (3 replicas, zones a, b, c) whose template is bound to
    ghost, a node the cluster lacks; pinned-0 has no pod, pinned-1 is Pending with no node,
    pinned-2 is bound to ghost. ``deleting``: the set has a deletionTimestamp."""
    sts = b.statefulset("pinned", replicas=3, annotations={"stszone.io/zones": "a,b,c"})
    sts["spec"]["template"]["spec"]["nodeName"] = "ghost"
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
        sts["metadata"]["finalizers"] = ["foregroundDeletion"]
    nodes = [b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")]
    pods = [b.sts_pod("pinned", 1), b.sts_pod("pinned", 2, node="ghost")]
    path = tmp_path / f"cluster-{deleting}.json"
    items = [*nodes, sts, *pods]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return str(path)


def _explained(path: str, target: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The lines of `stszone explain TARGET` by their label (``own constraints``, ``guard``)."""
    assert main(["explain", "--cluster", path, "-n", "ns", target]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    pairs = (line.split(": ", 1) for line in lines if ": " in line)
    return {label.strip(): said.strip() for label, said in pairs}


def test_a_set_being_deleted_strands_its_members_as_a_live_set_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same template bound to ghost, with and without a deletionTimestamp: explain says
    of the set being deleted what it says of the live one -- its template binds pods to a
    node that does not exist (not that it allows every zone), and a member with no pod, or
    with a pod on ghost, holds no zone and is counted nowhere -- and adds that the set is
    being deleted. The pending pod with no node yet is counted by the rule in both."""
    live, ending = _pinned(tmp_path, deleting=False), _pinned(tmp_path, deleting=True)
    for target in ("pod/pinned-0", "pod/pinned-1", "pod/pinned-2"):
        was = _explained(live, target, capsys)
        now = _explained(ending, target, capsys)
        said = was["own constraints"]
        assert said.startswith("bind its pods to node ghost (spec.nodeName), which does not exist")
        assert now["own constraints"].startswith(f"{said}; the StatefulSet is being deleted")
        held = now["guard"].startswith("holds no zone: ")
        assert held == was["guard"].startswith("holds no zone: ") == (target != "pod/pinned-1")
    for target in ("pod/pinned-0", "pod/pinned-2"):
        guard = _explained(ending, target, capsys)["guard"]
        assert guard.startswith("holds no zone: "), guard
        assert "StatefulSet is being deleted" in guard and "missing node ghost" in guard, guard
    assert _explained(ending, "pod/pinned-1", capsys)["guard"].startswith("not running: ")
    for path, deleting in ((live, False), (ending, True)):
        assert main(["explain", "--cluster", path, "-n", "ns", "pod/pinned-0", "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["missingNode"], data["deleting"]) == ("ghost", deleting)
        assert (data["member"]["guard"]["zone"], data["member"]["guard"]["neverRuns"]) == (
            None,
            True,
        )
        assert main(["explain", "--cluster", path, "sts/pinned"]) == 0
        rows = capsys.readouterr().out.splitlines()[2:5]
        assert [row.split()[0] for row in rows] == ["0", "1", "2"], rows
        assert [row.endswith("none (never runs)") for row in rows] == [True, False, True], rows
    # The audit counts the members alike: only pinned-1's rule zone, pending with no node yet.
    # The live set's template is its problem (exit 1); the one being deleted makes no pod.
    zones_held: list[list[str]] = []
    for path, status in ((live, 1), (ending, 0)):
        assert main(["audit", "--cluster", path, "-o", "json"]) == status
        (pinned,) = json.loads(capsys.readouterr().out)["statefulsets"]
        zones_held.append(pinned["zonesHeld"])
    assert zones_held == [["b"], ["b"]], zones_held
