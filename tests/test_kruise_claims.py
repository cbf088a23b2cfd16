"""OpenKruise Advanced StatefulSets with ``persistentVolumeClaimRetentionPolicy.whenScaled:
Delete``: the claims a change deletes are said, as for an ``apps/v1`` set.

kruise-manager (``claimOwnerMatchesSetAndPod`` / ``updateClaimOwnerRefForSetAndPod`` in
``pkg/controller/statefulset/stateful_set_utils.go``, feature gate ``StatefulSetAutoDeletePVC``
on by default) gives the claims of every pod outside ``podInOrdinalRange`` -- above the live
range *or reserved* -- an owner reference to that pod, so the garbage collector deletes them
with it: a scale-down and a newly reserved member both take their claims.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.builders import node, pv
from tests.kruiseobjects import kruise_update
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.notices import CLAIMS_DELETED
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.explain import explain_workload

OBJECTS = Path(__file__).parent / "fixtures" / "kruise" / "objects"
POLICY = "(persistentVolumeClaimRetentionPolicy.whenScaled: Delete)"
ZONE_OF = {0: "a", 2: "b", 3: "c", 4: "a"}


def _items(name: str) -> list[Any]:
    items: list[Any] = json.loads((OBJECTS / name).read_text())["items"]
    return items


def _set(replicas: int, reserve: list[int | str], *, when_scaled: str = "Delete") -> Any:
    (sts,) = copy.deepcopy(_items("statefulsets.v1beta1.json"))
    sts["metadata"].setdefault("annotations", {})["stszone.io/zones"] = "a,b,c"
    sts["spec"].update(replicas=replicas, reserveOrdinals=reserve)
    sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] = when_scaled
    return sts


def _store(*, when_scaled: str = "Delete") -> Store:
    """web: replicas 4, ordinal 1 reserved: members 0, 2, 3, 4 in a, b, c, a, each with its
    claim ``data-web-N`` bound to a volume of its zone whose reclaim policy is Delete."""
    objects: list[Any] = [node(f"n-{z}", z) for z in "abc"]
    objects.append(_set(4, [1], when_scaled=when_scaled))
    (template,) = [p for p in _items("pods.json") if p["metadata"]["name"] == "web-0"]
    (claim,) = [c for c in _items("pvcs.json") if c["metadata"]["name"] == "data-web-0"]
    for ordinal, zone in ZONE_OF.items():
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"web-{ordinal}"
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = str(ordinal)
        pod["spec"]["nodeName"] = f"n-{zone}"
        objects.append(pod)
        made = copy.deepcopy(claim)
        made["metadata"]["name"] = f"data-web-{ordinal}"
        made["spec"]["volumeName"] = f"pv-{ordinal}"
        made["status"] = {"phase": "Bound"}
        objects.append(made)
        objects.append(
            pv(f"pv-{ordinal}", zone, claim=("shop", f"data-web-{ordinal}"), reclaim="Delete")
        )
    return store_from_objects(objects)


def _update(store: Store, new: Any) -> Any:
    return validate(kruise_update(new, old=_set(4, [1])), store=store, defaults=Defaults())


def _scale(store: Store, old: int, new: int) -> Any:
    def scale(replicas: int) -> Any:
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-web"},
            "spec": {"replicas": replicas} if replicas else {},
        }

    request = Request(
        kind="Scale",
        group="autoscaling",
        resource="statefulsets",
        sub_resource="scale",
        operation="UPDATE",
        namespace="shop",
        name="web",
        object=scale(new),
        old_object=scale(old),
        resource_group="apps.kruise.io",
    )
    return validate(request, store=store, defaults=Defaults())


def test_a_kruise_scale_down_names_the_claims_it_deletes() -> None:
    """/scale 4 -> 3 removes web-4 (a stays with web-0): allowed, and the claim data-web-4
    goes with its pod, its data too; the Event regards the Advanced StatefulSet."""
    decision = _scale(_store(), 4, 3)
    assert decision.allowed, decision.message
    assert decision.warnings == (
        f"web: 4 -> 3 deletes claim data-web-4 with its pod {POLICY}; its volume's reclaim "
        "policy is Delete: the data goes with it",
    )
    (notice,) = [n for n in decision.notices if n.reason == CLAIMS_DELETED]
    assert notice.regarding.api_version == "apps.kruise.io/v1beta1"
    assert (notice.regarding.kind, notice.regarding.name) == ("StatefulSet", "web")


def test_reserving_a_member_deletes_its_claims() -> None:
    """reserveOrdinals [1] -> [1, 4] at replicas 4: live 0, 2, 3, 5; web-4 is condemned and its
    claim goes with it (not data-web-2 or data-web-3, which stay live)."""
    decision = _update(_store(), _set(4, [1, 4]))
    assert decision.allowed, decision.message
    assert [w for w in decision.warnings if "deletes" in w] == [
        f"web: reserveOrdinals [1] -> [1, 4] deletes claim data-web-4 with its pod {POLICY}; "
        "its volume's reclaim policy is Delete: the data goes with it"
    ]
    assert [n.reason for n in decision.notices].count(CLAIMS_DELETED) == 1


def test_scaling_a_kruise_set_to_zero_names_every_claim() -> None:
    """4 -> 0 (by /scale and by an UPDATE) deletes the claims of 0, 2, 3 and 4 -- never the
    reserved 1, which has none."""
    for decision in (_scale(_store(), 4, 0), _update(_store(), _set(0, [1]))):
        assert decision.allowed
        (said,) = [w for w in decision.warnings if "deletes" in w]
        assert said.startswith("web: 4 -> 0 deletes claims data-web-0, data-web-2, data-web-3 ")
        assert [n.reason for n in decision.notices].count(CLAIMS_DELETED) == 1


def test_a_kruise_set_that_retains_its_claims_says_nothing_of_them() -> None:
    kept = _store(when_scaled="Retain")
    assert not any("deletes" in w for w in _scale(kept, 4, 3).warnings)
    assert not _update(kept, _set(4, [1, 4], when_scaled="Retain")).notices


def test_explain_says_the_claims_each_smaller_size_deletes() -> None:
    """``stszone explain asts/web`` judges 3 replicas as /scale would: allowed, and data-web-4
    goes with its pod, as the same answer for an ``apps/v1`` set says."""
    explained = explain_workload(_store(), "shop", "web", group="apps.kruise.io")
    assert explained is not None
    sizes = {s.replicas: s for s in explained.sizes}
    assert sizes[3].allowed
    assert sizes[3].warnings == (
        f"web: 4 -> 3 deletes claim data-web-4 with its pod {POLICY}; its volume's reclaim "
        "policy is Delete: the data goes with it",
    )
