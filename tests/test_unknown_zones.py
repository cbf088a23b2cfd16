"""The guard and the audit on messy clusters: pods placed before stszone, nodes that lost their
zone label, pods in zones outside the list, scaling to zero, a Scale of a malformed set.

Built on the recorded cluster (tests/fixtures/api: verify/web runs web-0 on lab-node-6 in
zone-c, web-1 on lab-node-1 in zone-a, web-2 on lab-node-2 in zone-b -- placed by the default
scheduler, not by ordinal -- and each pod carries the ``topology.kubernetes.io/zone`` label
Kubernetes 1.36 copied onto it at binding), asked through the recorded ``kubectl scale`` review.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders as b
from tests import guardref
from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.audit import audit
from webhook.rules.explain import explain_workload
from webhook.rules.policy import resolve_policy
from webhook.rules.risk import SetRisk
from webhook.rules.scaling import malformed_warning
from webhook.wire import review

ZONE_KEY = "topology.kubernetes.io/zone"
ABC = {"stszone.io/zones": "a,b,c"}


def scale(store: Store, old: int, new: int, *, name: str = "web", ns: str = "verify") -> Any:
    """/validate's answer to the recorded `kubectl scale` review, for ``name`` old -> new."""
    body = b.recorded_scale(name, namespace=ns, old=old, new=new)
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


def unlabel(lists: list[dict[str, Any]], node: str, *, pod: str | None = None) -> None:
    """Remove the zone label from a recorded node (and from a pod's own labels)."""
    del b.item(lists, "nodes-metadata-list", node)["metadata"]["labels"][ZONE_KEY]
    if pod is not None:
        del b.item(lists, "sts-pods-list", pod, namespace="verify")["metadata"]["labels"][ZONE_KEY]


# --- a pod that exists is located by facts only ----------------------------------------------


def test_unlabelled_node_and_pod_make_the_zone_unknown_not_the_rules() -> None:
    """web-1 runs in zone-a, but lab-node-1 lost its label and the pod has none of its own:
    its zone is unknown. The rule would say zone-b (ordinal 1 of zone-a,zone-b,zone-c) and so
    let 3 -> 2 drop web-2, the only pod in zone-b; the guard refuses, naming why."""
    lists = b.recorded_lists()
    unlabel(lists, "lab-node-1", pod="web-1")
    outcome = scale(store_from_objects(lists), 3, 2)
    assert (outcome.allowed, outcome.code, outcome.reason) == (False, 403, "ZoneUnknown")
    assert outcome.message == (
        "scale-down of web from 3 to 2 would drop zone zone-b (ordinal 2 is its only pod) unless "
        "kept ordinal 1, whose zone is unknown (node lab-node-1 has no label "
        "topology.kubernetes.io/zone), is there; the smallest replica count that keeps every "
        "zone is 3; label the node(s) with their zone, or set stszone.io/allow-zone-loss: "
        '"true" on the StatefulSet to force it'
    )


def test_the_pods_own_topology_label_locates_it() -> None:
    """The node lost its label but web-1 keeps the zone-a label Kubernetes copied onto it: it is
    in zone-a, so 3 -> 2 drops zone-b for certain."""
    lists = b.recorded_lists()
    unlabel(lists, "lab-node-1")
    outcome = scale(store_from_objects(lists), 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message.startswith(
        "scale-down of web from 3 to 2 would drop zone zone-b (ordinal 2 is its only pod); "
        "the smallest replica count that keeps every zone is 3"
    )


def test_a_scheduled_pods_volume_locates_it_when_node_and_pod_say_nothing() -> None:
    """verify/data-1 runs on lab-node-3 (zone-c): with both labels gone, its bound volume
    pv-zone-c still says zone-c, so 5 -> 2 keeps zone-c and drops zone-b (ordinals 2, 3)."""
    lists = b.recorded_lists()
    del b.item(lists, "nodes-metadata-list", "lab-node-3")["metadata"]["labels"][ZONE_KEY]
    del b.item(lists, "sts-pods-list", "data-1", namespace="verify")["metadata"]["labels"][ZONE_KEY]
    outcome = scale(store_from_objects(lists), 5, 2, name="data")
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message.startswith(
        "scale-down of data from 5 to 2 would drop zone zone-b (ordinals 2 and 3 are its only pods)"
    )


def test_a_pod_on_a_node_that_no_longer_exists_counts_where_its_replacement_goes() -> None:
    """web-1 is still bound to node gone-7, which the recorded node list does not hold: the node
    was deleted, so PodGC deletes the pod and the controller re-creates it. It holds no zone;
    its ordinal counts in zone-b, where the rule puts the replacement: 3 -> 2 keeps it, and
    2 -> 1 drops zone-b, saying why."""
    lists = b.recorded_lists()
    b.item(lists, "sts-pods-list", "web-1", namespace="verify")["spec"]["nodeName"] = "gone-7"
    del b.item(lists, "sts-pods-list", "web-1", namespace="verify")["metadata"]["labels"][ZONE_KEY]
    store = store_from_objects(lists)
    assert scale(store, 3, 2).allowed
    (report,) = [s for s in audit(store).sets if s.name == "web"]
    row = report.rows[1]
    assert (row.node, row.status) == ("gone-7", "going") and report.unknown == ()
    assert row.why.endswith("its replacement goes to zone-b")
    assert SetRisk.of(report).unknown == 0
    outcome = scale(store, 2, 1)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message.startswith(
        "scale-down of web from 2 to 1 would drop zone zone-b (ordinal 1 is the only one there; "
        "web-1 is on node gone-7, which no longer exists (PodGC deletes the pod); its "
        "replacement goes to zone-b)"
    )


def test_a_pod_bound_by_its_template_to_a_missing_node_is_not_said_to_be_replaced_elsewhere() -> (
    None
):
    """db's template binds its pods to node ghost (spec.nodeName), which does not exist: db-0,
    bound there, is deleted by PodGC and re-created bound to ghost again, where no kubelet runs
    it. The audit does not say its replacement goes to zone a."""
    sts = b.statefulset(replicas=1, annotations=ABC)
    sts["spec"]["template"]["spec"]["nodeName"] = "ghost"
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    store = store_from_objects([*nodes, sts, b.sts_pod(ordinal=0, node="ghost")])
    (report,) = audit(store).sets
    row = report.rows[0]
    assert (row.node, row.status) == ("ghost", "going")
    assert "its replacement goes to" not in row.why, row.why
    assert (
        "its replacement is bound to the missing node ghost by the pod template's spec.nodeName: "
        "it never runs, and PodGC deletes it in turn"
    ) in row.why, row.why


def test_the_rule_still_answers_for_ordinals_without_a_scheduled_pod() -> None:
    """A pending pod (no node) and no volume: its zone is the rule's, not unknown (a ZoneLoss)."""
    pods = [b.sts_pod(ordinal=0, node="na"), b.sts_pod(ordinal=1, node="nb"), b.sts_pod(ordinal=2)]
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    store = store_from_objects([*nodes, b.statefulset(annotations=ABC), *pods])
    outcome = scale(store, 3, 2, name="db", ns="ns")
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert "zone c (ordinal 2 is the only one there; ordinal 2 is not running but the " in (
        outcome.message
    )


def test_allow_zone_loss_forces_a_scale_down_that_depends_on_an_unknown_zone() -> None:
    """The refusal says how to force it; with the annotation the scale-down passes, warned."""
    lists = b.recorded_lists()
    unlabel(lists, "lab-node-1", pod="web-1")
    web = b.item(lists, "statefulsets-list", "web", namespace="verify")
    web["metadata"]["annotations"]["stszone.io/allow-zone-loss"] = "true"
    outcome = scale(store_from_objects(lists), 3, 2)
    assert outcome.allowed
    assert outcome.warnings == (
        'web: 3 -> 2 may drop zone-b; allowed by stszone.io/allow-zone-loss="true" (remove it to '
        "re-arm the guard)",
        # What an UPDATE of spec.replicas to 2 is told too.
        "web: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone",
    )


def test_a_removed_ordinal_of_unknown_zone_may_hold_a_zone_no_kept_pod_holds() -> None:
    """web-2 (zone-b) loses both labels: 3 -> 2 keeps zone-c and zone-a, removes web-2 whose
    zone is unknown: zone-b may be lost, so the answer depends on it and is refused."""
    lists = b.recorded_lists()
    unlabel(lists, "lab-node-2")
    del b.item(lists, "sts-pods-list", "web-2", namespace="verify")["metadata"]["labels"][ZONE_KEY]
    outcome = scale(store_from_objects(lists), 3, 2)
    assert outcome.reason == "ZoneUnknown"
    assert outcome.message.startswith(
        "scale-down of web from 3 to 2 may drop zone zone-b, which no kept pod is known to hold: "
        "it removes ordinal 2, whose zone is unknown (node lab-node-2 has no label "
        "topology.kubernetes.io/zone)"
    )


# --- the audit agrees with the guard -----------------------------------------------------------


def test_audit_says_unknown_and_its_lowest_count_is_the_guards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stszone audit` on the same cluster: web-1's row is unknown with the reason, and the
    lowest safe count (3: no scale-down of web is safe) is exactly where the guard agrees."""
    lists = b.recorded_lists()
    unlabel(lists, "lab-node-1", pod="web-1")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": lists}))
    main(["audit", "--cluster", str(path), "--output", "json"])
    report = json.loads(capsys.readouterr().out)
    (web,) = [s for s in report["statefulsets"] if s["name"] == "web"]
    assert [
        (r["ordinal"], r["node"], r["zone"], r["status"], r["why"]) for r in web["ordinals"]
    ] == [
        (0, "lab-node-6", "zone-c", "MISPLACED", None),
        (
            1,
            "lab-node-1",
            None,
            "unknown",
            "node lab-node-1 has no label topology.kubernetes.io/zone",
        ),
        (2, "lab-node-2", "zone-b", "MISPLACED", None),
    ]
    assert web["lowestSafeReplicas"] == 3
    store = store_from_objects(lists)
    for count in range(1, 3):
        assert not scale(store, 3, count).allowed
    main(["audit", "--cluster", str(path)])
    assert (
        "  ordinal 1: zone unknown: node lab-node-1 has no label topology.kubernetes.io/zone"
        in capsys.readouterr().out.splitlines()
    )


# --- the guard protects the set's zones ---------------------------------------------------------


def test_pods_in_zones_outside_the_list_may_go_with_a_warning() -> None:
    """db lists a,b,c; ordinal 3 was placed in zone x before stszone: 4 -> 3 removes only it.
    Allowed, with a warning naming the pod and its unlisted zone."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c"), b.node("nx", "x")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc", "nx"])]
    store = store_from_objects([*nodes, b.statefulset(annotations=ABC, replicas=4), *pods])
    outcome = scale(store, 4, 3, name="db", ns="ns")
    assert outcome.allowed and outcome.warnings == (
        "db: 4 -> 3 removes zone x (ordinal 3), not in stszone.io/zones",
    )


def test_a_zone_taken_off_the_list_is_no_longer_protected() -> None:
    """The operator listed only a,b after ordinal 2 went to c: 3 -> 2 lets it go, warned."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"])]
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b"}, replicas=3)
    outcome = scale(store_from_objects([*nodes, sts, *pods]), 3, 2, name="db", ns="ns")
    assert outcome.allowed
    assert outcome.warnings == ("db: 3 -> 2 removes zone c (ordinal 2), not in stszone.io/zones",)


# --- scaling to zero; the scale subresource judged like an UPDATE -------------------------------


@pytest.mark.parametrize("path", ["scale", "update"])
def test_scaling_to_zero_stops_the_set_with_a_warning(path: str) -> None:
    """`kubectl scale --replicas=0` (no replicas field) and a patch to 0: allowed, warned."""
    store = store_from_objects(b.recorded_lists())
    if path == "scale":
        outcome = scale(store, 3, 0)
    else:
        recorded = b.fixture_review("024-StatefulSet-UPDATE")
        recorded["request"]["object"]["spec"]["replicas"] = 0
        outcome = review.answer(
            "validate", review.from_dict(recorded), store=store, defaults=Defaults()
        )
    assert outcome.allowed
    assert any("stops the set in every zone" in w for w in outcome.warnings), outcome.warnings


def test_scale_of_a_set_with_already_malformed_annotations_warns_and_is_guarded() -> None:
    """A Scale cannot change annotations: malformed ones warn, as on an UPDATE that leaves them,
    and an HPA scale-down that keeps every zone passes; one that drops a zone is still refused."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"] * 2)]
    broken = {"stszone.io/zones": "a,b,c", "stszone.io/scheduler-name": "Stszone"}
    sts = b.statefulset(annotations=broken, replicas=6)
    store = store_from_objects([*nodes, sts, *pods], zones=("a", "b", "c"))
    kept = scale(store, 6, 3, name="db", ns="ns")
    assert kept.allowed
    assert kept.warnings == (
        "StatefulSet db: stszone.io/scheduler-name 'Stszone' is not a valid scheduler name (a "
        "lower-case DNS-1123 subdomain) (unchanged by this scale; fix it)",
    )
    dropped = scale(store, 6, 2, name="db", ns="ns")
    assert (dropped.allowed, dropped.reason) == (False, "ZoneLoss")
    thin = (
        "db: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone"
    )
    assert dropped.warnings == (*kept.warnings, thin)  # as an UPDATE to 2 is told


@pytest.mark.parametrize(
    ("broken", "more"),
    [
        ({"stszone.io/mode": "x"}, ""),
        ({"stszone.io/mode": "x", "stszone.io/scheduler-name": "Stszone"}, "+1 more; "),
        (
            {
                "stszone.io/mode": "x",
                "stszone.io/scheduler-name": "Stszone",
                "stszone.io/storage-class-template": "{bad}",
            },
            "+2 more; ",
        ),
    ],
)
def test_a_scale_warns_of_the_first_malformed_annotation_and_counts_the_rest(
    broken: dict[str, str], more: str
) -> None:
    """The warning gives one problem in full and how many more there are."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"] * 2)]
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **broken}, replicas=6)
    store = store_from_objects([*nodes, sts, *pods], zones=("a", "b", "c"))
    (warning,) = scale(store, 6, 3, name="db", ns="ns").warnings
    assert warning.startswith("StatefulSet db: stszone.io/")
    assert warning.endswith(f" ({more}unchanged by this scale; fix it)")


def test_a_long_malformed_annotation_is_shortened_so_the_warning_keeps_its_tail() -> None:
    """A problem quoting a long value is cut inside, within the API server's 256 characters:
    the end, which says why the scale is allowed and what to do, is what the reader needs."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"] * 2)]
    broken = {"stszone.io/zones": "a,b,c", "stszone.io/scheduler-name": "S" * 300}
    sts = b.statefulset(annotations=broken, replicas=6)
    store = store_from_objects([*nodes, sts, *pods], zones=("a", "b", "c"))
    (warning,) = scale(store, 6, 3, name="db", ns="ns").warnings
    assert len(warning) == 256
    assert warning.startswith("StatefulSet db: stszone.io/scheduler-name 'SSS")
    assert warning.endswith("SSS [...] (unchanged by this scale; fix it)")


def test_a_problem_is_cut_only_when_the_whole_warning_would_pass_256_characters() -> None:
    tail = " (+1 more; unchanged by this update; fix it)"
    fits = 256 - len("StatefulSet db: ") - len(tail)
    whole = malformed_warning("db", ["p" * fits, "q"], by="update")
    assert whole == f"StatefulSet db: {'p' * fits}{tail}"
    cut = malformed_warning("db", ["p" * (fits + 1), "q"], by="update")
    assert cut == f"StatefulSet db: {'p' * (fits - 6)} [...]{tail}"


# --- property: the guard with unknown zones against the rules read independently -------------

#: Where a pod may be: a node of zone a/b/c, a node of zone x (not listed), a node without a
#: zone label ("bare"), a node the view does not hold ("ghost"), or not scheduled (None).
PLACES = st.sampled_from(["a", "b", "c", "x", "bare", "ghost", None])
NODES = [b.node(f"n{z}", z) for z in "abcx"] + [b.node("nbare", None)]


@given(
    pods=st.dictionaries(
        st.integers(0, 11),
        st.tuples(PLACES, st.sampled_from([None, "a", "b", "c"])),  # (node, the pod's own label)
        max_size=10,
    ),
    volumes=st.dictionaries(st.integers(0, 11), st.sampled_from(["a", "b", "c", "x"]), max_size=4),
    recorded=st.dictionaries(st.integers(0, 11), st.sampled_from(["a", "b", "c", "x"]), max_size=4),
    template=st.booleans(),
    listed=st.sampled_from(["a,b,c", "a,b", "c,a,b,x"]),
    allow=st.booleans(),
    old=st.integers(1, 12),
    data=st.data(),
)
def test_property_guard_with_unknown_zones_follows_the_rules(
    pods: dict[int, tuple[str | None, str | None]],
    volumes: dict[int, str],
    recorded: dict[int, str],
    template: bool,
    listed: str,
    allow: bool,
    old: int,
    data: Any,
) -> None:
    """Any mix of labelled, unlabelled, missing and unscheduled nodes, pods' own labels, bound
    volumes and claims not bound yet recorded in a zone (which hold their pod with a
    storage-class template): the guard refuses exactly when the rules (tests/guardref.py) say
    so, with ZoneUnknown exactly when an unknown zone decides; allow-zone-loss turns every
    refusal into a warning; zero always passes; the audit's lowest count is the smallest the
    guard allows, and explain counts each member where the rules do."""
    new = data.draw(st.integers(0, old - 1), label="new")
    objs: list[dict[str, Any]] = []
    for o, (place, own) in pods.items():
        pod = b.sts_pod(ordinal=o, node=f"n{place}" if place else None)
        if own is not None:
            pod["metadata"]["labels"][ZONE_KEY] = own
        objs.append(pod)
    for o, zone in volumes.items():
        objs += [b.pvc(f"data-db-{o}", volume=f"pv-{o}"), b.pv(f"pv-{o}", zone)]
    for o, zone in recorded.items():
        if o not in volumes:
            claim = b.pvc(f"data-db-{o}")
            claim["metadata"]["annotations"] = {"stszone.io/zone": zone}
            objs.append(claim)
    annotations = {"stszone.io/zones": listed, "stszone.io/allow-zone-loss": str(allow).lower()}
    if template:
        annotations["stszone.io/storage-class-template"] = "ssd-{zone}"
    store = guardref.view([*NODES, b.statefulset(annotations=annotations, replicas=old), *objs])
    policy = resolve_policy("ns", "db", store=store)
    want, lowest = guardref.walk(store, policy, range(old), range(new))
    outcome = scale(store, old, new, name="db", ns="ns")
    if new == 0 or not want.refused or allow:
        assert outcome.allowed, outcome.message
    else:
        assert not outcome.allowed
        assert outcome.reason == ("ZoneUnknown" if want.depends_on_unknown else "ZoneLoss")
        assert "stszone.io/allow-zone-loss" in outcome.message
    (report,) = [s for s in audit(store).sets if s.name == "db"]
    assert report.lowest == lowest
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    counted = [m.guard.zone or m.guard.counts for m in explained.members]
    assert counted == [guardref.locate(store, policy, o) for o in range(old)]
