"""A StatefulSet being deleted (``metadata.deletionTimestamp``: a foreground deletion, a
finalizer): its controller creates and deletes no pod any more, whatever ``spec.replicas``
says, so nobody scales it. ``stszone audit`` and ``stszone explain`` say it is being deleted
rather than offer a safe replica count or judge smaller sizes, and admission allows any
scale-down of it (UPDATE or ``/scale``) with a warning in the same words."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.test_metrics import parse
from webhook.cli import main
from webhook.cli.audit import render_json, render_text
from webhook.cli.explain_text import workload_json, workload_text
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.audit import audit
from webhook.rules.decision import Decision
from webhook.rules.explain import explain_workload
from webhook.rules.risk import RiskScan
from webhook.server.riskmetrics import ZoneRisk

ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}


def _cluster(*, deleting: bool, kruise: bool = False) -> Store:
    """db: three members in zone-a, zone-b, zone-c, each on its node; being deleted or not."""
    sts = b.statefulset("db", replicas=3, annotations=ZONES)
    if kruise:
        sts["apiVersion"] = "apps.kruise.io/v1beta1"
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    pods: list[dict[str, Any]] = [
        b.sts_pod("db", i, node=node) for i, node in enumerate(("a1", "b1", "c1"))
    ]
    if kruise:
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    nodes = [b.node("a1", "zone-a"), b.node("b1", "zone-b"), b.node("c1", "zone-c")]
    return store_from_objects([*nodes, sts, *pods])


def test_a_set_not_being_deleted_gets_its_lowest_count_and_each_size() -> None:
    """The contrast: three members, one per zone, so 3 is the lowest count keeping them all."""
    store = _cluster(deleting=False)
    report = audit(store)
    assert report.sets[0].lowest == 3
    assert "lowest replica count that keeps every zone: 3" in render_text(report)
    whole = explain_workload(store, "ns", "db")
    assert whole is not None and [a.replicas for a in whole.sizes] == [2, 1, 0]


@pytest.mark.parametrize("kruise", [False, True], ids=["apps", "kruise"])
def test_audit_of_a_set_being_deleted_offers_no_count(kruise: bool) -> None:
    store = _cluster(deleting=True, kruise=kruise)
    report = audit(store)
    (db,) = report.sets
    assert (db.lowest, db.deleting) == (None, True)
    text = render_text(report)
    assert "lowest replica count" not in text
    assert "is being deleted" in text and "creates and deletes no pod" in text
    body = render_json(report)["statefulsets"][0]
    judged = (body["lowestSafeReplicas"], body["lowestSafeJudged"], body["deleting"])
    assert judged == (None, False, True)  # no count judged, which is not "none keeps them all"
    assert [r["status"] for r in body["ordinals"]] == ["ok", "ok", "ok"]  # members still shown


@pytest.mark.parametrize("kruise", [False, True], ids=["apps", "kruise"])
def test_explain_of_a_set_being_deleted_judges_no_size(kruise: bool) -> None:
    group = "apps.kruise.io" if kruise else ""
    whole = explain_workload(_cluster(deleting=True, kruise=kruise), "ns", "db", group=group)
    assert whole is not None
    assert whole.sizes == () and whole.unjudged == 0 and len(whole.members) == 3
    text = workload_text(whole)
    assert "a scale-down to each smaller size" not in text and "->" not in text
    assert "is being deleted" in text and "creates and deletes no pod" in text
    body = workload_json(whole)
    assert (body["sizes"], body["deleting"]) == ([], True)


# --- admission agrees: a scale-down of a set being deleted removes no pod --------------------

#: What admission, audit and explain each say of a set being deleted, by kind.
DELETING = {
    "apps": "the StatefulSet is being deleted: its controller creates and deletes no pod, "
    "whatever its replicas say",
    "kruise": "the Advanced StatefulSet is being deleted: its controller creates and deletes no "
    "pod, whatever its replicas say",
}


def _set(replicas: int, *, deleting: bool, kruise: bool) -> dict[str, Any]:
    sts = b.statefulset("db", replicas=replicas, annotations=ZONES)
    if kruise:
        sts["apiVersion"] = "apps.kruise.io/v1beta1"
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    return sts


def _scale_down(store: Store, new: int, *, path: str, kruise: bool, deleting: bool) -> Decision:
    """db from 3 to ``new`` replicas through /validate, as the API server asks: by its /scale
    (a Scale, whose metadata carries no deletionTimestamp) or by an UPDATE of the set (both
    objects carry it: no update removes it)."""
    group = "apps.kruise.io" if kruise else "apps"
    if path == "scale":
        request = Request(
            "Scale", "autoscaling", "statefulsets", "scale", "UPDATE", "ns", "db",
            b.scale(replicas=new), b.scale(replicas=3), resource_group=group,
        )  # fmt: skip
    else:
        request = Request(
            "StatefulSet", group, "statefulsets", "", "UPDATE", "ns", "db",
            _set(new, deleting=deleting, kruise=kruise), _set(3, deleting=deleting, kruise=kruise),
            resource_group=group,
        )  # fmt: skip
    return validate(request, store=store, defaults=Defaults())


KINDS = pytest.mark.parametrize("kruise", [False, True], ids=["apps", "kruise"])
PATHS = pytest.mark.parametrize("path", ["scale", "update"])


@KINDS
@PATHS
def test_a_scale_down_that_drops_zones_is_refused_while_the_set_is_not_being_deleted(
    kruise: bool, path: str
) -> None:
    """The contrast: 3 -> 1 keeps zone-a only, so the guard refuses it."""
    store = _cluster(deleting=False, kruise=kruise)
    decision = _scale_down(store, 1, path=path, kruise=kruise, deleting=False)
    assert (decision.allowed, decision.reason) == (False, "ZoneLoss"), decision.message
    assert "the smallest replica count that keeps every zone is 3" in decision.message


@KINDS
@PATHS
def test_a_scale_down_of_a_set_being_deleted_is_allowed_with_a_warning(
    kruise: bool, path: str
) -> None:
    """db has a deletionTimestamp (a finalizer holds it): its controller creates and deletes no
    pod, so 3 -> 1 removes none; a tool scaling it down while tearing it down gets through,
    told why nothing was judged -- by /scale too, whose Scale says nothing of the deletion."""
    store = _cluster(deleting=True, kruise=kruise)
    decision = _scale_down(store, 1, path=path, kruise=kruise, deleting=True)
    assert decision.allowed, decision.message
    said = DELETING["kruise" if kruise else "apps"]
    assert decision.warnings[0] == f"db: not judged: {said}"
    # Nor is it told that 1 replica leaves a zone empty: it is being torn down.
    assert len(decision.warnings) == 1
    assert decision.notices == ()


def _update(old: dict[str, Any], new: dict[str, Any], *, store: Store, kruise: bool) -> Decision:
    group = "apps.kruise.io" if kruise else "apps"
    request = Request(
        "StatefulSet", group, "statefulsets", "", "UPDATE", "ns", "db", new, old,
        resource_group=group,
    )  # fmt: skip
    return validate(request, store=store, defaults=Defaults())


def _finalizer_removed(
    replicas: int, *, deleting: bool, kruise: bool, annotations: dict[str, str] | None = None
) -> Decision:
    """The answer to the update taking the finalizer example.io/hold off db (``replicas``,
    and ``annotations`` in place of :data:`ZONES`), which finishes its deletion when it is
    being deleted."""
    old, new = (_set(replicas, deleting=deleting, kruise=kruise) for _ in range(2))
    for sts, finalizers in ((old, ["example.io/hold"]), (new, [])):
        if annotations is not None:
            sts["metadata"]["annotations"] = dict(annotations)
        sts["metadata"]["finalizers"] = finalizers
    store = _cluster(deleting=deleting, kruise=kruise)
    return _update(old, new, store=store, kruise=kruise)


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_finishing_the_deletion_of_a_set_short_of_zones_warns_of_nothing(
    deleting: bool, kruise: bool
) -> None:
    """db has 1 replica for 3 zones and the finalizer example.io/hold. Any update of it while
    it lives hears that 1 replica leaves a zone empty; the patch taking the finalizer off to
    finish its deletion, the set being torn down, hears nothing."""
    decision = _finalizer_removed(1, deleting=deleting, kruise=kruise)
    assert decision.allowed, decision.message
    short = (
        "db: 1 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone"
    )
    assert decision.warnings == (() if deleting else (short,))
    assert decision.notices == ()


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_an_update_of_a_set_being_deleted_says_nothing_of_zones_without_nodes(
    deleting: bool, kruise: bool
) -> None:
    """db lists zone-d too, where no node is, and holds the finalizer example.io/hold. Any
    update of it while it lives hears that its pods there wait for a node; the patch taking the
    finalizer off a db being deleted hears nothing: no pod of it is created again."""
    four = {"stszone.io/zones": "zone-a,zone-b,zone-c,zone-d"}
    decision = _finalizer_removed(4, deleting=deleting, kruise=kruise, annotations=four)
    assert decision.allowed, decision.message
    waits = (
        "db: no node in zone(s) zone-d (topology.kubernetes.io/zone) yet; "
        "its pods there wait for one"
    )
    assert decision.warnings == (() if deleting else (waits,))
    assert decision.notices == ()


@KINDS
@PATHS
def test_admission_audit_and_explain_agree_on_a_set_being_deleted(kruise: bool, path: str) -> None:
    """Audit offers no lowest count and explain judges no size of a set being deleted; admission
    allows every smaller size, to zero included, saying so in the very words they print."""
    store = _cluster(deleting=True, kruise=kruise)
    said = DELETING["kruise" if kruise else "apps"]
    assert f"no replica count judged: {said}" in render_text(audit(store))
    group = "apps.kruise.io" if kruise else ""
    whole = explain_workload(store, "ns", "db", group=group)
    assert whole is not None and whole.sizes == ()
    assert f"no smaller size judged: {said}" in workload_text(whole)
    for new in (2, 1, 0):
        decision = _scale_down(store, new, path=path, kruise=kruise, deleting=True)
        assert decision.allowed, decision.message
        assert decision.warnings[0] == f"db: not judged: {said}"
        assert not any("stops the set" in w for w in decision.warnings)


# --- a misplaced pod of a set being deleted: shown, no problem, no alert ---------------------


def _misplaced_objects(*, deleting: bool, kruise: bool = False) -> list[dict[str, Any]]:
    """db as in :func:`_cluster`, but db-1 (its rule zone zone-b) runs on c2, in zone-c."""
    sts = _set(3, deleting=deleting, kruise=kruise)
    pods: list[dict[str, Any]] = [
        b.sts_pod("db", i, node=node) for i, node in enumerate(("a1", "c2", "c1"))
    ]
    if kruise:
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    nodes = [b.node(n, f"zone-{n[0]}") for n in ("a1", "b1", "c1", "c2")]
    return [*nodes, sts, *pods]


def _misplaced(*, deleting: bool, kruise: bool = False) -> Store:
    return store_from_objects(_misplaced_objects(deleting=deleting, kruise=kruise))


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_audit_counts_a_misplaced_pod_of_a_set_being_deleted_as_no_problem(
    deleting: bool, kruise: bool
) -> None:
    """db-1 sits in zone-c, not zone-b: a problem (exit 1) while db lives, since rebalance
    moves it; once db is being deleted, nothing moves it (rebalance refuses the set) and it
    goes with the set, so the row still says where it is but the audit finds no problem."""
    report = audit(_misplaced(deleting=deleting, kruise=kruise))
    (db,) = report.sets
    assert [(r.node, r.zone, r.status) for r in db.rows][1] == ("c2", "zone-c", "MISPLACED")
    assert db.misplaced == 1
    assert report.has_problems is not deleting
    assert render_json(report)["problems"] is not deleting
    text = render_text(report)
    if deleting:
        assert text.endswith(
            "No problems: the 1 misplaced pod(s) are of StatefulSets being deleted, "
            "which they go with."
        )
    else:
        assert text.endswith("1 StatefulSet(s) with problems; 1 pod(s) misplaced.")


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_the_zone_gauges_of_a_set_being_deleted_raise_no_alert(
    deleting: bool, kruise: bool
) -> None:
    """The same db: live, it holds 2 of its 3 zones with one pod misplaced, which
    StszoneStatefulSetLostZone (zones_held < zones and < replicas) and
    StszoneStatefulSetMisplacedPods (misplaced_pods > 0) alert on; being deleted, it exports
    its replicas only: no lowest safe count, nor unknown ordinals, which no judged scale-down
    hinges on."""
    risk = ZoneRisk(RiskScan(_misplaced(deleting=deleting, kruise=kruise)), ready=lambda: True,
                    interval=30, pause=0)  # fmt: skip
    asyncio.run(risk.refresh())
    kind = "AdvancedStatefulSet" if kruise else "StatefulSet"
    db = frozenset({("namespace", "ns"), ("statefulset", "db"), ("kind", kind)})
    samples = {n: v for (n, labels), v in parse(risk.exposition().decode()).items() if labels == db}
    if deleting:
        assert samples == {"stszone_statefulset_replicas": 3}
    else:
        assert samples == {
            "stszone_statefulset_replicas": 3,
            "stszone_statefulset_zones": 3,
            "stszone_statefulset_zones_held": 2,
            "stszone_statefulset_misplaced_pods": 1,
            "stszone_statefulset_unknown_zone_ordinals": 0,
            "stszone_statefulset_lowest_safe_replicas": 2,
        }


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
def test_stszone_audit_exits_0_for_a_misplaced_pod_of_a_set_being_deleted(
    deleting: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What CI sees: exit 1 for the live set's misplaced pod, 0 once the set is being
    deleted, its row still marked."""
    path = tmp_path / "cluster.json"
    items = _misplaced_objects(deleting=deleting)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["audit", "--cluster", str(path)]) == (0 if deleting else 1)
    assert "MISPLACED" in capsys.readouterr().out


# --- node-ordinal labels of a set being deleted: shown, no problem --------------------------

NODE_ORDINAL = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}


def _labelled_objects(*, deleting: bool, kruise: bool = False) -> list[dict[str, Any]]:
    """db in node-ordinal mode, its pods each on the node labelled with its ordinal, none
    misplaced; but label 1 is on n1 and on n1x, and 2 on no node (db-2 has no pod)."""
    sts = b.statefulset("db", replicas=3, annotations=NODE_ORDINAL)
    if kruise:
        sts["apiVersion"] = "apps.kruise.io/v1beta1"
    if deleting:
        sts["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    nodes = [
        b.node("n0", "zone-a", labels={"example.io/node": "0"}),
        b.node("n1", "zone-b", labels={"example.io/node": "1"}),
        b.node("n1x", "zone-b", labels={"example.io/node": "1"}),
        b.node("n2", "zone-c"),
    ]
    pods: list[dict[str, Any]] = [
        b.sts_pod("db", i, node=node) for i, node in enumerate(("n0", "n1"))
    ]
    if kruise:
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    return [*nodes, sts, *pods]


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_the_node_labels_of_a_set_being_deleted_are_no_problem(
    deleting: bool, kruise: bool
) -> None:
    """Ordinal 2's label is on no node and ordinal 1's on two: a problem while db lives (its
    controller re-creates a pod, which the label places); once db is being deleted no pod of it
    is created again, so the audit still lists them, not as a problem."""
    report = audit(store_from_objects(_labelled_objects(deleting=deleting, kruise=kruise)))
    (db,) = report.sets
    assert [r.status for r in db.rows] == ["ok", "ok", "no pod"]
    assert (db.missing_labels, db.duplicate_labels) == ((2,), {1: ("n1", "n1x")})
    assert report.has_problems is not deleting
    assert render_json(report)["problems"] is not deleting
    text = render_text(report)
    missing = "no node carries the ordinal label of ordinal(s) 2"
    several = "ordinal 1's label is on several nodes: n1, n1x"
    if deleting:
        aside = " (no problem: a set being deleted gets no new pod)"
        assert f"\n  {missing}{aside}\n" in text and f"\n  {several}{aside}\n" in text
        assert "PROBLEM" not in text and "with problems" not in text
    else:
        assert f"\n  PROBLEM: {missing}\n" in text and f"\n  PROBLEM: {several}\n" in text
        assert "1 StatefulSet(s) with problems" in text


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
def test_stszone_audit_exits_0_for_the_node_labels_of_a_set_being_deleted(
    deleting: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.json"
    items = _labelled_objects(deleting=deleting)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["audit", "--cluster", str(path)]) == (0 if deleting else 1)
    assert "no node carries the ordinal label of ordinal(s) 2" in capsys.readouterr().out


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_an_ordinal_of_unknown_zone_of_a_set_being_deleted_is_not_exported(
    deleting: bool, kruise: bool
) -> None:
    """db-1 runs on x1, a node with no zone label: while db lives, unknown_zone_ordinals says 1
    (a scale-down may hinge on it); once db is being deleted no scale-down of it is judged,
    and the gauge is left out as its lowest safe count is."""
    objects = [
        o for o in _misplaced_objects(deleting=deleting, kruise=kruise) if o["kind"] != "Pod"
    ]
    pods = [b.sts_pod("db", i, node=node) for i, node in enumerate(("a1", "x1", "c1"))]
    if kruise:
        for pod in pods:
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "apps.kruise.io/v1beta1"
    store = store_from_objects([*objects, b.node("x1", None), *pods])
    (db,) = audit(store).sets
    assert db.unknown == (1,)
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    unknown = {
        v for (n, _), v in parse(risk.exposition().decode()).items()
        if n == "stszone_statefulset_unknown_zone_ordinals"
    }  # fmt: skip
    assert unknown == (set() if deleting else {1})


# --- malformed annotations of a set being deleted: shown, no problem ------------------------


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_the_malformed_annotations_of_a_set_being_deleted_are_no_problem(
    deleting: bool, kruise: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """db's stszone.io/mode reads "zonez": a problem while db lives (its new pods are refused
    until it is fixed); once db is being deleted no pod of it is created again, so the audit
    still names it, says the set is being deleted, and exits 0."""
    objects = [
        o for o in _misplaced_objects(deleting=deleting, kruise=kruise) if o["kind"] != "Pod"
    ]
    (sts,) = (o for o in objects if o["kind"] == "StatefulSet")
    sts["metadata"]["annotations"] = {**ZONES, "stszone.io/mode": "zonez"}
    report = audit(store_from_objects(objects))
    (db,) = report.sets
    assert "stszone.io/mode" in db.problem and db.deleting is deleting
    assert report.has_problems is not deleting
    body = render_json(report)
    assert (body["problems"], body["statefulsets"][0]["deleting"]) == (not deleting, deleting)
    text = render_text(report)
    aside = " (no problem: a set being deleted gets no new pod)"
    if deleting:
        assert f"\n  {db.problem}{aside}\n" in text
        assert "PROBLEM" not in text and "with problems" not in text
    else:
        assert f"\n  PROBLEM: {db.problem}\n" in text
        assert "1 StatefulSet(s) with problems" in text
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    assert main(["audit", "--cluster", str(path)]) == (0 if deleting else 1)
    assert db.problem in capsys.readouterr().out


# --- a changed zone list or template of a set being deleted: nothing moves ------------------


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_a_new_zone_list_of_a_set_being_deleted_moves_no_member(
    deleting: bool, kruise: bool
) -> None:
    """A manifest re-applied with db's zones rotated: while db lives its three ordinals move
    when re-created, which the update warns of and records; once db is being deleted (a
    finalizer holds it) its controller re-creates no pod, so the update hears nothing of it."""
    old, new = (_set(3, deleting=deleting, kruise=kruise) for _ in range(2))
    new["metadata"]["annotations"] = {"stszone.io/zones": "zone-b,zone-c,zone-a"}
    decision = _update(old, new, store=_cluster(deleting=deleting, kruise=kruise), kruise=kruise)
    assert decision.allowed, decision.message
    moves = (
        "db: new stszone.io/zones moves 3 ordinal(s) when re-created: 0 (zone-a->zone-b) and 2 more"
    )
    assert decision.warnings == (() if deleting else (moves,))
    assert len(decision.notices) == (0 if deleting else 1)


@pytest.mark.parametrize("deleting", [False, True], ids=["live", "deleting"])
@KINDS
def test_a_template_of_a_set_being_deleted_that_excludes_listed_zones_is_allowed(
    deleting: bool, kruise: bool
) -> None:
    """The manifest re-applied pins db's pod template to zone-a by nodeSelector: while db lives
    that is refused (ZoneConflict: its ordinals of zone-b and zone-c could never be scheduled);
    once db is being deleted none of them is scheduled again, so the update is allowed, silent."""
    old = _set(3, deleting=deleting, kruise=kruise)
    new = _set(3, deleting=deleting, kruise=kruise)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
    decision = _update(old, new, store=_cluster(deleting=deleting, kruise=kruise), kruise=kruise)
    if deleting:
        assert decision.allowed, decision.message
        assert (decision.warnings, decision.notices) == ((), ())
    else:
        assert (decision.allowed, decision.reason) == (False, "ZoneConflict")
        assert "excludes zone(s) zone-b, zone-c" in decision.message


@KINDS
def test_a_set_being_deleted_still_refuses_annotations_changed_and_left_malformed(
    kruise: bool,
) -> None:
    """The ratchet holds: an update writing a malformed stszone.io/mode is refused, being
    deleted or not; the same manifest would be refused when the set is created again."""
    old = _set(3, deleting=True, kruise=kruise)
    new = _set(3, deleting=True, kruise=kruise)
    new["metadata"]["annotations"] = {**ZONES, "stszone.io/mode": "zonez"}
    decision = _update(old, new, store=_cluster(deleting=True, kruise=kruise), kruise=kruise)
    assert (decision.allowed, decision.reason) == (False, "Invalid")
    assert "stszone.io/mode 'zonez' is not a mode" in decision.message
