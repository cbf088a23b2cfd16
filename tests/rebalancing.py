"""A small cluster for the rebalance tests: nodes in three zones and one StatefulSet's objects.

Objects have the shapes a real API server lists (uids, Ready conditions, a StatefulSet status),
built on :mod:`tests.builders`. ``where`` maps each ordinal to the node its pod runs on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from tests import builders as b

JSON = dict[str, Any]
ZONES = ("zone-a", "zone-b", "zone-c")
#: Two nodes per zone: a1 a2 | b1 b2 | c1 c2.
NODES = {f"{z[-1]}{i}": z for z in ZONES for i in (1, 2)}
NAMESPACE = "shop"


def node(
    name: str, *, cordoned: bool = False, ready: bool = True, taints: Sequence[JSON] = ()
) -> JSON:
    """A full Node of ``NODES`` with its zone, Ready condition, cordon and taints."""
    obj = b.node(name, NODES.get(name))
    obj["spec"] = {"unschedulable": True} if cordoned else {}
    if taints:
        obj["spec"]["taints"] = list(taints)
    obj["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return obj


def pod(
    ordinal: int,
    node_name: str | None,
    *,
    sts: str = "db",
    ready: bool = True,
    uid: str | None = None,
    deleting: bool = False,
) -> JSON:
    """A StatefulSet pod on ``node_name`` (None: Pending), Ready or not."""
    obj = b.sts_pod(sts, ordinal, namespace=NAMESPACE, node=node_name)
    obj["metadata"]["uid"] = uid or f"uid-{sts}-{ordinal}"
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    obj["status"] = {"phase": "Running" if node_name else "Pending", "conditions": [condition]}
    return obj


def statefulset(
    replicas: int,
    *,
    name: str = "db",
    zones: Sequence[str] = ZONES,
    templates: tuple[str, ...] = (),
    annotations: Mapping[str, str] | None = None,
    ready: int | None = None,
    updating: bool = False,
    template_labels: Mapping[str, str] | None = None,
    tolerations: Sequence[JSON] = (),
    retention: tuple[str, str] | None = None,
) -> JSON:
    """A StatefulSet listing ``zones``, with the status its controller would report."""
    notes = {"stszone.io/zones": ",".join(zones), **(annotations or {})}
    obj = b.statefulset(
        name, namespace=NAMESPACE, replicas=replicas, annotations=notes, templates=templates
    )
    obj["metadata"]["uid"] = f"uid-{name}"
    spec = obj["spec"]
    spec["template"]["metadata"]["labels"].update(template_labels or {})
    if tolerations:
        spec["template"]["spec"]["tolerations"] = list(tolerations)
    if retention is not None:
        spec["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": retention[0],
            "whenScaled": retention[1],
        }
    obj["status"] = {
        "replicas": replicas,
        "readyReplicas": replicas if ready is None else ready,
        "currentRevision": f"{name}-1",
        "updateRevision": f"{name}-2" if updating else f"{name}-1",
    }
    return obj


def namespace(name: str = NAMESPACE, *, enabled: bool = True) -> JSON:
    labels = {"stszone.io/enabled": "true"} if enabled else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def claim(name: str, volume: str, *, owner_pod: str | None = None) -> JSON:
    """A bound claim (uid ``uid-<name>``), owned by a pod when ``owner_pod`` is given."""
    obj = b.pvc(name, namespace=NAMESPACE, volume=volume)
    obj["metadata"]["uid"] = f"uid-{name}"
    if owner_pod is not None:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner_pod, "uid": f"uid-{owner_pod}"}
        ]
    return obj


def volume(name: str, zone: str, claim_name: str, *, reclaim: str = "Delete") -> JSON:
    """A PV pinned to ``zone``, bound to ``claim_name``."""
    obj = b.pv(name, zone, claim=(NAMESPACE, claim_name))
    obj["spec"]["claimRef"]["uid"] = f"uid-{claim_name}"
    obj["spec"]["persistentVolumeReclaimPolicy"] = reclaim
    obj["status"] = {"phase": "Bound"}
    return obj


def cluster(
    where: Mapping[int, str | None],
    *,
    sts: JSON | None = None,
    nodes: Sequence[JSON] | None = None,
    extra: Sequence[JSON] = (),
) -> list[JSON]:
    """Namespace, nodes, the set (``len(where)`` replicas unless given) and its Ready pods."""
    objects = [namespace(), *(nodes if nodes is not None else [node(n) for n in NODES])]
    objects.append(copy.deepcopy(sts) if sts is not None else statefulset(len(where)))
    set_name = objects[-1]["metadata"]["name"]
    objects += [pod(o, n, sts=set_name) for o, n in where.items()]
    return [*objects, *extra]
