"""The same change of replicas gets the same warnings through ``/scale`` (kubectl scale, an HPA)
as through an UPDATE of the workload: fewer replicas than zones leave a zone empty, a listed
zone with no node makes its members wait. For StatefulSets, Advanced StatefulSets and
KafkaNodePools, with the recorded ``/scale`` reviews (``tests/fixtures``) edited to each count,
judged on the view that holds the workload (a Scale carries no annotations).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests.kruiseobjects import FIXTURES as KRUISE
from tests.kruiseobjects import kruise_store, kruise_update
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store
from webhook.rules import admission
from webhook.rules.decision import Decision
from webhook.wire.review import from_dict

#: What an UPDATE of a set over three zones to 2 replicas is told (docs/install.md shows it).
THIN = (
    "{name}: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone"
)


def _validate(body: dict[str, Any], view: Store) -> Decision:
    return admission.validate(from_dict(body).request, store=view, defaults=Defaults())


# --- apps/v1 StatefulSets: cap/db of the recorded cluster (no zone list: the nodes' three) ----


def _recorded(old: int, annotations: dict[str, str]) -> tuple[Store, dict[str, Any]]:
    """The recorded cluster with cap/db at ``old`` replicas and ``annotations``; and db."""
    lists = b.recorded_lists()
    db = b.item(lists, "statefulsets-list", "db", namespace="cap")
    db["metadata"].setdefault("annotations", {}).update(annotations)
    db["spec"]["replicas"] = old
    return store_from_objects(lists), db


def _set_both_ways(
    old: int, new: int, annotations: dict[str, str] | None = None
) -> tuple[Decision, Decision]:
    """(the UPDATE, the /scale) of cap/db from ``old`` to ``new`` replicas: 024 (kubectl patch
    spec.replicas) and 014 (kubectl scale), edited to the counts and the set's annotations."""
    view, db = _recorded(old, annotations or {})
    update = copy.deepcopy(b.fixture_review("024-StatefulSet-UPDATE"))
    for key, count in (("oldObject", old), ("object", new)):
        obj = update["request"][key]
        obj["metadata"]["annotations"] = dict(db["metadata"]["annotations"])
        obj["spec"]["replicas"] = count
    scale = b.recorded_scale("db", namespace="cap", old=old, new=new)
    return _validate(update, view), _validate(scale, view)


@pytest.mark.parametrize(
    ("old", "new", "annotations"),
    [
        (0, 2, {}),  # started thin
        (1, 2, {}),  # grown, still thin
        (2, 4, {}),  # grown past the zones: nothing to say
        (5, 2, {}),  # refused (zone-b's volumes go), and thin
        (5, 2, {"stszone.io/allow-zone-loss": "true"}),  # forced, and thin
        (0, 2, {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/n"}),
    ],
    ids=["0-2", "1-2", "2-4", "5-2-refused", "5-2-forced", "node-ordinal"],
)
def test_a_statefulset_hears_the_same_by_scale_as_by_update(
    old: int, new: int, annotations: dict[str, str]
) -> None:
    """Same verdict, same message, same warnings; node-ordinal mode is told neither (its
    labelled nodes place it, whatever the zones)."""
    update, scale = _set_both_ways(old, new, annotations)
    assert (scale.allowed, scale.message, scale.warnings) == (
        update.allowed,
        update.message,
        update.warnings,
    )
    thin = THIN.format(name="db") in scale.warnings
    assert thin == (new == 2 and "stszone.io/mode" not in annotations)


def test_kubectl_scale_from_zero_to_fewer_replicas_than_zones_is_warned() -> None:
    """The recorded kubectl scale (014) of cap/db, sent as 0 -> 2: allowed, and told that a
    zone stays empty, as `kubectl patch sts db -p '{"spec":{"replicas":2}}'` is."""
    view, _ = _recorded(0, {})
    scale = b.recorded_scale("db", namespace="cap", old=0, new=2)
    decided = _validate(scale, view)
    assert decided.allowed
    assert decided.warnings == (THIN.format(name="db"),)


def test_a_scale_up_of_a_set_with_malformed_annotations_says_so() -> None:
    """Its new pods are refused until the annotations are fixed: kubectl scale 0 -> 2 is told,
    as a scale-down is, and as an UPDATE leaving them as they were is ("unchanged by this
    update"), plus the spread over the server's zones that stands in."""
    _, scale = _set_both_ways(0, 2, {"stszone.io/mode": "bogus"})
    assert scale.allowed
    assert len(scale.warnings) == 2
    assert scale.warnings[0].startswith("StatefulSet db: stszone.io/mode")
    assert scale.warnings[0].endswith("(unchanged by this scale; fix it)")
    assert scale.warnings[1] == THIN.format(name="db")


def test_a_set_the_view_lacks_is_scaled_up_without_a_word() -> None:
    """No annotations to read, no zone list to count: allowed as before, no guess."""
    view = store_from_objects([b.node("n-a", "zone-a"), b.node("n-b", "zone-b")])
    scale = b.recorded_scale("db", namespace="cap", old=0, new=1)
    assert _validate(scale, view) == Decision(allowed=True)


# --- OpenKruise Advanced StatefulSets: shop/web (zones a,b,c; ordinal 1 reserved) -----------


def _kruise_both_ways(old: int, new: int) -> tuple[Decision, Decision]:
    """(the UPDATE, the /scale 009) of shop/web from ``old`` to ``new`` replicas."""
    view = kruise_store()
    held = view.statefulset("shop", "web", "apps.kruise.io")
    assert held is not None
    recorded = json.loads((KRUISE / "objects" / "statefulsets.v1beta1.json").read_text())
    before = copy.deepcopy(recorded["items"][0])
    before["metadata"].setdefault("annotations", {}).update(held.annotations)
    before["spec"]["replicas"] = old
    after = copy.deepcopy(before)
    after["spec"]["replicas"] = new
    update = admission.validate(kruise_update(after, old=before), store=view, defaults=Defaults())
    (path,) = (KRUISE / "admission").glob("009-all-*.json")
    scale = json.loads(path.read_text())
    scale["request"]["object"]["spec"]["replicas"] = new
    scale["request"]["oldObject"]["spec"]["replicas"] = old
    return update, _validate(scale, view)


@pytest.mark.parametrize(("old", "new"), [(0, 2), (1, 2), (2, 3)])
def test_an_advanced_statefulset_hears_the_same_by_scale_as_by_update(old: int, new: int) -> None:
    update, scale = _kruise_both_ways(old, new)
    assert (scale.allowed, scale.warnings) == (update.allowed, update.warnings)
    assert (THIN.format(name="web") in scale.warnings) == (new == 2)


# --- Strimzi KafkaNodePools: kafka/controller over zone-a, zone-b, zone-c ---------------------


def _pool_both_ways(old: int, new: int, *, zones: str) -> tuple[Decision, Decision]:
    """(the UPDATE, the /scale 046) of pool kafka/controller from ``old`` to ``new`` replicas,
    its brokers 6, 7, ... (two nodes in each of zone-a, zone-b, zone-c)."""
    view = sim.store()
    ids = list(range(6, 6 + old))
    annotations = {"stszone.io/zones": zones}
    before = sim.pool_object("controller", replicas=old, node_ids=ids, annotations=annotations)
    view.put("nodepools", nodepool_info(before))
    after = copy.deepcopy(before)
    after["spec"]["replicas"] = new
    update = sim.admit(view, after, old=before, operation="UPDATE", endpoint="validate")
    scale = copy.deepcopy(sim.recorded("046-all-Scale-UPDATE-controller"))
    scale["request"]["object"]["spec"]["replicas"] = new
    scale["request"]["oldObject"]["spec"]["replicas"] = old
    return update.decision, _validate(scale, view)


@pytest.mark.parametrize(
    ("old", "new", "zones"),
    [
        (0, 2, "zone-a,zone-b,zone-c"),
        (1, 2, "zone-a,zone-b,zone-c"),
        (2, 3, "zone-a,zone-b,zone-c"),
        (2, 4, "zone-a,zone-b,zone-d"),  # no node in zone-d: its brokers wait
    ],
)
def test_a_pool_hears_the_same_by_scale_as_by_update(old: int, new: int, zones: str) -> None:
    update, scale = _pool_both_ways(old, new, zones=zones)
    assert (scale.allowed, scale.warnings) == (update.allowed, update.warnings)
    assert (THIN.format(name="controller") in scale.warnings) == (new == 2)
    waiting = any("no node in zone(s) zone-d" in w for w in scale.warnings)
    assert waiting == ("zone-d" in zones)


def _recorded_pool_scale(old: int, new: int) -> dict[str, Any]:
    """The recorded kubectl scale of a pool (032, broker 6 -> 5), for pool kafka/pool."""
    scale = copy.deepcopy(sim.recorded("032-all-Scale-UPDATE-broker"))
    request = scale["request"]
    request["name"] = "pool"
    for key, count in (("object", new), ("oldObject", old)):
        request[key]["metadata"]["name"] = "pool"
        request[key]["spec"]["replicas"] = count
    return scale


@pytest.mark.parametrize(("new", "allowed"), [(5, True), (2, False)])
def test_a_pool_scaled_down_hears_the_count_by_either_path(new: int, allowed: bool) -> None:
    """Six brokers placed over three zones: 6 -> 5 keeps every zone, 6 -> 2 drops zone-c and
    is refused by both paths (each with its own way out); both say 2 leave a zone empty."""
    view, pool = sim.stored_pool()
    after = copy.deepcopy(pool)
    after["spec"]["replicas"] = new
    update = sim.admit(view, after, old=pool, operation="UPDATE", endpoint="validate")
    scale = _validate(_recorded_pool_scale(6, new), view)
    assert (update.allowed, scale.allowed) == (allowed, allowed)
    thin = THIN.format(name="pool")
    assert (thin in update.warnings, thin in scale.warnings) == (not allowed, not allowed)


def test_a_pool_scaled_up_with_malformed_annotations_says_so() -> None:
    """Its new brokers' pods are refused until the annotations are fixed: 6 -> 7 is told."""
    view, _ = sim.stored_pool(**{"stszone.io/mode": "bogus"})
    decided = _validate(_recorded_pool_scale(6, 7), view)
    assert decided.allowed
    (said,) = decided.warnings
    assert said.startswith("KafkaNodePool pool: ")
    assert said.endswith("(unchanged by this scale; fix it)")
