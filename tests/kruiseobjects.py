"""The recorded OpenKruise Advanced StatefulSets (``tests/fixtures/kruise``) and what the
tests make of them: the recorded objects and reviews, a view holding the recorded set, its
claims and pods, pods of any live ordinals, and the requests that change the set (shop/web).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.builders import node
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import Request, validate
from webhook.rules.decision import Decision
from webhook.wire.review import from_dict

#: The recorded objects (``objects/``) and reviews (``admission/``).
FIXTURES = Path(__file__).parent / "fixtures" / "kruise"
ZONES = ("a", "b", "c")
ANNOTATED = {"stszone.io/zones": "a,b,c"}
NODE_ORDINAL = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}


def recorded_items(name: str) -> list[Any]:
    """The items of the recorded list ``objects/<name>``, e.g. ``statefulsets.v1beta1.json``."""
    items: list[Any] = json.loads((FIXTURES / "objects" / name).read_text())["items"]
    return items


def recorded_request(number: str) -> Request:
    """The request of recorded review ``number`` (``admission/<number>-all-*.json``)."""
    (path,) = (FIXTURES / "admission").glob(f"{number}-all-*.json")
    return from_dict(json.loads(path.read_text())).request


def annotated(obj: dict[str, Any], annotations: dict[str, str] = ANNOTATED) -> dict[str, Any]:
    """A copy of ``obj`` with ``annotations`` added to its own."""
    made = copy.deepcopy(obj)
    made["metadata"].setdefault("annotations", {}).update(annotations)
    return made


def kruise_store(
    *,
    pods: bool = True,
    zones_of: dict[str, str] | None = None,
    pins: dict[int, str] | None = None,
    template: dict[str, Any] | None = None,
) -> Store:
    """The recorded set (annotated with zones a,b,c), its claims and, scheduled on nodes of
    the given zones, its pods; with ``pins`` (ordinal -> zone), in node-ordinal mode on nodes
    ``k<ordinal>`` labelled example.io/node=<ordinal>, each pod on the node of its ordinal;
    ``template``: laid over the set's pod template spec."""
    objects: list[Any] = [node(f"n-{z}", z) for z in ZONES]
    annotations = ANNOTATED
    node_of = {name: f"n-{z}" for name, z in (zones_of or {}).items()}
    if pins is not None:
        annotations = {**ANNOTATED, **NODE_ORDINAL}
        objects = [node(f"k{o}", z, labels={"example.io/node": str(o)}) for o, z in pins.items()]
        node_of = {f"web-{o}": f"k{o}" for o in pins}
    sets = [annotated(s, annotations) for s in recorded_items("statefulsets.v1beta1.json")]
    for made in sets:
        made["spec"]["template"]["spec"].update(template or {})
    objects += sets
    objects += recorded_items("pvcs.json")
    if pods:
        for pod in recorded_items("pods.json"):
            pod = copy.deepcopy(pod)
            where = node_of.get(pod["metadata"]["name"])
            if where:
                pod["spec"]["nodeName"] = where
            objects.append(pod)
    objects.append(
        {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": "shop", "labels": {"stszone.io/enabled": "true"}},
        }
    )
    return store_from_objects(objects)


def live_pods(live: Iterable[int], node: Callable[[int], str]) -> list[Any]:
    """The recorded pod web-0 made the pod of each of the ``live`` ordinals, on ``node(o)``."""
    (template,) = [p for p in recorded_items("pods.json") if p["metadata"]["name"] == "web-0"]
    pods = []
    for o in live:
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"web-{o}"
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = str(o)
        pod["spec"]["nodeName"] = node(o)
        pod["spec"]["volumes"] = []
        pods.append(pod)
    return pods


#: (replicas, reserveOrdinals) of an Advanced StatefulSet.
Spec = tuple[int, list[int | str]]


def answer_to_change(
    base: dict[str, Any], before: Spec, after: Spec, objects: list[Any]
) -> Decision:
    """The answer to ``base`` going from (replicas, reserveOrdinals) ``before`` to ``after``,
    with ``objects`` (nodes, pods) and ``base`` as it was in the view."""
    base["spec"]["replicas"], base["spec"]["reserveOrdinals"] = before
    new = copy.deepcopy(base)
    new["spec"]["replicas"], new["spec"]["reserveOrdinals"] = after
    store = store_from_objects([*objects, base])
    return validate(kruise_update(new, old=base), store=store, defaults=Defaults())


def kruise_update(new: Any, *, old: Any) -> Request:
    """The validating webhook's request for an UPDATE of Advanced StatefulSet shop/web."""
    return Request(
        kind="StatefulSet",
        group="apps.kruise.io",
        resource="statefulsets",
        sub_resource="",
        operation="UPDATE",
        namespace="shop",
        name="web",
        object=new,
        old_object=old,
        resource_group="apps.kruise.io",
    )


def annotated_update(request: Request, **spec: Any) -> Request:
    """A recorded UPDATE with both objects annotated with zones a,b,c and ``spec`` laid over
    the new one's."""
    old = annotated(request.old_object)
    new = annotated(request.object)
    new["spec"].update(spec)
    return request._replace(object=new, old_object=old)
