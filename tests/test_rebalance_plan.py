"""The rebalance planner on saved clusters: movable, pinned by data, blocked, and the order.

Zones zone-a, zone-b, zone-c; nodes a1 a2 | b1 b2 | c1 c2 (tests/rebalancing.py). The rule puts
ordinal i in zones[i mod 3]: 0 a, 1 b, 2 c, 3 a, 4 b, 5 c.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders as b
from tests import rebalancing as r
from webhook.cluster.snapshot import Snapshot, from_objects
from webhook.errors import BadObject, ConfigError
from webhook.model.records import NodeInfo
from webhook.model.state import live_state, set_state
from webhook.rules.blockers import selected, some
from webhook.rules.placement import place
from webhook.rules.policy import resolve_policy
from webhook.rules.rebalance import chosen, plan
from webhook.rules.rebalance_plan import Plan, SetPlan

JSON = dict[str, Any]


def planned(objects: list[JSON], *, move_data: bool = False, **narrow: Any) -> Plan:
    snap: Snapshot = from_objects(objects)
    sets = chosen(snap.store, excluded={"kube-system", "stszone-system"}, **narrow)
    return plan(snap.store, snap.state, sets=sets, move_data=move_data)


def only(result: Plan) -> SetPlan:
    (one,) = result.sets
    return one


def table(result: SetPlan) -> list[tuple[int, str | None, str, str, int | None]]:
    """(ordinal, zone now, target, class, step) per row."""
    return [(row.ordinal, row.zone, row.target, row.kind, row.step) for row in result.rows]


#: The seed's story: six ordinals, the lowest three in two zones; db-2's volume is in zone-b.
SEED = {0: "a1", 1: "a2", 2: "b1", 3: "c1", 4: "c2", 5: "b2"}
SEED_VOLUME = [r.claim("data-db-2", "pv-2"), r.volume("pv-2", "zone-b", "data-db-2")]


def seed(*, move_data: bool = False) -> SetPlan:
    sts = r.statefulset(6, templates=("data",))
    return only(planned(r.cluster(SEED, sts=sts, extra=SEED_VOLUME), move_data=move_data))


def test_seed_movable_pinned_and_the_coverage_keeping_order() -> None:
    """1, 3, 4, 5 are movable; 2 is pinned by its volume. Worked by hand: 1 a->b first (a keeps
    0); 3 c->a (c keeps 4); 4 may not leave c yet (the only pod there, and 2, 5 belong there),
    so 5 b->c, then 4 c->b."""
    result = seed()
    assert table(result) == [
        (0, "zone-a", "zone-a", "in place", None),
        (1, "zone-a", "zone-b", "movable", 1),
        (2, "zone-b", "zone-c", "pinned by data", None),
        (3, "zone-c", "zone-a", "movable", 2),
        (4, "zone-c", "zone-b", "movable", 4),
        (5, "zone-b", "zone-c", "movable", 3),
    ]
    assert [(s.pod, s.source, s.target, s.company) for s in result.steps] == [
        ("db-1", "zone-a", "zone-b", (0,)),
        ("db-3", "zone-c", "zone-a", (4,)),
        ("db-5", "zone-b", "zone-c", (1, 2)),
        ("db-4", "zone-c", "zone-b", (5,)),
    ]
    assert result.steps[0].uid == "uid-db-1" and result.steps[0].node == "a2"
    assert result.left == (2,)
    assert result.rows[2].notes == (
        "its volume pv-2 is in zone-b",
        "it moves only with --move-data, which deletes its data",
    )


def test_move_data_moves_the_pinned_ordinal_and_says_what_is_lost() -> None:
    """With --move-data, db-2 moves too, taking its claim (by uid) with it."""
    result = seed(move_data=True)
    row = result.rows[2]
    assert (row.kind, row.step is not None) == ("pinned by data", True)
    assert [(c.name, c.uid, c.volume) for c in row.claims] == [
        ("data-db-2", "uid-data-db-2", "pv-2")
    ]
    assert "the data on this replica is gone" in row.notes[1]
    assert result.left == ()
    step = next(s for s in result.steps if s.ordinal == 2)
    assert step.claims == row.claims


@pytest.mark.parametrize("reclaim", ["Retain", None])
def test_a_retained_volume_is_named_as_left_behind(reclaim: str | None) -> None:
    """Reclaim policy Retain (also the API's default for a PV that names none): the old volume
    outlives the claim; the plan says so."""
    pv = r.volume("pv-2", "zone-b", "data-db-2", reclaim=reclaim or "")
    if reclaim is None:
        del pv["spec"]["persistentVolumeReclaimPolicy"]
    extra = [r.claim("data-db-2", "pv-2"), pv]
    sts = r.statefulset(6, templates=("data",))
    result = only(planned(r.cluster(SEED, sts=sts, extra=extra), move_data=True))
    assert result.rows[2].notes[-1] == ("volume(s) pv-2 stay (reclaim policy Retain): delete later")


def test_a_statefulset_being_deleted_blocks_every_move() -> None:
    sts = r.statefulset(2)
    sts["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    result = only(planned(r.cluster({0: "b1", 1: "a1"}, sts=sts)))
    assert [row.kind for row in result.rows] == ["blocked", "blocked"]
    assert result.rows[0].notes == ("the StatefulSet is being deleted",)


def test_rotated_set_is_a_cycle_every_move_blocked_with_the_way_out() -> None:
    """3 replicas, each one zone off: any eviction empties a zone another ordinal needs."""
    result = only(planned(r.cluster({0: "b1", 1: "c1", 2: "a1"})))
    assert [row.kind for row in result.rows] == ["blocked"] * 3
    assert result.steps == ()
    assert result.rows[0].notes[0] == (
        "it is the only pod in zone-b: evicting it would leave zone-b empty until ordinal(s) 1 "
        "move there, and they wait for the same reason; scale db up by 3 first (the new "
        "ordinals hold every zone), run rebalance again, then scale back"
    )


def test_fewer_replicas_than_zones_may_empty_a_zone_the_rule_gives_nobody() -> None:
    """2 replicas: zone-c is nobody's rule zone, so db-0 may leave it; then db-1 follows."""
    result = only(planned(r.cluster({0: "c1", 1: "a1"})))
    assert [(s.pod, s.company) for s in result.steps] == [("db-0", ()), ("db-1", (0,))]


def test_cordoned_rule_zone_blocks_with_each_node_named() -> None:
    """Every node of zone-b cordoned or NotReady: db-1 cannot go there, so db-3, which would
    be the last pod in zone-b once db-0 has left, waits for it; db-0 goes."""
    nodes = [r.node(n, cordoned=n == "b1", ready=n != "b2") for n in r.NODES]
    result = only(planned(r.cluster({0: "b1", 1: "a1", 2: "c1", 3: "b2"}, nodes=nodes)))
    assert table(result) == [
        (0, "zone-b", "zone-a", "movable", 1),
        (1, "zone-a", "zone-b", "blocked", None),
        (2, "zone-c", "zone-c", "in place", None),
        (3, "zone-b", "zone-a", "blocked", None),
    ]
    assert result.rows[1].notes == ("no node of zone-b can take it (b1 cordoned, b2 NotReady)",)
    assert result.rows[3].notes == (
        "it is the only pod in zone-b: evicting it would leave zone-b empty until ordinal(s) 1 "
        "move there, which cannot move now (see their rows)",
    )


@pytest.mark.parametrize(
    ("tolerations", "blocked"),
    [
        ([], True),
        ([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}], False),
        ([{"operator": "Exists"}], False),
        ([{"key": "dedicated", "operator": "Equal", "value": "web"}], True),
        # operator defaults to Equal; no effect tolerates every effect
        ([{"key": "dedicated", "value": "db"}], False),
        ([{"key": "dedicated", "operator": "Equal"}], True),
        ([{"key": "dedicated", "operator": "Exists"}], False),
        ([{"key": "other", "operator": "Exists"}], True),
        ([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}], True),
        ([{"key": "dedicated", "value": "db", "effect": "PreferNoSchedule"}], True),
        ([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], False),
        # any one toleration that matches is enough
        ([{"key": "other", "operator": "Exists"}, {"key": "dedicated", "value": "db"}], False),
        (
            [
                {"key": "dedicated", "value": "db", "effect": "NoExecute"},
                {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            ],
            False,
        ),
    ],
)
def test_taints_block_unless_the_template_tolerates_them(
    tolerations: list[JSON], blocked: bool
) -> None:
    """Tainted NoSchedule nodes count only for pods that tolerate the taint."""
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    nodes = [r.node(n, taints=[taint] if n.startswith("b") else []) for n in r.NODES]
    sts = r.statefulset(3, tolerations=tolerations)
    result = only(planned(r.cluster({0: "a1", 1: "a2", 2: "c1"}, nodes=nodes, sts=sts)))
    assert (result.rows[1].kind == "blocked") is blocked


@pytest.mark.parametrize(
    ("effect", "blocked"), [("NoSchedule", True), ("NoExecute", True), ("PreferNoSchedule", False)]
)
def test_only_taints_the_scheduler_enforces_block(effect: str, blocked: bool) -> None:
    """NoSchedule and NoExecute keep a pod off a node; PreferNoSchedule only steers it."""
    taint = {"key": "dedicated", "value": "db", "effect": effect}
    nodes = [r.node(n, taints=[taint] if n.startswith("b") else []) for n in r.NODES]
    result = only(planned(r.cluster({0: "a1", 1: "a2", 2: "c1"}, nodes=nodes)))
    assert (result.rows[1].kind == "blocked") is blocked
    if blocked:
        assert result.rows[1].notes == (
            f"no node of zone-b can take it (b1 tainted dedicated:{effect}, "
            f"b2 tainted dedicated:{effect})",
        )


@pytest.mark.parametrize(
    ("tolerations", "blocked"),
    [
        ([], True),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], False),
        ([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], False),
        ([{"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute"}], True),
    ],
)
def test_a_cordon_is_the_unschedulable_taint(tolerations: list[JSON], blocked: bool) -> None:
    """A cordoned node takes pods that tolerate node.kubernetes.io/unschedulable:NoSchedule
    (the taint the node lifecycle controller adds with the cordon)."""
    nodes = [r.node(n, cordoned=n.startswith("b")) for n in r.NODES]
    sts = r.statefulset(3, tolerations=tolerations)
    result = only(planned(r.cluster({0: "a1", 1: "a2", 2: "c1"}, nodes=nodes, sts=sts)))
    assert (result.rows[1].kind == "blocked") is blocked


_SSD_IN = {"key": "disktype", "operator": "In", "values": ["ssd"]}
_HDD_IN = {"key": "disktype", "operator": "In", "values": ["hdd"]}


@pytest.mark.parametrize(
    ("selector", "terms", "admitted"),
    [
        ({}, [], True),
        ({"disktype": "ssd"}, [], True),
        ({"disktype": "hdd"}, [], False),
        ({"disktype": "ssd", "rack": "r1"}, [], False),
        ({}, [{"matchExpressions": [_SSD_IN]}], True),
        ({}, [{"matchExpressions": [_HDD_IN]}], False),
        # terms are ORed, the expressions of a term ANDed
        ({}, [{"matchExpressions": [_HDD_IN]}, {"matchExpressions": [_SSD_IN]}], True),
        ({}, [{"matchExpressions": [_SSD_IN, _HDD_IN]}], False),
        ({"disktype": "hdd"}, [{"matchExpressions": [_SSD_IN]}], False),
        # a label the node lacks: only NotIn and DoesNotExist admit it
        ({}, [{"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["x"]}]}], True),
        ({}, [{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}], True),
        ({}, [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["x"]}]}], False),
        ({}, [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}], False),
        # a requirement without a key cannot be parsed: its term selects no node
        ({}, [{"matchExpressions": [{"operator": "DoesNotExist"}]}], False),
        ({}, [{"matchExpressions": [{"key": "disktype", "operator": "Exists"}]}], True),
        ({}, [{"matchExpressions": [{"key": "disktype", "operator": "DoesNotExist"}]}], False),
        # an empty term selects no node; the other terms still may
        ({}, [{}], False),
        ({}, [{"matchExpressions": []}], False),
        ({}, [{}, {"matchExpressions": [_SSD_IN]}], True),
        # matchFields reads the node's name
        (
            {},
            [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}],
            True,
        ),
        (
            {},
            [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}],
            False,
        ),
    ],
)
def test_node_selector_and_required_affinity_decide_which_nodes_fit(
    selector: dict[str, str], terms: list[JSON], admitted: bool
) -> None:
    """blockers.selected on node n1, labelled disktype=ssd in zone-a."""
    node = NodeInfo(name="n1", labels={"disktype": "ssd", "topology.kubernetes.io/zone": "zone-a"})
    assert selected(node, terms=terms, selector=selector) is admitted


@pytest.mark.parametrize(
    ("names", "text"),
    [
        ([], ""),
        (["a"], "a"),
        (["a", "b", "c", "d", "e"], "a, b, c, d, e"),
        (["a", "b", "c", "d", "e", "f"], "a, b, c, d, e and 1 more"),
        (list("abcdefgh"), "a, b, c, d, e and 3 more"),
    ],
)
def test_a_reason_names_five_and_counts_the_rest(names: list[str], text: str) -> None:
    """blockers.some, the lists in every blocked row's reason."""
    assert some(iter(names)) == text


def test_template_node_selector_that_excludes_the_zone_blocks() -> None:
    """The pod template selects disktype=ssd, which only zone-a's nodes have."""
    nodes = [r.node(n) for n in r.NODES]
    for obj in nodes:
        if obj["metadata"]["name"].startswith("a"):
            obj["metadata"]["labels"]["disktype"] = "ssd"
    sts = r.statefulset(2)
    sts["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    result = only(planned(r.cluster({0: "a1", 1: "a2"}, nodes=nodes, sts=sts)))
    assert result.rows[1].kind == "blocked"
    assert result.rows[1].notes == (
        "no node of zone-b can take it (b1 outside the pod template's nodeSelector/nodeAffinity, "
        "b2 outside the pod template's nodeSelector/nodeAffinity)",
    )


def test_a_template_node_name_is_named_as_what_rules_the_other_nodes_out() -> None:
    """The pod template binds its pods to a1 (spec.nodeName): db-1 can go to no node of
    zone-b, and the reason names that nodeName, not a nodeSelector/nodeAffinity the template
    does not have."""
    sts = r.statefulset(2)
    sts["spec"]["template"]["spec"]["nodeName"] = "a1"
    result = only(planned(r.cluster({0: "a1", 1: "a1"}, sts=sts)))
    assert result.rows[1].kind == "blocked"
    assert result.rows[1].notes == (
        "no node of zone-b can take it (b1 not the pod template's spec.nodeName (a1), "
        "b2 not the pod template's spec.nodeName (a1))",
    )


_NO_EXECUTE = {"key": "dedicated", "value": "db", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("b1", "tolerations", "blocker"),
    [
        (r.node("b1", cordoned=True), [], None),
        (r.node("b1", taints=[{**_NO_EXECUTE, "effect": "NoSchedule"}]), [], None),
        (r.node("b1", taints=[_NO_EXECUTE]), [], "b1 tainted dedicated:NoExecute"),
        (r.node("b1", taints=[_NO_EXECUTE]), [{"key": "dedicated", "operator": "Exists"}], None),
        (r.node("b1", ready=False), [], "b1 NotReady"),
    ],
    ids=["cordoned", "NoSchedule", "NoExecute", "NoExecute-tolerated", "NotReady"],
)
def test_a_template_bound_by_node_name_meets_only_what_the_kubelet_checks(
    b1: JSON, tolerations: list[JSON], blocker: str | None
) -> None:
    """The template binds its pods to b1 (spec.nodeName), so they skip the scheduler: b1's
    kubelet admits them through a cordon (the scheduler's NodeUnschedulable filter) and a
    NoSchedule taint (its TaintToleration filter), and refuses only a NoExecute taint they do
    not tolerate (kubelet's admission, pkg/kubelet/lifecycle/predicate.go; the taint manager
    evicts such a pod too). A NotReady b1 has no kubelet to run it."""
    sts = r.statefulset(2, tolerations=tolerations)
    sts["spec"]["template"]["spec"]["nodeName"] = "b1"
    nodes = [b1 if n == "b1" else r.node(n) for n in r.NODES]
    result = only(planned(r.cluster({0: "a1", 1: "a2"}, nodes=nodes, sts=sts)))
    if blocker is None:
        assert (result.rows[1].kind, result.rows[1].notes) == ("movable", ())
    else:
        assert (result.rows[1].kind, result.rows[1].notes) == (
            "blocked",
            (
                f"no node of zone-b can take it ({blocker}, "
                "b2 not the pod template's spec.nodeName (b1))",
            ),
        )


def test_a_set_not_fully_ready_blocks_every_move() -> None:
    """db-2 is not Ready: nothing moves, and the reason names it."""
    objects = r.cluster({0: "b1", 1: "a1", 2: "c1"})
    objects[-1] = r.pod(2, "c1", ready=False)
    result = only(planned(objects))
    assert [row.kind for row in result.rows] == ["blocked", "blocked", "in place"]
    assert result.rows[0].notes == (
        "not every replica is Ready (2/3: db-2 not Ready); pods move only while all are",
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"updating": True},
            "a rolling update is under way; run rebalance once it has finished",
        ),
    ],
)
def test_set_level_reasons_block(change: dict[str, Any], reason: str) -> None:
    """A rollout under way blocks the set's moves."""
    result = only(planned(r.cluster({0: "b1", 1: "a1"}, sts=r.statefulset(2, **change))))
    assert result.rows[0].kind == "blocked" and result.rows[0].notes[0] == reason


@pytest.mark.parametrize(("generation", "observed"), [(3, 2), (1, None)], ids=["behind", "unset"])
def test_a_status_older_than_the_spec_blocks_every_move(
    generation: int, observed: int | None
) -> None:
    """`kubectl apply` of a new template bumps metadata.generation; until the controller writes
    status.observedGeneration its status still shows one revision, as if no rollout were
    coming. kubectl rollout status waits then ("Waiting for statefulset spec update to be
    observed"); a move would run alongside the rollout the change starts."""
    sts = r.statefulset(4)
    sts["metadata"]["generation"] = generation
    if observed is not None:
        sts["status"]["observedGeneration"] = observed
    four = {0: "a1", 1: "a2", 2: "c2", 3: "c1"}  # db-1 and db-3 movable once observed
    result = only(planned(r.cluster(four, sts=sts)))
    assert [row.kind for row in result.rows] == ["in place", "blocked", "in place", "blocked"]
    assert result.rows[1].notes[0] == (
        f"its controller has not yet observed generation {generation} of its spec "
        f"(status.observedGeneration {observed or 0}); run rebalance once it has"
    )
    sts["status"]["observedGeneration"] = generation
    observed_now = only(planned(r.cluster(four, sts=sts)))
    assert [row.kind for row in observed_now.rows] == ["in place", "movable", "in place", "movable"]


@pytest.mark.parametrize(
    ("part", "key", "path"),
    [
        ("metadata", "generation", "metadata.generation"),
        ("status", "observedGeneration", "status.observedGeneration"),
    ],
)
def test_a_malformed_generation_is_named_by_its_path(part: str, key: str, path: str) -> None:
    sts = r.statefulset(2)
    sts[part][key] = "3"
    with pytest.raises(BadObject, match=rf"^{re.escape(path)} must be an integer, got str$"):
        set_state(sts)


def test_a_set_whose_pod_template_is_skipped_has_nothing_to_rebalance() -> None:
    """Its pods are never placed by stszone (the objectSelector keeps them away), so none is
    outside a zone of stszone's: the plan lists the set with a note, no row, and is complete,
    as the audit reports none of its pods misplaced."""
    sts = r.statefulset(2, template_labels={"stszone.io/skip": "true"})
    plan = planned(r.cluster({0: "b1", 1: "a1"}, sts=sts))
    result = only(plan)
    assert (result.rows, result.steps, result.problem) == ((), (), "")
    assert (
        result.note
        == "its pod template is labelled stszone.io/skip=true: stszone places none of its pods"
    )
    assert plan.complete


def test_pod_on_a_node_without_a_zone_label_is_blocked_as_unknown() -> None:
    """The rule never answers for a scheduled pod: its zone is unknown, so it is blocked."""
    nodes = [*(r.node(n) for n in r.NODES), r.node("x1")]
    result = only(planned(r.cluster({0: "x1", 1: "b1"}, nodes=nodes)))
    assert (result.rows[0].kind, result.rows[0].zone) == ("blocked", None)
    assert result.rows[0].notes == (
        "its zone is unknown: node x1 has no label topology.kubernetes.io/zone",
    )


def test_claim_owned_by_its_pod_blocks_an_eviction_that_would_lose_it() -> None:
    """whenScaled: Delete left data-db-0 owned by pod db-0: evicting would garbage-collect it."""
    extra = [r.claim("data-db-0", "", owner_pod="db-0")]
    sts = r.statefulset(2, templates=("data",), retention=("Retain", "Delete"))
    result = only(planned(r.cluster({0: "b1", 1: "b2"}, sts=sts, extra=extra)))
    assert result.rows[0].kind == "blocked"
    assert result.rows[0].notes == (
        "claim data-db-0 is owned by pod db-0 (persistentVolumeClaimRetentionPolicy whenScaled: "
        "Delete, from a scale-down): evicting the pod would let the garbage collector delete "
        "the claim and its data",
    )


def test_a_claim_being_deleted_blocks_an_eviction_that_would_let_it_go() -> None:
    """data-db-0 was deleted while db-0 mounts it (pvc-protection keeps it): once the pod is
    evicted the claim goes, with its data, and db-0 comes back on a fresh empty one -- the cost
    of --move-data, without --move-data. Its volume pins no zone, so db-0 is no data move."""
    doomed = r.claim("data-db-0", "")
    doomed["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    doomed["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
    sts = r.statefulset(2, templates=("data",))
    result = only(planned(r.cluster({0: "b1", 1: "b2"}, sts=sts, extra=[doomed])))
    assert (result.rows[0].kind, result.rows[0].step) == ("blocked", None)
    assert result.rows[0].notes == (
        "claim data-db-0 is being deleted: evicting db-0 would let it go with its data, and the "
        "pod would come back on a fresh, empty claim",
    )


@pytest.mark.parametrize(
    "ref",
    [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "db-0", "uid": "u"},
        {"apiVersion": "example.io/v1", "kind": "Pod", "name": "db-0", "uid": "u"},
    ],
)
def test_only_a_pod_owner_makes_a_claim_go_with_the_pod(ref: JSON) -> None:
    """An owner of another kind (or a Pod of another API group) named like the pod is not it."""
    claim = r.claim("data-db-0", "")
    claim["metadata"]["ownerReferences"] = [ref]
    sts = r.statefulset(2, templates=("data",))
    result = only(planned(r.cluster({0: "b1", 1: "b2"}, sts=sts, extra=[claim])))
    assert result.rows[0].kind == "movable"


def test_owner_references_that_are_not_objects_are_named_by_their_path() -> None:
    claim = r.claim("data-db-0", "")
    claim["metadata"]["ownerReferences"] = ["db-0"]
    with pytest.raises(
        ConfigError,
        match=r"^cluster file: item \d+ \(PersistentVolumeClaim\): "
        r"metadata\.ownerReferences\[0\] must be an object$",
    ):
        planned(r.cluster({0: "b1"}, extra=[claim]))


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _terms(*terms: Any) -> JSON:
    return {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(
    ("affinity", "where"),
    [
        ([], "affinity must be an object"),
        ({"nodeAffinity": []}, "affinity.nodeAffinity must be an object"),
        ({"nodeAffinity": {_REQUIRED: []}}, f"affinity.nodeAffinity.{_REQUIRED} must be an object"),
        (
            {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": {}}}},
            f"affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms must be a list",
        ),
        (
            _terms({"matchExpressions": []}, {"matchExpressions": "zone-a"}),
            f"affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[1].matchExpressions must be a list",
        ),
        (
            _terms({"matchFields": {}}),
            f"affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[0].matchFields must be a list",
        ),
    ],
)
def test_a_set_whose_node_terms_are_malformed_is_refused_at_load(affinity: Any, where: str) -> None:
    """The plan reads the template's terms node by node: a malformed one is refused with its
    path when the file is read, not met mid-plan."""
    sts = r.statefulset(2)
    sts["spec"]["template"]["spec"]["affinity"] = affinity
    refused = (
        rf"^cluster file: item \d+ \(StatefulSet\): spec\.template\.spec\.{re.escape(where)}, got "
    )
    with pytest.raises(ConfigError, match=refused):
        planned(r.cluster({0: "b1"}, sts=sts))


def test_sets_chosen_by_opt_in_namespace_and_name() -> None:
    """Opted-in namespaces only; -n narrows to one, --statefulset to one set."""
    web = r.statefulset(1, name="web")
    other = r.statefulset(1, name="lab")
    other["metadata"]["namespace"] = "lab"
    objects = [*r.cluster({0: "a1"}), web, r.namespace("lab", enabled=False), other]
    assert [s.name for s in planned(objects).sets] == ["db", "web"]
    assert [s.name for s in planned(objects, statefulset=("shop", "web")).sets] == ["web"]
    assert planned(objects, namespace="lab").sets == ()


def test_node_ordinal_sets_are_noted_and_malformed_ones_are_problems() -> None:
    """Nothing to rebalance in node-ordinal mode (not a failure); bad annotations are one."""
    pinned = r.statefulset(
        1, annotations={"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "n"}
    )
    result = planned(r.cluster({0: "a1"}, sts=pinned))
    assert only(result) == SetPlan(
        "shop",
        "db",
        r.ZONES,
        1,
        note="node-ordinal mode pins ordinals to labelled nodes, not zones: nothing to rebalance",
    )
    assert result.complete
    broken = r.statefulset(1, annotations={"stszone.io/mode": "sideways"})
    result = planned(r.cluster({0: "a1"}, sts=broken))
    one = only(result)
    assert (one.namespace, one.name, one.zones, one.replicas, one.rows) == ("shop", "db", (), 1, ())
    assert "malformed stszone annotations" in one.problem and not result.complete


def test_a_set_with_no_zone_list_anywhere_is_a_problem() -> None:
    """No stszone.io/zones, no --zones, no node with a zone label: nothing to plan against."""
    listless = r.statefulset(2)
    del listless["metadata"]["annotations"]["stszone.io/zones"]
    result = planned(r.cluster({0: None, 1: None}, sts=listless, nodes=[b.node("x1", None)]))
    assert only(result) == SetPlan(
        "shop",
        "db",
        (),
        2,
        problem="no zone list: no stszone.io/zones on it, no --zones, and no node labelled "
        "topology.kubernetes.io/zone",
    )
    assert not result.complete


def test_the_recorded_cluster_has_pinned_unready_and_cycling_sets() -> None:
    """The API responses recorded from a real v1.36 server (tests/fixtures/api), all opted in
    (no Namespace objects). By hand, from the recordings: cap/db's two pods run where their
    volumes are, both off their rule zones (pinned); rec's pods are not Ready (blocked);
    verify/web is rotated by one zone, a cycle (blocked); verify/data has ordinal 0 in place and
    1-4 pinned by their volumes."""
    names = ("nodes-metadata-list", "pv-list", "pvc-list", "statefulsets-list", "sts-pods-list")
    docs: list[Any] = [b.fixture_api(name) for name in names]
    snap = from_objects(docs)
    result = plan(snap.store, snap.state, sets=chosen(snap.store))
    kinds = {(s.namespace, s.name): [row.kind for row in s.rows] for s in result.sets}
    assert kinds == {
        ("cap", "db"): ["pinned by data"] * 2,
        ("rec", "rec"): ["blocked"] * 2,
        ("verify", "data"): ["in place", *["pinned by data"] * 4],
        ("verify", "web"): ["blocked"] * 3,
    }
    by_name = {s.name: s for s in result.sets}
    assert by_name["db"].rows[0].notes[0] == "its volume pv-cap-zone-c-1 is in zone-c"
    assert by_name["rec"].rows[0].notes[0].startswith("not every replica is Ready (0/2")
    assert "scale web up by 3 first" in by_name["web"].rows[0].notes[0]
    assert result.steps == () and not result.complete


# --- the order, as a property -------------------------------------------------------------------


@given(
    st.lists(st.sampled_from(sorted(r.NODES)), min_size=1, max_size=9),
    st.none() | st.dictionaries(st.integers(0, 8), st.sampled_from(r.ZONES), max_size=3),
)
def test_no_step_evicts_the_last_pod_of_a_zone_another_ordinal_belongs_in(
    nodes: list[str], recorded: dict[int, str] | None
) -> None:
    """Replaying the steps: each leaves its source zone held (by its company) unless the rule
    gives that zone to nobody else; every move lands (placement puts the re-created pod in its
    target, even with a storage-class template and claims not bound yet, recorded in a zone);
    moves left blocked by the order are truly stuck (none of them could go next)."""
    where = dict(enumerate(nodes))
    sts, claims = None, []
    if recorded is not None:
        template = {"stszone.io/storage-class-template": "ssd-{zone}"}
        sts = r.statefulset(len(where), templates=("data",), annotations=template)
        for o, zone in recorded.items():
            claim = b.pvc(f"data-db-{o}", namespace=r.NAMESPACE)
            claim["metadata"]["annotations"] = {"stszone.io/zone": zone}
            claims.append(claim)
    objects = r.cluster(where, sts=sts, extra=claims)
    result = only(planned(objects))
    store = from_objects(objects).store
    policy = resolve_policy(r.NAMESPACE, "db", store=store)
    for step in result.steps:
        assert place(step.ordinal, namespace=r.NAMESPACE, policy=policy, store=store).zone == (
            step.target
        )
    zone_of = {o: r.NODES[n] for o, n in where.items()}
    rule = {o: r.ZONES[o % 3] for o in where}
    for step in result.steps:
        assert zone_of[step.ordinal] == step.source
        others = {o for o, z in zone_of.items() if z == step.source and o != step.ordinal}
        assert set(step.company) == others
        belongs = {o for o, z in rule.items() if z == step.source and o != step.ordinal}
        assert others or not belongs
        zone_of[step.ordinal] = step.target
    blocked = [row for row in result.rows if row.kind == "blocked"]
    for row in blocked:
        assert row.zone is not None
        held = {o for o, z in zone_of.items() if z == row.zone and o != row.ordinal}
        assert not held and any(z == row.zone for o, z in rule.items() if o != row.ordinal)
    # A pod whose claim holds it elsewhere stays (its pod comes back with the claim).
    stays = {row.ordinal for row in result.rows if row.kind in ("blocked", "pinned by data")}
    assert all(zone_of[o] == rule[o] for o in where if o not in stays)


# --- rows, claims and order in detail ------------------------------------------------------------


def test_the_rule_counts_from_spec_ordinals_start() -> None:
    """ordinals.start 1: ordinal i goes to zones[(i - 1) mod 3], so 1 a, 2 b, 3 c; db-3 on a2
    is the one misplaced."""
    sts = r.statefulset(3)
    sts["spec"]["ordinals"] = {"start": 1}
    result = only(planned(r.cluster({1: "a1", 2: "b1", 3: "a2"}, sts=sts)))
    assert table(result) == [
        (1, "zone-a", "zone-a", "in place", None),
        (2, "zone-b", "zone-b", "in place", None),
        (3, "zone-a", "zone-c", "movable", 1),
    ]


def test_an_ordinal_without_a_running_pod_has_no_node_and_no_zone() -> None:
    """db-1 is Pending (no node), db-2 has no pod: neither runs anywhere, so neither row has a
    node or a zone, and neither is a move (the set is blocked for them meanwhile)."""
    objects = r.cluster({0: "a1", 1: None}, sts=r.statefulset(3))
    result = only(planned(objects))
    assert [(row.ordinal, row.node, row.zone, row.kind) for row in result.rows[1:]] == [
        (1, "", None, "in place"),
        (2, "", None, "in place"),
    ]


def _two_claims(extra: list[JSON], *, logs: JSON) -> SetPlan:
    """SEED with templates data and logs: db-2 mounts both, its data volume pv-2 in zone-b."""
    objects = r.cluster(SEED, sts=r.statefulset(6, templates=("data", "logs")), extra=extra)
    pod = next(o for o in objects if o["metadata"]["name"] == "db-2" and o["kind"] == "Pod")
    pod["spec"]["volumes"].append(
        {"name": "logs", "persistentVolumeClaim": {"claimName": "logs-db-2"}}
    )
    return only(planned([*objects, logs], move_data=True))


def test_move_data_names_every_claim_and_every_retained_volume() -> None:
    """Both of db-2's volumes are in zone-b and kept on Retain: the claims go, both volumes
    stay behind to delete by hand."""
    extra = [
        r.claim("data-db-2", "pv-2"),
        r.volume("pv-2", "zone-b", "data-db-2", reclaim="Retain"),
        r.volume("pv-logs-2", "zone-b", "logs-db-2", reclaim="Retain"),
    ]
    row = _two_claims(extra, logs=r.claim("logs-db-2", "pv-logs-2")).rows[2]
    assert row.notes == (
        "its volumes pv-2, pv-logs-2 are in zone-b",
        "--move-data deletes claim(s) data-db-2, logs-db-2 with the pod: the data on this "
        "replica is gone and the database must re-replicate it",
        "volume(s) pv-2, pv-logs-2 stay (reclaim policy Retain): delete later",
    )


def test_move_data_deletes_an_unbound_claim_too_and_a_deleted_volume_is_not_left() -> None:
    """logs-db-2 is Pending (no volume); pv-2 is reclaimed with Delete: both claims go, no
    volume is named, and nothing is said to stay behind."""
    extra = [r.claim("data-db-2", "pv-2"), r.volume("pv-2", "zone-b", "data-db-2")]
    pending = b.pvc("logs-db-2", namespace=r.NAMESPACE)
    pending["metadata"]["uid"] = "uid-logs-db-2"
    row = _two_claims(extra, logs=pending).rows[2]
    assert [(c.name, c.uid, c.volume) for c in row.claims] == [
        ("data-db-2", "uid-data-db-2", "pv-2"),
        ("logs-db-2", "uid-logs-db-2", ""),
    ]
    assert not any("reclaim policy" in note for note in row.notes)


def test_move_data_with_a_prebound_volume_and_no_claim_says_none_is_found() -> None:
    """pv-2 names data-db-2 in its claimRef, so it pins db-2 to zone-b, but no claim object
    exists: --move-data has no claim to delete, and says so."""
    sts = r.statefulset(6, templates=("data",))
    extra = [r.volume("pv-2", "zone-b", "data-db-2")]
    row = only(planned(r.cluster(SEED, sts=sts, extra=extra), move_data=True)).rows[2]
    assert (row.kind, row.claims) == ("pinned by data", ())
    assert row.notes[1] == (
        "--move-data deletes claim(s) (none found) with the pod: the data on this replica is "
        "gone and the database must re-replicate it"
    )


def test_a_move_that_brings_a_zone_back_goes_before_a_lower_ordinal() -> None:
    """db-0 b->a and db-2 a->c may both go first (b keeps db-1, a keeps db-3); zone-c has no
    pod, so db-2, which brings it back, goes first."""
    result = only(planned(r.cluster({0: "b1", 1: "b2", 2: "a1", 3: "a2"})))
    assert [(s.pod, s.source, s.target, s.company) for s in result.steps] == [
        ("db-2", "zone-a", "zone-c", (3,)),
        ("db-0", "zone-b", "zone-a", (1,)),
    ]


def test_leaving_a_zone_outside_the_list_keeps_no_company() -> None:
    """Both pods run in zone-d, which the set does not list: nobody belongs there, so no move
    out of it waits on another pod holding it."""
    outside = []
    for name in ("d1", "d2"):
        obj = b.node(name, "zone-d")
        obj["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
        outside.append(obj)
    nodes = [*(r.node(n) for n in r.NODES), *outside]
    result = only(planned(r.cluster({0: "d1", 1: "d2"}, nodes=nodes)))
    assert [(s.pod, s.source, s.target, s.company) for s in result.steps] == [
        ("db-0", "zone-d", "zone-a", ()),
        ("db-1", "zone-d", "zone-b", ()),
    ]


def test_sets_in_excluded_namespaces_are_never_chosen() -> None:
    """stszone's own namespace, opted in or not, is never planned (nor narrowed to)."""
    own = r.statefulset(1, name="own")
    own["metadata"]["namespace"] = "stszone-system"
    objects = [*r.cluster({0: "a1"}), r.namespace("stszone-system"), own]
    assert [s.name for s in planned(objects).sets] == ["db"]
    assert planned(objects, statefulset=("stszone-system", "own")).sets == ()


def test_a_terminating_pod_blocks_every_move_of_its_set() -> None:
    """db-1 is Ready but being deleted: the set is not whole while it goes, so nothing moves."""
    objects = r.cluster({0: "b1", 1: "b2"})
    objects[-1] = r.pod(1, "b2", deleting=True)
    result = only(planned(objects))
    assert result.rows[0].notes == (
        "not every replica is Ready (1/2: db-1 terminating); pods move only while all are",
    )


def test_a_pod_on_a_deleted_node_blocks_every_move_of_its_set() -> None:
    """db-0 still reports Ready, but its node is gone (PodGC deletes the pod): zone-a holds no
    running pod but db-1, so evicting db-1 would leave zone-a empty. The set is not whole."""
    result = only(planned(r.cluster({0: "gone", 1: "a1", 2: "c1", 3: "b1"})))
    assert result.steps == ()
    assert [row.kind for row in result.rows] == ["in place", "blocked", "in place", "blocked"]
    assert result.rows[1].notes == (
        "not every replica is Ready (3/4: db-0 on node gone, which no longer exists); pods "
        "move only while all are",
    )


# --- the live state the planner reads -----------------------------------------------------------


def _node_with(**spec: Any) -> JSON:
    obj = r.node("a1")
    obj["spec"].update(spec)
    return obj


def _set_with(change: Any, *, part: str = "spec") -> JSON:
    obj = r.statefulset(1)
    change(obj[part])
    return obj


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({**r.node("a1"), "status": {"conditions": ["Ready"]}}, r"status\.conditions\[0\]"),
        (_node_with(taints=["NoSchedule"]), r"spec\.taints\[0\]"),
        (_set_with(lambda s: s.update(template="x")), r"spec\.template must be an object"),
        (_set_with(lambda s: s.update(replicas="3")), r"spec\.replicas must be an integer"),
        (
            _set_with(lambda s: s["template"].update(spec="x")),
            r"spec\.template\.spec must be an object",
        ),
        (
            _set_with(lambda s: s["template"]["spec"].update(tolerations=["x"])),
            r"spec\.template\.spec\.tolerations\[0\] must be an object",
        ),
        (
            _set_with(lambda s: s.update(updateStrategy="RollingUpdate")),
            r"spec\.updateStrategy must be an object",
        ),
        (
            _set_with(lambda s: s.update(updateStrategy={"type": 1})),
            r"spec\.updateStrategy\.type must be a string",
        ),
        (
            _set_with(lambda s: s.update(updateStrategy={"rollingUpdate": 2})),
            r"spec\.updateStrategy\.rollingUpdate must be an object",
        ),
        (
            _set_with(lambda s: s.update(updateStrategy={"rollingUpdate": {"partition": "2"}})),
            r"spec\.updateStrategy\.rollingUpdate\.partition must be an integer",
        ),
        (
            _set_with(lambda s: s.update(minReadySeconds="30s")),
            r"spec\.minReadySeconds must be an integer",
        ),
        (
            _set_with(lambda s: s.update(updatedReplicas="1"), part="status"),
            r"status\.updatedReplicas must be an integer",
        ),
        (
            _set_with(lambda s: s.update(availableReplicas="1"), part="status"),
            r"status\.availableReplicas must be an integer",
        ),
    ],
)
def test_a_shape_the_state_cannot_read_is_named_by_its_path(item: JSON, message: str) -> None:
    with pytest.raises(BadObject, match=f"^{message}"):
        live_state([item])


def test_a_statefulset_without_replicas_has_one() -> None:
    """The API server defaults spec.replicas to 1; a set read without it is read the same."""
    obj = r.statefulset(3)
    del obj["spec"]["replicas"]
    assert set_state(obj).replicas == 1


def test_a_volume_reclaim_policy_is_read_and_defaults_to_retain() -> None:
    deleted = r.volume("pv-d", "zone-a", "data-db-0", reclaim="Delete")
    unset = r.volume("pv-u", "zone-a", "data-db-1")
    del unset["spec"]["persistentVolumeReclaimPolicy"]
    assert live_state([deleted, unset]).reclaim == {"pv-d": "Delete", "pv-u": "Retain"}


@pytest.mark.parametrize("updating", [False, True], ids=["same-revision", "template-changed"])
def test_an_on_delete_set_whose_template_changed_is_no_rollout_under_way(updating: bool) -> None:
    """With updateStrategy OnDelete the controller re-creates no pod by itself, and it moves
    status.currentRevision to updateRevision only for RollingUpdate (completeRollingUpdate in
    kubernetes' pkg/controller/statefulset/stateful_set_utils.go): after any template change
    the two differ until the template is put back. No rollout is under way that rebalance
    could wait for; deleting pods is how such a set takes its template, which is what
    rebalance does."""
    sts = r.statefulset(3, updating=updating)
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    sts["status"]["updatedReplicas"] = 1 if updating else 3
    result = only(planned(r.cluster({0: "a1", 1: "c1", 2: "c2"}, sts=sts)))
    assert [row.kind for row in result.rows] == ["in place", "movable", "in place"]
    # A pod deleted under OnDelete is re-created from the updated template: the move says so.
    said = [note for note in result.rows[1].notes if "OnDelete" in note]
    expected = ["OnDelete, 2 pod(s) not updated: the new pod takes the update"]
    assert said == (expected if updating else [])


@pytest.mark.parametrize(
    ("updated", "kinds"),
    [
        (1, ["in place", "movable", "in place"]),
        (0, ["in place", "blocked", "in place"]),
    ],
    ids=["partition-reached", "partition-pending"],
)
def test_a_staged_rollout_held_at_its_partition_is_no_rollout_under_way(
    updated: int, kinds: list[str]
) -> None:
    """Under RollingUpdate with ``partition: 2`` of 3 replicas the controller updates only
    ordinal 2 (updateStatefulSet walks down to the partition, kubernetes'
    pkg/controller/statefulset/stateful_set_control.go) and never completes the rollout
    (completeRollingUpdate wants every replica updated), so the revisions differ until the
    partition is lowered. The lab's controller wrote exactly this status: currentReplicas 2,
    updatedReplicas 1, the two revisions apart. Once ordinal 2 is updated nothing is rolling,
    and a pod evicted below the partition comes back at the current revision
    (newVersionedStatefulSetPod): rebalance may move it. Until then the rollout is under way."""
    sts = r.statefulset(3, updating=True)
    sts["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    sts["status"] |= {"currentReplicas": 3 - updated, "updatedReplicas": updated}
    result = only(planned(r.cluster({0: "a1", 1: "c1", 2: "c2"}, sts=sts)))
    assert [row.kind for row in result.rows] == kinds
    assert set_state(sts).updating is (updated == 0)


@pytest.mark.parametrize(
    ("replicas", "updated", "partition", "updating"),
    [
        (3, 2, None, True),
        (3, 3, None, False),
        (1, None, None, True),
        (4, 2, 1, True),
        (4, 3, 1, False),
    ],
    ids=["one-left", "all-updated", "none-updated-yet", "one-left-above-1", "all-above-1"],
)
def test_a_rollout_is_under_way_until_every_replica_above_its_partition_is_updated(
    replicas: int, updated: int | None, partition: int | None, updating: bool
) -> None:
    """The controller updates the replicas from the last ordinal down to the partition (0
    when unset); until all of them are, the rollout is under way. updatedReplicas is left out
    of the status while it is 0."""
    sts = r.statefulset(replicas, updating=True)
    if partition is not None:
        sts["spec"]["updateStrategy"] = {"rollingUpdate": {"partition": partition}}
    if updated is not None:
        sts["status"]["updatedReplicas"] = updated
    assert set_state(sts).updating is updating


@pytest.mark.parametrize(
    ("min_ready", "available", "read"),
    [(None, 2, None), (1, 2, 2), (30, None, 0)],
    ids=["unset", "one-second", "none-available-yet"],
)
def test_available_replicas_are_read_only_for_a_set_with_min_ready_seconds(
    min_ready: int | None, available: int | None, read: int | None
) -> None:
    """Without minReadySeconds a pod is available once Ready and the Ready check says it all;
    with any, availableReplicas counts (none when the status leaves it out)."""
    sts = r.statefulset(3)
    if min_ready is not None:
        sts["spec"]["minReadySeconds"] = min_ready
    if available is not None:
        sts["status"]["availableReplicas"] = available
    state = set_state(sts)
    assert (state.min_ready, state.available) == (min_ready or 0, read)


@pytest.mark.parametrize(
    ("strategy", "updating", "updated", "outdated"),
    [
        ("OnDelete", True, 1, 2),
        ("OnDelete", True, 3, 0),
        ("OnDelete", False, None, 0),
        ("RollingUpdate", True, 1, 0),
    ],
    ids=["on-delete-two-left", "on-delete-all-updated", "on-delete-settled", "rolling"],
)
def test_only_an_on_delete_set_with_its_revisions_apart_counts_pods_not_updated(
    strategy: str, updating: bool, updated: int | None, outdated: int
) -> None:
    """Under OnDelete currentRevision never moves, so with every pod updated the revisions stay
    apart and none is outdated; under RollingUpdate the controller updates them itself."""
    sts = r.statefulset(3, updating=updating)
    sts["spec"]["updateStrategy"] = {"type": strategy}
    if updated is not None:
        sts["status"]["updatedReplicas"] = updated
    assert set_state(sts).outdated == outdated
