"""The scheduler extender over the real TLS server, in both of kube-scheduler's node-cache shapes.

``nodeCacheCapable: false`` sends full Node objects (built from a real ``NodeList`` the API
server returned), ``true`` only names resolved through the view. The cluster: zones a/b/c; one
zone-a node with a storage-unhealthy label, one whose StorageUnhealthy condition is True.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Settings
from webhook.model.store import Store
from webhook.wire.patch import apply

CONDITION = "StorageUnhealthy"
LABEL = "storage.example.io/unhealthy"
SETTINGS = Settings(
    host="127.0.0.1",
    port=0,
    storage_unhealthy_condition=CONDITION,
    storage_unhealthy_label=f"{LABEL}=true",
)
SCHEDULER_STS = {"stszone.io/zones": "zone-a,zone-b,zone-c", "stszone.io/mode": "scheduler"}
#: name -> (zone, extra labels, storage condition True)
NODES: dict[str, tuple[str, dict[str, str], bool]] = {
    "a-ok": ("zone-a", {}, False),
    "a-label": ("zone-a", {LABEL: "true"}, False),
    "a-cond": ("zone-a", {}, True),
    "a-label-false": ("zone-a", {LABEL: "false"}, False),
    "b-ok": ("zone-b", {}, False),
    "c-ok": ("zone-c", {}, False),
}


def full_node(name: str) -> dict[str, Any]:
    """A full Node as kube-scheduler forwards it, from a recorded API response."""
    zone, labels, unhealthy = NODES[name]
    node: dict[str, Any] = copy.deepcopy(b.fixture_api("nodes-list-limit2")["items"][0])
    node["metadata"]["name"] = name
    node["metadata"]["labels"] = {
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": zone,
        **labels,
    }
    status = "True" if unhealthy else "False"
    node["status"]["conditions"].append({"type": CONDITION, "status": status, "reason": "Probe"})
    return node


def node_list(names: list[str]) -> dict[str, Any]:
    return {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {},
        "items": list(map(full_node, names)),
    }


def cluster(*, full: bool, extra: tuple[dict[str, Any], ...] = ()) -> Store:
    """The view: metadata-only nodes (as the live watch keeps them) or full ones (a cluster file)."""
    # Items of a list carry no kind (nor do the Nodes kube-scheduler forwards); a file's do.
    nodes = [
        {"kind": "Node", **full_node(name)} if full else b.node(name, zone, labels=labels)
        for name, (zone, labels, _) in NODES.items()
    ]
    return store_from_objects([b.statefulset(annotations=SCHEDULER_STS), *nodes, *extra])


def args(pod: dict[str, Any], names: list[str], *, cache: bool) -> dict[str, Any]:
    """ExtenderArgs exactly as kube-scheduler marshals it (Go field names, nil pointer = null)."""
    if cache:
        return {"Pod": pod, "Nodes": None, "NodeNames": names}
    return {"Pod": pod, "Nodes": node_list(names), "NodeNames": None}


def kept(result: dict[str, Any]) -> list[str]:
    if result["NodeNames"] is not None:
        assert result["Nodes"] is None
        names: list[str] = result["NodeNames"]
        return names
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]


ALL = list(NODES)


@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
async def test_filter_keeps_healthy_nodes_of_the_zone(serve: ServeFactory, cache: bool) -> None:
    """db-0 (zone-a): other zones and the unhealthy-labelled node fail, each with a reason."""
    served = await serve(store=cluster(full=True), settings=SETTINGS)
    pod = b.sts_pod(ordinal=0, annotations={"stszone.io/zone": "zone-a"})
    status, result = await served.post_json("/extender/filter", args(pod, ALL, cache=cache))
    assert status == 200
    assert set(result) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert kept(result) == ["a-ok", "a-label-false"]
    failed = result["FailedAndUnresolvableNodes"]
    assert set(failed) == {"a-label", "a-cond", "b-ok", "c-ok"}
    assert result["FailedNodes"] == {} and result["Error"] == ""
    assert "label storage.example.io/unhealthy=true" in failed["a-label"]
    assert "condition StorageUnhealthy is True" in failed["a-cond"]
    assert failed["b-ok"] == "node(s) in zone zone-b, stszone places db-0 in zone zone-a"
    if not cache:  # the Node objects come back untouched: the scheduler binds onto them
        assert result["Nodes"]["items"][0] == full_node("a-ok")


@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
@pytest.mark.parametrize("full", [False, True], ids=["metadata-view", "full-view"])
async def test_a_volume_bound_after_the_annotation_wins(
    serve: ServeFactory, cache: bool, full: bool
) -> None:
    """db-0 was annotated zone-a at admission; its claim was bound afterwards to a volume in
    zone-c. It can only ever run in zone-c: the filter keeps c-ok, and each reason says the
    volume overrules the annotation (kube-scheduler's own volume filters would have sent only
    c-ok; following the annotation would leave the pod no node at all)."""
    volume = (b.pvc("data-db-0", volume="pv-c"), b.pv("pv-c", "zone-c"))
    served = await serve(store=cluster(full=full, extra=volume), settings=SETTINGS)
    pod = b.sts_pod(ordinal=0, annotations={"stszone.io/zone": "zone-a"})
    status, result = await served.post_json("/extender/filter", args(pod, ALL, cache=cache))
    assert status == 200 and result["Error"] == ""
    assert kept(result) == ["c-ok"]
    failed = result["FailedAndUnresolvableNodes"]
    assert set(failed) == set(ALL) - {"c-ok"}
    assert failed["a-ok"] == (
        "node(s) volume pv-c of db-0 cannot attach to (the volume wins over stszone.io/zone=zone-a)"
    )
    assert failed["b-ok"] == failed["a-ok"]
    assert "label storage.example.io/unhealthy=true" in failed["a-label"]


@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
async def test_a_local_volume_keeps_its_own_node(serve: ServeFactory, cache: bool) -> None:
    """db-0's volume is local to a-label-false (hostname NotIn the other zone-a nodes): in its
    zone, only that node can mount it."""
    pv = b.pv("pv-local", "x")
    others = ["a-ok", "a-label", "a-cond"]
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": others},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]},
            ]
        }
    ]
    volume = (b.pvc("data-db-0", volume="pv-local"), pv)
    served = await serve(store=cluster(full=True, extra=volume), settings=SETTINGS)
    pod = b.sts_pod(ordinal=0, annotations={"stszone.io/zone": "zone-a"})
    _, result = await served.post_json("/extender/filter", args(pod, ALL, cache=cache))
    assert kept(result) == ["a-label-false"]
    failed = result["FailedAndUnresolvableNodes"]
    assert failed["a-ok"] == "node(s) volume pv-local of db-0 cannot attach to"


async def test_node_cache_with_a_metadata_view_cannot_see_conditions(serve: ServeFactory) -> None:
    """A view that holds no node conditions (a cluster file of metadata): the condition is
    unknown, so it fails no node; the label still does."""
    served = await serve(store=cluster(full=False), settings=SETTINGS)
    pod = b.sts_pod(ordinal=3, annotations={"stszone.io/zone": "zone-a"})
    _, result = await served.post_json("/extender/filter", args(pod, ALL, cache=True))
    assert kept(result) == ["a-ok", "a-cond", "a-label-false"]
    assert "a-label" in result["FailedAndUnresolvableNodes"]


async def test_names_unknown_to_the_view_fail_and_the_rule_gives_the_zone(
    serve: ServeFactory,
) -> None:
    """No annotation: the rule puts db-1 in zone-b. A node the view has not seen yet fails."""
    served = await serve(store=cluster(full=False), settings=SETTINGS)
    _, result = await served.post_json(
        "/extender/filter", args(b.sts_pod(ordinal=1), ["b-ok", "ghost", "a-ok"], cache=True)
    )
    assert kept(result) == ["b-ok"]
    assert "node cache" in result["FailedAndUnresolvableNodes"]["ghost"]


@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
@pytest.mark.parametrize(
    "pod",
    [
        b.plain_pod(),
        b.sts_pod(ordinal=0, labels={"stszone.io/skip": "true"}),
        b.sts_pod(
            ordinal=0,
            annotations={"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "x.io/n"},
        ),
    ],
    ids=["no-owner-no-zone", "skip-label", "node-ordinal-pinned-by-affinity"],
)
async def test_pods_without_a_zone_pass_unfiltered(
    serve: ServeFactory, cache: bool, pod: dict[str, Any]
) -> None:
    """Nothing to enforce: every node passes, storage included, none is reported failed, and
    prioritize scores every node alike, storage included."""
    store = cluster(full=True)
    if pod["metadata"].get("annotations", {}).get("stszone.io/mode") == "node-ordinal":
        store = store_from_objects(
            [b.node(n, zone, labels=extra) for n, (zone, extra, _) in NODES.items()]
        )
    served = await serve(store=store, settings=SETTINGS)
    _, result = await served.post_json("/extender/filter", args(pod, ALL, cache=cache))
    assert kept(result) == ALL and result["FailedAndUnresolvableNodes"] == {}
    # kube-scheduler adds each extender score (times its weight) to the node's total: scoring
    # a-label and a-cond lower for their storage would still steer these pods away from them.
    _, scores = await served.post_json("/extender/prioritize", args(pod, ALL, cache=cache))
    assert [s["Host"] for s in scores] == ALL
    assert len({s["Score"] for s in scores}) == 1, scores


async def test_malformed_statefulset_annotations_are_reported_in_error(
    serve: ServeFactory,
) -> None:
    """The rule cannot be applied: Error tells kube-scheduler why (HTTP 200, as it expects)."""
    bad = b.statefulset(annotations={"stszone.io/zones": "zone-a,,zone-a"})
    served = await serve(store=store_from_objects([bad]), settings=SETTINGS)
    status, result = await served.post_json(
        "/extender/filter", args(b.sts_pod(ordinal=0), ["a-ok"], cache=True)
    )
    assert status == 200 and "malformed stszone annotations" in result["Error"]
    assert kept(result) == []


@pytest.mark.parametrize("cache", [False, True], ids=["full-nodes", "node-names"])
async def test_prioritize_prefers_the_volume_zone_and_healthy_storage(
    serve: ServeFactory, cache: bool
) -> None:
    """db-0's claim is bound to a PV in zone-c: zone-c healthy 10, zone-a healthy 5, unhealthy 0."""
    volume = (b.pvc("data-db-0", volume="pv-c"), b.pv("pv-c", "zone-c"))
    served = await serve(store=cluster(full=True, extra=volume), settings=SETTINGS)
    pod = b.sts_pod(ordinal=0, annotations={"stszone.io/zone": "zone-c"})
    status, scores = await served.post_json("/extender/prioritize", args(pod, ALL, cache=cache))
    assert status == 200
    assert {s["Host"]: s["Score"] for s in scores} == {
        "a-ok": 5,
        "a-label": 0,
        "a-cond": 0,
        "a-label-false": 5,
        "b-ok": 5,
        "c-ok": 10,
    }
    assert [s["Host"] for s in scores] == ALL and all(set(s) == {"Host", "Score"} for s in scores)


async def test_scheduler_mode_pod_from_mutate_to_filter(serve: ServeFactory) -> None:
    """The whole path: /mutate sets schedulerName and the zone, /extender/filter keeps that zone."""
    served = await serve(store=cluster(full=False), settings=SETTINGS)
    pod = b.sts_pod(ordinal=2)
    _, answer = await served.post_json("/mutate", b.review(pod))
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    mutated = apply(pod, patch)
    assert mutated["spec"]["schedulerName"] == "stszone-scheduler"
    assert mutated["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"
    _, result = await served.post_json("/extender/filter", args(mutated, ALL, cache=True))
    assert kept(result) == ["c-ok"]
    assert set(result["FailedAndUnresolvableNodes"]) == set(ALL) - {"c-ok"}


POD = b.sts_pod(ordinal=0)


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (json.dumps({"pod": POD, "nodenames": ["a-ok"]}).encode(), "capitalised"),
        (json.dumps({"NodeNames": ["a-ok"]}).encode(), "Pod is missing"),
        (json.dumps({"Pod": "db-0", "NodeNames": ["a-ok"]}).encode(), "Pod is missing"),
        (json.dumps({"Pod": POD}).encode(), "exactly one of Nodes"),
        (json.dumps({"Pod": POD, "Nodes": node_list([]), "NodeNames": []}).encode(), "exactly one"),
        (json.dumps({"Pod": POD, "NodeNames": "a-ok"}).encode(), "list of node names"),
        (json.dumps({"Pod": POD, "NodeNames": ["a-ok", 7]}).encode(), "list of node names"),
        (json.dumps({"Pod": POD, "Nodes": []}).encode(), "NodeList object"),
        (json.dumps({"Pod": POD, "Nodes": {"items": {}}}).encode(), "Nodes.items must be a list"),
        (json.dumps({"Pod": POD, "Nodes": {"items": [{"metadata": {}}]}}).encode(), "no metadata"),
        (
            json.dumps({"Pod": {"metadata": {"labels": []}}, "NodeNames": ["a-ok"]}).encode(),
            "metadata.labels must be an object",
        ),
    ],
    ids=[
        "not-json",
        "array",
        "lower-case-fields",
        "no-pod",
        "pod-not-object",
        "no-nodes",
        "both-shapes",
        "names-not-list",
        "name-not-string",
        "nodes-not-object",
        "items-not-list",
        "node-without-name",
        "pod-field-wrong-type",
    ],
)
async def test_malformed_extender_args_get_a_clear_400(
    serve: ServeFactory, verb: str, body: bytes, says: str
) -> None:
    """Whatever arrives, the answer is a 400 whose one line says what is wrong; never a 500."""
    served = await serve(store=cluster(full=False), settings=SETTINGS)
    status, text = await served.post_raw(f"/extender/{verb}", body)
    assert status == 400, text
    assert says in text and "Traceback" not in text


async def test_wrong_content_type_and_oversized_body(serve: ServeFactory) -> None:
    """kube-scheduler sends application/json; the 7 MiB cap (smaller here) refuses with advice:
    in filter's ``Error`` (kube-scheduler shows it on the pod), in prioritize's 413 (ignored)."""
    small = Settings(host="127.0.0.1", port=0, max_body=2048)
    served = await serve(store=cluster(full=False), settings=small)
    body = json.dumps(args(POD, ALL, cache=True)).encode()
    status, text = await served.post_raw("/extender/filter", body, content_type="text/plain")
    assert status == 400 and "send ExtenderArgs as JSON" in text
    large = json.dumps(args(POD, ALL, cache=False)).encode()
    status, text = await served.post_raw("/extender/filter", large)
    error = json.loads(text)["Error"]
    assert status == 200 and "cap" in error and "nodeCacheCapable: true" in error
    status, text = await served.post_raw("/extender/prioritize", large)
    assert status == 413 and "cap" in text and "nodeCacheCapable: true" in text


class BrokenStore(Store):
    """A view whose volume lookup fails: stands in for a bug behind the handler."""

    def claim_zones(
        self, namespace: str, claim: str, topology_key: str, *, uid: str | None = None
    ) -> tuple[str, frozenset[str]]:
        raise RuntimeError("boom")


async def test_internal_error_is_reported_not_crashed(serve: ServeFactory) -> None:
    """filter: HTTP 200 with Error (kube-scheduler shows it); prioritize: 500 (it is ignored)."""
    served = await serve(store=BrokenStore(zones=("zone-a",)), settings=SETTINGS)
    status, result = await served.post_json("/extender/filter", args(POD, ["a-ok"], cache=True))
    assert status == 200 and "internal error" in result["Error"] and kept(result) == []
    status, text = await served.post_json("/extender/prioritize", args(POD, ["a-ok"], cache=True))
    assert status == 500 and "internal error" in text
    assert (await served.get("/healthz"))[0] == 200
