"""Builders for the Kubernetes objects and AdmissionReviews the tests send.

Shapes follow the recorded reviews in ``tests/fixtures/admission/`` (what a real
kube-apiserver sends); every builder returns plain JSON-ready dicts.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"

JSON = dict[str, Any]

_GVR = {
    "Pod": ("", "v1", "pods"),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "Scale": ("autoscaling", "v1", "statefulsets"),
}


def fixture_review(name: str) -> JSON:
    """A recorded AdmissionReview, e.g. ``fixture_review("003-Pod-CREATE")``."""
    data: JSON = json.loads((FIXTURES / "admission" / f"{name}.json").read_text())
    return data


def fixture_api(name: str) -> JSON:
    """A recorded API list response, e.g. ``fixture_api("pv-list")``."""
    data: JSON = json.loads((FIXTURES / "api" / f"{name}.json").read_text())
    return data


def review(
    obj: JSON,
    *,
    operation: str = "CREATE",
    old: JSON | None = None,
    namespace: str | None = None,
    dry_run: bool = False,
    api_version: str = "admission.k8s.io/v1",
    sub_resource: str = "",
    uid: str | None = None,
) -> JSON:
    """An AdmissionReview request for ``obj`` (kind taken from the object)."""
    kind = obj.get("kind", "Pod")
    group, version, resource = _GVR[kind]
    meta = obj.get("metadata", {})
    ns = namespace if namespace is not None else meta.get("namespace", "ns")
    request: JSON = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {
            "group": "apps" if kind == "Scale" else group,
            "version": "v1",
            "resource": resource,
        },
        "requestKind": {"group": group, "version": version, "kind": kind},
        "name": meta.get("name", ""),
        "namespace": ns,
        "operation": operation,
        "userInfo": {"username": "tester"},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"kind": f"{operation.title()}Options", "apiVersion": "meta.k8s.io/v1"},
    }
    if kind == "Scale" or sub_resource:
        request["subResource"] = sub_resource or "scale"
    return {"kind": "AdmissionReview", "apiVersion": api_version, "request": request}


def sts_pod(
    sts: str = "db",
    ordinal: int = 0,
    *,
    namespace: str = "ns",
    index_label: bool = True,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    affinity: JSON | None = None,
    node_selector: dict[str, str] | None = None,
    claims: tuple[str, ...] = ("data",),
    scheduler: str = "default-scheduler",
    node: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
) -> JSON:
    """A pod as the StatefulSet controller creates it (owner reference, pod-index label); with
    ``phase``, its ``status.phase``; ``deleting``: its deletion has begun (Terminating)."""
    base = fixture_review("003-Pod-CREATE")["request"]["object"]
    pod: JSON = copy.deepcopy(base)
    name = f"{sts}-{ordinal}"
    meta = pod["metadata"]
    meta["name"] = name
    meta["generateName"] = f"{sts}-"
    meta["namespace"] = namespace
    meta["labels"] = {
        "app": sts,
        "statefulset.kubernetes.io/pod-name": name,
        **({"apps.kubernetes.io/pod-index": str(ordinal)} if index_label else {}),
        **(labels or {}),
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    meta["ownerReferences"][0]["name"] = sts
    spec = pod["spec"]
    spec["hostname"] = name
    spec["subdomain"] = sts
    spec["schedulerName"] = scheduler
    spec["volumes"] = [
        {"name": c, "persistentVolumeClaim": {"claimName": f"{c}-{sts}-{ordinal}"}} for c in claims
    ] + [v for v in spec["volumes"] if "projected" in v]
    if affinity is not None:
        spec["affinity"] = affinity
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if node is not None:
        spec["nodeName"] = node
    if phase is not None:
        pod["status"] = {"phase": phase}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
        meta["deletionGracePeriodSeconds"] = 30
    return pod


def plain_pod(name: str = "bare", *, namespace: str = "ns") -> JSON:
    """A pod no controller owns."""
    pod: JSON = copy.deepcopy(fixture_review("035-Pod-CREATE")["request"]["object"])
    pod["metadata"]["name"] = name
    pod["metadata"]["namespace"] = namespace
    return pod


def statefulset(
    name: str = "db",
    *,
    namespace: str = "ns",
    replicas: int = 3,
    annotations: dict[str, str] | None = None,
    start: int | None = None,
    templates: tuple[str, ...] = ("data",),
    affinity: JSON | None = None,
    node_selector: dict[str, str] | None = None,
    when_scaled: str | None = None,
) -> JSON:
    """A StatefulSet like the recorded ``db`` one, with the given knobs (``when_scaled``: its
    ``persistentVolumeClaimRetentionPolicy.whenScaled``)."""
    spec: JSON = {
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "db", "image": "busybox:1.36"}]},
        },
        "volumeClaimTemplates": [
            {"metadata": {"name": t}, "spec": {"accessModes": ["ReadWriteOnce"]}} for t in templates
        ],
    }
    if start is not None:
        spec["ordinals"] = {"start": start}
    if affinity is not None:
        spec["template"]["spec"]["affinity"] = affinity
    if node_selector is not None:
        spec["template"]["spec"]["nodeSelector"] = node_selector
    if when_scaled is not None:
        spec["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": "Retain",
            "whenScaled": when_scaled,
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def scale(name: str = "db", *, namespace: str = "ns", replicas: int = 3) -> JSON:
    """An ``autoscaling/v1`` Scale as ``kubectl scale`` sends it."""
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "selector": f"app={name}"},
    }


def node(
    name: str,
    zone: str | None,
    *,
    labels: dict[str, str] | None = None,
    ready: str | None = None,
    taint: str | None = None,
) -> JSON:
    """A node with its labels; with ``ready`` ("True", "False", "Unknown"), the Ready condition
    its kubelet (or the node lifecycle controller) posts, and with ``taint`` that NoExecute
    taint (``node.kubernetes.io/unreachable``, ...). Without either: metadata only."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if zone is not None:
        all_labels["topology.kubernetes.io/zone"] = zone
    made: JSON = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": all_labels},
    }
    if ready is not None:
        made["status"] = {"conditions": [{"type": "Ready", "status": ready}]}
    if taint is not None:
        made["spec"] = {"taints": [{"key": taint, "effect": "NoExecute"}]}
    return made


def pv(
    name: str,
    *zones: str,
    claim: tuple[str, str] | None = None,
    key: str = "topology.kubernetes.io/zone",
    reclaim: str | None = None,
) -> JSON:
    """A PersistentVolume pinned to its zone by ``spec.nodeAffinity`` (like an EBS PV), or usable
    from several (a regional disk); with another ``key`` (``kubernetes.io/hostname``, a driver's
    node key) pinned to the nodes carrying one of the values (a local volume)."""
    spec: JSON = {
        "capacity": {"storage": "1Gi"},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": list(zones)}]}
                ]
            }
        },
    }
    if claim is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim[0],
            "name": claim[1],
        }
    if reclaim is not None:
        spec["persistentVolumeReclaimPolicy"] = reclaim
    return {
        "kind": "PersistentVolume",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "spec": spec,
    }


def pvc(name: str, *, namespace: str = "ns", volume: str = "", phase: str = "Bound") -> JSON:
    """A PersistentVolumeClaim, bound to ``volume`` when given."""
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], **({"volumeName": volume} if volume else {})},
        "status": {"phase": phase if volume else "Pending"},
    }


def zone_affinity(*terms: list[tuple[str, str, list[str]]]) -> JSON:
    """A required nodeAffinity with one term per argument, each a list of (key, op, values)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": k, "operator": op, "values": v} for k, op, v in term
                        ]
                    }
                    for term in terms
                ]
            }
        }
    }


def recorded_scale(name: str, *, namespace: str, old: int, new: int) -> JSON:
    """The recorded `kubectl scale` review (014, statefulsets/scale) for another set and counts.

    A scale to 0 arrives without ``spec.replicas`` (``omitempty``), as the API server sends it.
    """
    body: JSON = copy.deepcopy(fixture_review("014-Scale-UPDATE"))
    request = body["request"]
    request.update(name=name, namespace=namespace)
    for key, count in (("object", new), ("oldObject", old)):
        scale_obj = request[key]
        scale_obj["metadata"].update(name=name, namespace=namespace)
        scale_obj["spec"] = {"replicas": count} if count else {}
        scale_obj["status"]["selector"] = f"app={name}"
    return body


RECORDED_LISTS = (
    "nodes-metadata-list",
    "pv-list",
    "pvc-list",
    "statefulsets-list",
    "sts-pods-list",
)


def recorded_lists() -> list[JSON]:
    """The recorded cluster's list responses (six nodes in zone-a/b/c, three namespaces of
    StatefulSets, their claims and volumes), fresh copies to edit."""
    return [fixture_api(name) for name in RECORDED_LISTS]


def item(lists: list[JSON], kind_list: str, name: str, *, namespace: str | None = None) -> JSON:
    """One item of a recorded list, by the list's file name and the item's name."""
    found: list[JSON] = lists[RECORDED_LISTS.index(kind_list)]["items"]
    for obj in found:
        meta = obj["metadata"]
        if meta["name"] == name and (namespace is None or meta.get("namespace") == namespace):
            return obj
    raise KeyError(f"{kind_list} has no {namespace}/{name}")


def skipped_template_cluster() -> list[JSON]:
    """shop/db lists zones a, b, c; its pod template is labelled stszone.io/skip=true, so its
    pods reach no webhook and run where the scheduler put them: db-1 in zone-a, where the rule
    would have put zone-b."""
    zones = {"stszone.io/zones": "zone-a,zone-b,zone-c"}
    sts = statefulset("db", namespace="shop", replicas=3, templates=(), annotations=zones)
    sts["spec"]["template"]["metadata"]["labels"]["stszone.io/skip"] = "true"
    skip = {"stszone.io/skip": "true"}
    opted = {"stszone.io/enabled": "true"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": opted}},
        node("a1", "zone-a"),
        node("b1", "zone-b"),
        node("c1", "zone-c"),
        sts,
        sts_pod("db", 0, namespace="shop", claims=(), labels=skip, node="a1"),
        sts_pod("db", 1, namespace="shop", claims=(), labels=skip, node="a1"),
        sts_pod("db", 2, namespace="shop", claims=(), labels=skip, node="c1"),
    ]
