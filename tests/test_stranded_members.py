"""Members of a set whose pod template binds its pods to a node that does not exist
(``spec.nodeName: ghost``): the StatefulSet controller creates each pod bound to ghost, no
kubelet runs it, and PodGC deletes it for the controller to create it there again. Such a
member is Pending for good: it holds no zone, and its zone is not unknown either (no fact is
missing: it runs nowhere). A pod still running on a node of the cluster (made from an earlier
template) holds its zone.

The guard (``/scale``), ``stszone audit`` (its zones held, its unknown members, its lowest safe
count) and ``stszone explain`` (each member, and each smaller size) say the same.

Nodes na, nb, nc in zones a, b, c; sets list a, b, c.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.kruiseobjects import annotated, kruise_update, live_pods, recorded_items
from tests.test_metrics import parse, value
from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.state import live_state
from webhook.model.store import Store
from webhook.rules import admission
from webhook.rules.audit import audit
from webhook.rules.explain import explain_workload
from webhook.rules.locate import Located, Locator
from webhook.rules.rebalance import plan_set
from webhook.rules.risk import RiskScan
from webhook.server.metrics import Metrics
from webhook.server.riskmetrics import ZoneRisk
from webhook.wire import review

ABC = {"stszone.io/zones": "a,b,c"}
NODES = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
NEVER = "never runs"


def _bound(sts: dict[str, Any], node: str = "ghost") -> dict[str, Any]:
    sts["spec"]["template"]["spec"]["nodeName"] = node
    return sts


def _view(replicas: int, pods: dict[int, str]) -> Store:
    """Set db of ``replicas``, its template bound to ghost; ``pods``: ordinal -> its node."""
    sts = _bound(b.statefulset(replicas=replicas, annotations=ABC))
    made = [b.sts_pod(ordinal=o, node=n) for o, n in pods.items()]
    return store_from_objects([*NODES, sts, *made])


def _scale(store: Store, old: int, new: int) -> review.Answer:
    body = b.review(b.scale(replicas=new), operation="UPDATE", old=b.scale(replicas=old))
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


def _agree(store: Store, replicas: int) -> tuple[dict[int, bool], Any]:
    """Whether the guard allows /scale from ``replicas`` to each smaller count, checked against
    explain's answer for that size and the audit's lowest safe count (every count from it up
    is allowed, none below it but 0, which stops the set); and the explanation."""
    answers = {n: _scale(store, replicas, n) for n in range(replicas)}
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    assert [size.replicas for size in explained.sizes] == list(range(replicas - 1, -1, -1))
    for size in explained.sizes:
        said = answers[size.replicas]
        assert (size.allowed, size.message) == (said.allowed, said.message), size
        assert size.warnings == said.warnings, size
    (report,) = audit(store).sets
    assert report.lowest is not None
    for n in range(1, replicas):
        assert answers[n].allowed == (n >= report.lowest), (n, report.lowest)
    return {n: a.allowed for n, a in answers.items()}, explained


def test_a_set_bound_to_a_missing_node_holds_no_zone() -> None:
    """No pod of db runs (db-0 sits on ghost, db-1 and db-2 are not made yet): no scale-down
    drops a zone the set holds, and no member's zone is unknown."""
    store = _view(3, {0: "ghost"})
    allowed, explained = _agree(store, 3)
    assert allowed == {0: True, 1: True, 2: True}
    (report,) = audit(store).sets
    assert (report.held, report.unknown, report.lowest) == ((), (), 0)
    for member in explained.members:
        assert member.guard.zone is None and member.guard.counts is None, member
        assert member.guard.why.startswith("holds no zone: ") and NEVER in member.guard.why
    said = _scale(store, 3, 1).warnings
    assert any("correct or remove spec.nodeName ghost of its pod template" in w for w in said), said


def test_a_member_bound_to_a_missing_node_keeps_no_zone_for_a_scale_down() -> None:
    """db-0, db-1, db-3, db-4 and db-5 run in a, b, a, b, c (made from an earlier template);
    db-2 sits on ghost. 6 -> 3 keeps db-0 to db-2: db-2 never runs in c, so db-5, removed, is
    c's only pod: refused, as every count down to 1 is."""
    pods = {0: "na", 1: "nb", 2: "ghost", 3: "na", 4: "nb", 5: "nc"}
    store = _view(6, pods)
    allowed, explained = _agree(store, 6)
    assert allowed == {0: True, 1: False, 2: False, 3: False, 4: False, 5: False}
    refused = _scale(store, 6, 3)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    assert "would drop zone c (ordinal 5 is its only pod)" in refused.message, refused.message
    (report,) = audit(store).sets
    assert (report.held, report.unknown, report.lowest) == (("a", "b", "c"), (), 6)
    db2 = explained.members[2]
    assert (db2.row.status, db2.guard.zone, db2.guard.counts) == ("going", None, None)
    assert NEVER in db2.row.why and NEVER in db2.guard.why, db2
    # Evicting db-2 brings it back on ghost: rebalance moves it nowhere, saying why.
    info = store.statefulset("ns", "db")
    assert info is not None
    plan = plan_set(info, store=store, state=live_state([]), move_data=False)
    (row,) = [r for r in plan.rows if r.ordinal == 2]
    assert row.kind == "blocked" and NEVER in row.notes[0], row
    assert "unknown" not in row.notes[0], row


def test_audit_and_explain_print_that_such_members_hold_no_zone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same set from a saved cluster: the audit says of db-1 (no pod yet) that it holds no
    zone, not that its zone is unknown; explain's GUARD column says it never runs."""
    sts = _bound(b.statefulset(replicas=3, annotations=ABC))
    path = tmp_path / "cluster.json"
    items = [*NODES, sts, b.sts_pod(ordinal=0, node="ghost")]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert main(["audit", "--cluster", str(path)]) == 1  # a problem: nothing of db ever runs
    out = capsys.readouterr().out
    (line,) = [s for s in out.splitlines() if s.startswith("  ordinal 1:")]
    assert line.startswith("  ordinal 1: holds no zone: ") and NEVER in line, out
    assert "zones held now: (none); lowest replica count that keeps every zone: 0" in out, out
    assert main(["explain", "--cluster", str(path), "sts/db"]) == 0
    out = capsys.readouterr().out
    rows = [s.split() for s in out.splitlines() if s.strip().startswith(("0 ", "1 ", "2 "))]
    assert [r[-3:] for r in rows] == [["none", "(never", "runs)"]] * 3, out
    assert main(["explain", "--cluster", str(path), "sts/db", "-o", "json"]) == 0
    members = json.loads(capsys.readouterr().out)["members"]
    assert [m["guard"]["neverRuns"] for m in members] == [True, True, True]


def test_an_advanced_statefulset_bound_to_a_missing_node_holds_no_zone() -> None:
    """The recorded Advanced StatefulSet shop/web (live ordinals 0, 2, 3), its template bound
    to ghost, none of its pods made: 3 -> 1 drops no zone it holds."""
    objects: list[Any] = [b.node(f"n-{z}", z) for z in "abc"]
    old = _bound(annotated(recorded_items("statefulsets.v1beta1.json")[0]))
    store = store_from_objects([*objects, old])
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 1
    decided = admission.validate(kruise_update(new, old=old), store=store, defaults=Defaults())
    assert decided.allowed, decided.message
    (report,) = audit(store).sets
    assert (report.held, report.unknown, report.lowest) == ((), (), 0)


@pytest.mark.parametrize("node", ["na", ""])
def test_a_template_naming_a_node_that_exists_is_counted_as_before(node: str) -> None:
    """Bound to na (in a), or to no node: db-1 and db-2, not made yet, are where the rule puts
    them, so 3 -> 1 drops b and c."""
    sts = _bound(b.statefulset(replicas=3, annotations=ABC), node)
    store = store_from_objects([*NODES, sts, b.sts_pod(ordinal=0, node="na")])
    refused = _scale(store, 3, 1)
    assert not refused.allowed and "would drop zones b" in refused.message, refused.message


def test_the_zones_held_gauge_and_its_definitions_say_such_members_hold_none() -> None:
    """db-0 and db-1 run on na and nb (made from an earlier template); db-2, no pod yet, would
    be bound to ghost: it holds no zone, not the rule's c, so the gauge is 2. The gauge's HELP
    text and docs/metrics.md define held zones as pod, else volume, else rule: both say too
    that such a member holds none, and the docs' scraped sample shows the HELP as exported."""
    store = _view(3, {0: "na", 1: "nb"})
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    text = Metrics(rendered=[risk.exposition]).exposition().decode()
    labels = {"namespace": "ns", "statefulset": "db", "kind": "StatefulSet"}
    assert value(parse(text), "stszone_statefulset_zones_held", **labels) == 2
    (helped,) = [
        s for s in text.splitlines() if s.startswith("# HELP stszone_statefulset_zones_held ")
    ]
    assert "missing node" in helped, helped
    docs = (Path(__file__).parent.parent / "docs" / "metrics.md").read_text().splitlines()
    (row,) = [s for s in docs if s.startswith("| `stszone_statefulset_zones_held` |")]
    assert "spec.nodeName" in row and "holds none" in row, row
    assert helped in docs


@pytest.mark.parametrize(
    ("node", "deleting", "status"),
    [("ghost", False, 1), ("ghost", True, 0), ("na", False, 0)],
    ids=["missing node", "set being deleted", "node of the cluster"],
)
def test_audit_counts_a_template_bound_to_a_missing_node_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], node: str, deleting: bool, status: int
) -> None:
    """No pod db's controller makes from a template bound to ghost ever runs: a problem the
    audit exits 1 for, with a PROBLEM line saying what to fix, as it does for an ordinal label
    no node carries (its pods stay Pending too). Not for a set being deleted (its controller
    makes no pod any more), nor for a template bound to a node of the cluster."""
    sts = _bound(b.statefulset(replicas=3, annotations=ABC), node)
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    path = tmp_path / "cluster.json"
    items = [*NODES, sts, b.sts_pod(ordinal=0, node="na")]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert main(["audit", "--cluster", str(path)]) == status
    out = capsys.readouterr().out
    problem = [s for s in out.splitlines() if s.startswith("  PROBLEM")]
    if status:
        assert problem == [
            "  PROBLEM: its pod template binds every pod to node ghost (spec.nodeName), which "
            "does not exist: they never run; correct or remove spec.nodeName"
        ], out
        assert out.rstrip().endswith("1 StatefulSet(s) with problems; 0 pod(s) misplaced."), out
    else:
        assert not problem, out
    assert main(["audit", "--cluster", str(path), "-o", "json"]) == status
    body = json.loads(capsys.readouterr().out)
    (listed,) = body["statefulsets"]
    assert (listed["missingNode"], body["problems"]) == ("ghost" if status else None, bool(status))


@pytest.mark.parametrize(
    ("replicas", "allowed"), [(2999, True), (1, False)], ids=["keeps both", "drops b"]
)
def test_an_advanced_statefulset_bound_to_a_missing_node_locates_only_its_pods(
    monkeypatch: pytest.MonkeyPatch, replicas: int, allowed: bool
) -> None:
    """shop/web at 3,000 replicas (ordinal 1 reserved), its template bound to ghost; web-0
    and web-2 run in a and b (made from an earlier template). Every other member has no pod, so
    the template alone says it holds no zone: the guard locates web-0 and web-2 and no other
    member, and still judges 3,000 -> 2,999 allowed and 3,000 -> 1 (web-2 is b's only pod)
    refused."""
    located: list[int] = []
    real = Locator.__call__

    def spy(self: Locator, ordinal: int) -> Located:
        located.append(ordinal)
        return real(self, ordinal)

    old = _bound(annotated(recorded_items("statefulsets.v1beta1.json")[0]))
    old["spec"]["replicas"] = 3000
    running = live_pods([0, 2], {0: "n-a", 2: "n-b"}.__getitem__)
    store = store_from_objects([*(b.node(f"n-{z}", z) for z in "abc"), old, *running])
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = replicas
    monkeypatch.setattr(Locator, "__call__", spy)
    decided = admission.validate(kruise_update(new, old=old), store=store, defaults=Defaults())
    assert decided.allowed is allowed, decided.message
    if not allowed:
        assert "would drop zone b (ordinal 2 is its only pod)" in decided.message, decided.message
    assert any("correct or remove spec.nodeName ghost" in w for w in decided.warnings)
    assert set(located) <= {0, 2}, sorted(set(located))[:20]
