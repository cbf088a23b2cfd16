"""A workload scaled to zero by an UPDATE is told what its ``/scale`` to zero is told, no more,
and one created at zero is told neither: a set, an Advanced StatefulSet and a KafkaNodePool
alike. At zero every zone is empty on purpose, so "fewer replicas than zones leaves a zone
empty" and "its pods there wait for a node" speak of members it does not have.

The view: nodes in three zones (none in the fourth, which one zone list names); each workload
has one member on a node of each of the three.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests.kruiseobjects import annotated, kruise_store, kruise_update, recorded_items
from tests.test_validate import validate
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.nodepools import nodepool_info
from webhook.rules import admission
from webhook.rules.admission import Request
from webhook.wire import review

#: The workload's zone list: the three zones of the nodes, or those and one with no node.
COVERED, UNCOVERED = 3, 4


def _set(listed: int, *, by: str) -> tuple[str, ...]:
    """/validate of set db scaled from 3 to 0, by an UPDATE of it or by its /scale."""
    old = b.statefulset(replicas=3, annotations={"stszone.io/zones": ",".join("abcd"[:listed])})
    nodes = [b.node(f"n{z}", z) for z in "abc"]
    pods = [b.sts_pod(ordinal=o, node=f"n{z}") for o, z in enumerate("abc")]
    store = store_from_objects([*nodes, old, *pods])
    if by == "update":
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = 0
        answer = validate(new, store, operation="UPDATE", old=old)
    else:
        answer = validate(b.scale(replicas=0), store, operation="UPDATE", old=b.scale(replicas=3))
    assert answer.allowed, answer.message
    return answer.warnings


def _kruise(listed: int, *, by: str) -> tuple[str, ...]:
    """/validate of Advanced StatefulSet shop/web (live ordinals 0, 2, 3; ordinal 1 reserved)
    scaled from 3 to 0, by an UPDATE of it or by its /scale."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})
    zones = {"stszone.io/zones": ",".join("abcd"[:listed])}
    old = annotated(recorded_items("statefulsets.v1beta1.json")[0], zones)
    assert (old["metadata"]["name"], old["spec"]["replicas"]) == ("web", 3)
    if by == "update":
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = 0
        request = kruise_update(new, old=old)
    else:
        request = Request(
            kind="Scale",
            group="autoscaling",
            resource="statefulsets",
            sub_resource="scale",
            operation="UPDATE",
            namespace="shop",
            name="web",
            object=b.scale("web", namespace="shop", replicas=0),
            old_object=b.scale("web", namespace="shop", replicas=3),
            resource_group="apps.kruise.io",
        )
    decided = admission.validate(request, store=store, defaults=Defaults())
    assert decided.allowed, decided.message
    return tuple(decided.warnings)


def _pool(listed: int, *, by: str) -> tuple[str, ...]:
    """/validate of KafkaNodePool pool, one broker in each of zone-a, zone-b, zone-c, scaled
    from 3 to 0, by an UPDATE of it or by its /scale."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 3)
    cluster.reconcile()
    assert sorted(cluster.zones("pool").values()) == ["zone-a", "zone-b", "zone-c"]
    held = view.nodepool("kafka", "pool")
    assert held is not None
    zones = ",".join([*sim.ZONES, "zone-d"][:listed])
    old = sim.pool_object(
        "pool",
        replicas=3,
        node_ids=list(held.node_ids or ()),
        annotations={"stszone.io/zones": zones},
    )
    view.put("nodepools", nodepool_info(old))
    if by == "update":
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = 0
        answer = sim.admit(view, new, old=old, operation="UPDATE", endpoint="validate")
    else:
        new, before = sim.scale("pool", old=3, new=0)
        answer = sim.admit(view, new, old=before, operation="UPDATE", endpoint="validate")
    assert answer.allowed, answer.message
    return answer.warnings


@pytest.mark.parametrize("listed", [COVERED, UNCOVERED])
@pytest.mark.parametrize(
    ("workload", "says"),
    [
        (_set, "db: 3 -> 0 stops the set in every zone"),
        (_kruise, "web: 3 -> 0 stops the set in every zone"),
        (_pool, "pool: 3 -> 0 removes every broker of the pool, in every zone"),
    ],
)
def test_an_update_to_zero_is_warned_as_its_scale_to_zero_is(
    workload: Callable[..., tuple[str, ...]], says: str, listed: int
) -> None:
    """The UPDATE's warnings are the /scale's, which say that the workload stops everywhere
    and nothing of a zone left empty or waiting for a node."""
    scaled = workload(listed, by="scale")
    assert any(w.startswith(says) for w in scaled), scaled
    assert not any("leaves a zone empty" in w or "wait for one" in w for w in scaled), scaled
    assert workload(listed, by="update") == scaled


#: Listed zones: a, b and c hold a node each (:func:`_created`), d none; d is listed second, so
#: a set's ordinal 1 goes there and two members are told it has no node.
FOUR = "zone-a,zone-d,zone-b,zone-c"
THIN = "replica(s) for 4 zones leaves a zone empty"
NO_NODE = "no node in zone(s) zone-d"
#: Read only in node-ordinal mode: a set in affinity mode is warned that it does nothing.
UNREAD = {"stszone.io/node-label": "example.io/node"}


def _recorded(path: str, *, replicas: int, annotations: dict[str, str]) -> dict[str, Any]:
    """A CREATE a real API server sent (tests/fixtures/), at ``replicas``, with ``annotations``."""
    body: dict[str, Any] = json.loads((b.FIXTURES / path).read_text())
    obj = body["request"]["object"]
    obj["spec"]["replicas"] = replicas
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    return body


def _created(kind: str, replicas: int) -> tuple[str, ...]:
    """The warnings of the chain (mutate, then validate) for a CREATE of a ``kind`` listing
    :data:`FOUR`, in a view with a node in zone-a, zone-b and zone-c."""
    zones = {"stszone.io/zones": FOUR}
    if kind == "StatefulSet":
        body = b.review(b.statefulset(replicas=replicas, annotations={**zones, **UNREAD}))
    elif kind == "Advanced StatefulSet":
        path = "kruise/admission/001-all-StatefulSet-CREATE-web.json"
        body = _recorded(path, replicas=replicas, annotations={**zones, **UNREAD})
    else:
        path = "strimzi/admission/002-all-KafkaNodePool-CREATE-broker.json"
        body = _recorded(path, replicas=replicas, annotations=zones)
    store = store_from_objects([b.node(f"n{z}", f"zone-{z}") for z in "abc"])
    answer = review.chain(review.from_dict(body), store=store, defaults=Defaults())
    assert answer.allowed, answer.message
    return answer.warnings


@pytest.mark.parametrize("kind", ["StatefulSet", "Advanced StatefulSet", "KafkaNodePool"])
def test_a_workload_created_at_zero_is_not_warned_of_a_zone_left_empty(kind: str) -> None:
    """Created with two members, each kind hears that a listed zone gets none and that zone-d
    has no node; created with none, neither: it holds no zone, and no pod of it waits. A set's
    annotation that its mode does not read is still said at zero."""
    two = _created(kind, 2)
    assert any(THIN in w for w in two) and any(NO_NODE in w for w in two), two
    zero = _created(kind, 0)
    assert not any(THIN in w or NO_NODE in w for w in zero), zero
    if kind != "KafkaNodePool":
        assert any("stszone.io/node-label 'example.io/node' does nothing" in w for w in zero), zero
        assert len(zero) == 1, zero
    else:
        assert zero == (), zero
