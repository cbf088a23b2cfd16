"""A generated cluster of live size for the benchmark's fake API server.

5,000 nodes over three zones and 100,000 StatefulSet pods (2,000 sets of 50 in 50 opted-in
namespaces), each pod with its bound claim and a zone-pinned PersistentVolume: 305,050 objects,
stored as the bytes the fake API server sends (``tests.fakestate.Stored``), so filling it costs
one ``json.dumps`` per object. The recorded cluster of ``tests/fixtures/api`` (StatefulSet
``cap/db`` and friends) is served beside it, so the recorded AdmissionReviews meet their set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from tests.fakestate import Stored

ZONES: Final = ("zone-a", "zone-b", "zone-c")
ZONE_KEY: Final = "topology.kubernetes.io/zone"


@dataclass(frozen=True, slots=True)
class Shape:
    """How big the generated cluster is."""

    nodes: int = 5_000
    namespaces: int = 50
    sets_per_namespace: int = 40
    replicas: int = 50

    @property
    def pods(self) -> int:
        return self.namespaces * self.sets_per_namespace * self.replicas


def namespace_name(index: int) -> str:
    return f"bench-{index:02d}"


def set_name(index: int) -> str:
    return f"set-{index:03d}"


def node_name(index: int) -> str:
    return f"node-{index:05d}"


def _stored(key: tuple[str, str], labels: dict[str, str], obj: dict[str, Any]) -> Stored:
    return Stored(key, labels, json.dumps(obj, separators=(",", ":")).encode())


def nodes(shape: Shape) -> Iterator[Stored]:
    for i in range(shape.nodes):
        name = node_name(i)
        labels = {ZONE_KEY: ZONES[i % len(ZONES)], "kubernetes.io/hostname": name}
        meta = {"name": name, "uid": f"node-uid-{i}", "resourceVersion": "10", "labels": labels}
        yield _stored(("", name), labels, {"metadata": meta, "spec": {}, "status": {}})


def namespaces(shape: Shape) -> Iterator[Stored]:
    for n in range(shape.namespaces):
        name = namespace_name(n)
        labels = {"stszone.io/enabled": "true", "kubernetes.io/metadata.name": name}
        yield _stored(("", name), labels, {"metadata": {"name": name, "labels": labels}})


def _sets(shape: Shape) -> Iterator[tuple[str, str, int]]:
    for n in range(shape.namespaces):
        for s in range(shape.sets_per_namespace):
            yield namespace_name(n), set_name(s), n * shape.sets_per_namespace + s


def statefulsets(shape: Shape) -> Iterator[Stored]:
    for ns, name, _ in _sets(shape):
        labels = {"app": name}
        obj = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": f"sts-{ns}-{name}",
                "resourceVersion": "20",
                "labels": labels,
                "annotations": {"stszone.io/zones": ",".join(ZONES)},
            },
            "spec": {
                "replicas": shape.replicas,
                "selector": {"matchLabels": labels},
                "serviceName": name,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "db", "image": "busybox:1.36"}]},
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
            },
        }
        yield _stored((ns, name), labels, obj)


def _pod_node(shape: Shape, set_index: int, ordinal: int) -> str:
    # Ordinal i sits in zones[i mod 3], as stszone placed it; nodes of zone z are z, z+3, ...
    zone = ordinal % len(ZONES)
    per_zone = shape.nodes // len(ZONES)
    return node_name(zone + len(ZONES) * ((set_index * 7 + ordinal) % per_zone))


def pods(shape: Shape) -> Iterator[Stored]:
    for ns, sts, index in _sets(shape):
        for i in range(shape.replicas):
            name = f"{sts}-{i}"
            labels = {
                "app": sts,
                "apps.kubernetes.io/pod-index": str(i),
                "statefulset.kubernetes.io/pod-name": name,
            }
            obj = {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": f"pod-{ns}-{name}",
                    "resourceVersion": "30",
                    "labels": labels,
                    "annotations": {"stszone.io/zone": ZONES[i % len(ZONES)]},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "StatefulSet",
                            "name": sts,
                            "uid": f"sts-{ns}-{sts}",
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {"nodeName": _pod_node(shape, index, i)},
                "status": {"phase": "Running"},
            }
            yield _stored((ns, name), labels, obj)


def claims(shape: Shape) -> Iterator[Stored]:
    for ns, sts, _ in _sets(shape):
        for i in range(shape.replicas):
            name = f"data-{sts}-{i}"
            obj = {
                "metadata": {"name": name, "namespace": ns, "resourceVersion": "40"},
                "spec": {"volumeName": f"pv-{ns}-{sts}-{i}"},
                "status": {"phase": "Bound"},
            }
            yield _stored((ns, name), {}, obj)


def volumes(shape: Shape) -> Iterator[Stored]:
    for ns, sts, _ in _sets(shape):
        for i in range(shape.replicas):
            name = f"pv-{ns}-{sts}-{i}"
            term = {"key": ZONE_KEY, "operator": "In", "values": [ZONES[i % len(ZONES)]]}
            obj = {
                "metadata": {"name": name, "resourceVersion": "50"},
                "spec": {
                    "nodeAffinity": {
                        "required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
                    },
                    "claimRef": {"namespace": ns, "name": f"data-{sts}-{i}"},
                },
                "status": {"phase": "Bound"},
            }
            yield _stored(("", name), {}, obj)


#: fake API resource name -> generator
GENERATORS: Final = {
    "nodes": nodes,
    "namespaces": namespaces,
    "statefulsets": statefulsets,
    "pods": pods,
    "persistentvolumeclaims": claims,
    "persistentvolumes": volumes,
}
