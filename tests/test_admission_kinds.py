"""Which requests reach the rules: an object is judged by its kind *and* API group.

The webhook configurations send only pods, claims and StatefulSets, but a cluster's operators
widen rules (``resources: ["*"]``) and other projects reuse the names (OpenKruise's
``apps.kruise.io`` StatefulSet). Each case first shows the real kind being changed or refused,
then the same object under another kind, group or operation left alone.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests import rebalancing as r
from webhook.cluster.clusterfile import store_from_objects
from webhook.cluster.snapshot import from_objects
from webhook.config import Defaults
from webhook.model import setkinds
from webhook.model.store import Store
from webhook.model.tables import EXTRACTORS, set_info, table_of
from webhook.rules.audit import audit
from webhook.rules.rebalance import chosen, plan
from webhook.wire import review

ZONES = {"stszone.io/zones": "a,b,c"}
KRUISE = Path(__file__).parent / "fixtures" / "kruise"


def view() -> Store:
    """db (zones a, b, c, template ``data``) and a node in each zone."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    return store_from_objects([b.statefulset(annotations=ZONES), *nodes])


def as_kind(body: dict[str, Any], kind: str, group: str, resource: str) -> dict[str, Any]:
    """The same review, for an object of ``group``/``kind`` (resource ``resource``)."""
    body = copy.deepcopy(body)
    request = body["request"]
    for field in ("kind", "requestKind"):
        request[field] = {"group": group, "version": "v1", "kind": kind}
    request["resource"] = {"group": group, "version": "v1", "resource": resource}
    request["object"]["kind"] = kind
    request["object"]["apiVersion"] = f"{group}/v1" if group else "v1"
    return body


def mutated(body: dict[str, Any]) -> review.Answer:
    return review.answer("mutate", review.from_dict(body), store=view(), defaults=Defaults())


def validated(body: dict[str, Any]) -> review.Answer:
    return review.answer("validate", review.from_dict(body), store=view(), defaults=Defaults())


@pytest.mark.parametrize(
    ("real", "kind", "group", "resource"),
    [
        (b.pvc("data-db-1"), "ConfigMap", "", "configmaps"),
        (b.pvc("data-db-1"), "PersistentVolumeClaim", "example.io", "claims"),
        (b.statefulset("web"), "StatefulSet", "apps.example.io", "statefulsets"),
        (b.statefulset("web"), "Deployment", "apps", "deployments"),
        (b.statefulset("web"), "ConfigMap", "", "configmaps"),
    ],
    ids=[
        "claim-as-configmap",
        "claim-of-a-crd",
        "lookalike-set",
        "set-as-deployment",
        "set-as-configmap",
    ],
)
def test_only_core_claims_and_apps_statefulsets_are_mutated(
    real: dict[str, Any], kind: str, group: str, resource: str
) -> None:
    """db's claim data-db-1 gets its zone and a set without stszone.io/zones gets the view's
    zones; the same bodies as another kind or group get nothing."""
    body = b.review(real)
    answer = mutated(body)
    assert answer.allowed and answer.patch, answer
    other = mutated(as_kind(body, kind, group, resource))
    assert other.allowed and not other.patch and not other.warnings, other


@pytest.mark.parametrize(
    ("operation", "kind", "group", "resource"),
    [
        ("UPDATE", "Pod", "", "pods"),
        ("CREATE", "ConfigMap", "", "configmaps"),
        ("CREATE", "Pod", "example.io", "pods"),
    ],
)
def test_only_a_core_pod_being_created_is_validated(
    operation: str, kind: str, group: str, resource: str
) -> None:
    """db-1 without its zone requirement is refused when created; an update of a pod (its
    affinity cannot change) and look-alikes are not checked."""
    pod = b.review(b.sts_pod("db", 1))
    real = validated(pod)
    assert (real.allowed, real.reason) == (False, "ZoneRequirementMissing")
    other = as_kind(pod, kind, group, resource)
    other["request"]["operation"] = operation
    other["request"]["oldObject"] = pod["request"]["object"] if operation == "UPDATE" else None
    assert validated(other).allowed


def _lookalike(obj: dict[str, Any], *, replicas: int) -> dict[str, Any]:
    """``obj`` as another project's ``apps.example.io/v1`` StatefulSet of the same name."""
    other = copy.deepcopy(obj)
    other["apiVersion"] = "apps.example.io/v1"
    other["spec"]["replicas"] = replicas
    return other


@pytest.mark.parametrize("lookalike_first", [False, True], ids=["after", "before"])
def test_a_saved_cluster_reads_statefulsets_of_apps_and_kruise_alone(lookalike_first: bool) -> None:
    """A cluster file holding db (apps/v1, three members in zones a, b, c) and another group's
    StatefulSet db of one replica: ``stszone audit --cluster`` audits the apps/v1 db alone,
    three replicas whose zones all hold, as the live view (which lists apps/v1 and
    apps.kruise.io only) does; the look-alike is neither db nor an Advanced StatefulSet."""
    sts = b.statefulset(annotations=ZONES)
    other = _lookalike(sts, replicas=1)
    sets = [other, sts] if lookalike_first else [sts, other]
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod("db", i, node=n) for i, n in enumerate(("na", "nb", "nc"))]
    (db,) = audit(store_from_objects([*nodes, *sets, *pods])).sets
    assert (db.name, db.group, db.replicas, db.held, db.lowest) == ("db", "", 3, ("a", "b", "c"), 3)
    alone = audit(store_from_objects([*nodes, _lookalike(sts, replicas=3)]))
    assert alone.sets == ()


@pytest.mark.parametrize("api_version", ["example.io/v1", "apps/v1"])
def test_a_saved_cluster_reads_core_pods_alone(api_version: str) -> None:
    """A cluster file holding db's three members in zones a, b, c and, after them, another
    group's Pod db-2 on zone a's node: the audit sees db-2 in zone c, as the live view (which
    lists core v1 pods only) does, not a member misplaced in zone a."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod("db", i, node=n) for i, n in enumerate(("na", "nb", "nc"))]
    other = {**b.sts_pod("db", 2, node="na"), "apiVersion": api_version}
    sts = b.statefulset(annotations=ZONES)
    (db,) = audit(store_from_objects([*nodes, sts, *pods, other])).sets
    assert (db.held, db.lowest, db.misplaced) == (("a", "b", "c"), 3, 0)
    # A hand-written file's pods name no apiVersion: read by their kind.
    bare = [{k: v for k, v in pod.items() if k != "apiVersion"} for pod in pods]
    (db,) = audit(store_from_objects([*nodes, sts, *bare])).sets
    assert db.held == ("a", "b", "c")


@pytest.mark.parametrize("kind", ["Pod", "Node"])
def test_rebalance_of_a_saved_cluster_reads_core_objects_alone(kind: str) -> None:
    """rebalance --cluster of db, member 1 in zone-a where the rule puts it in zone-b: it moves.
    Another group's look-alikes saved after the real objects (a Pod db-0 that is not Ready,
    Nodes b1 and b2 cordoned) are no objects the live view lists: the plan is the same."""
    where = {0: "a1", 1: "a2", 2: "c1"}
    if kind == "Pod":
        lookalikes = [r.pod(0, "a1", ready=False)]
    else:
        lookalikes = [r.node("b1", cordoned=True), r.node("b2", cordoned=True)]
    for lookalike in lookalikes:
        lookalike["apiVersion"] = "example.io/v1"
    for extra in ([], lookalikes):
        snap = from_objects(r.cluster(where, extra=extra))
        sets = chosen(snap.store, excluded=set())
        (db,) = plan(snap.store, snap.state, sets=sets, move_data=False).sets
        assert [(row.ordinal, row.kind) for row in db.rows] == [
            (0, "in place"),
            (1, "movable"),
            (2, "in place"),
        ], db.rows


def test_a_set_of_either_kind_is_read_alike_by_a_request_and_by_the_view() -> None:
    """A set's record from a request (``set_info``, by its group) is the record the watches
    and a saved cluster store for it (``EXTRACTORS``, by its kind's table): an Advanced
    StatefulSet read as an ``apps/v1`` one would lose its reserved ordinals and its uid."""
    kruise_set = json.loads((KRUISE / "objects" / "statefulsets.v1beta1.json").read_text())
    reserved = copy.deepcopy(kruise_set["items"][0])
    reserved["spec"]["reserveOrdinals"] = [1]
    sets = {"": b.statefulset(annotations=ZONES), "apps.kruise.io": reserved}
    assert set(sets) == set(setkinds.KINDS)
    for group, obj in sets.items():
        table = setkinds.KINDS[group].table
        assert table_of(obj) == table
        from_request, from_view = set_info(obj, group), EXTRACTORS[table](obj)
        assert from_request == from_view
        assert from_request.group == group
    assert set_info(reserved, "apps.kruise.io").reserved == ((1, 1),)
