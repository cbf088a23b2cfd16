"""The generated cluster of live size the benchmarks serve from the fake API server.

5,000 nodes over three zones and 100,000 StatefulSet pods (2,000 sets of 50 in 50 opted-in
namespaces), each pod with its bound claim and a zone-pinned PersistentVolume: 305,050
objects. Every object is a recorded one of ``tests/fixtures/api`` with its names, zones and
references filled in (managedFields and all: about 5 KB a pod, 4 KB a node, 2.6 KB a volume,
1.4 KB a claim, some 850 MB to list), so listing them costs what a real cluster's lists cost.
Ordinal ``i`` of a set is in ``ZONES[i mod 3]``: its pod on a node of that zone, its volume
pinned there, as stszone places them. The recorded cluster (StatefulSet ``cap/db`` and
friends) is served beside it, so the recorded AdmissionReviews meet their set.

Objects are stored as the bytes the fake API server sends (``tests.fakestate.Stored``), each
filled into a template by one join, so the 305,050 take seconds to make.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from tests.fakestate import API_FIXTURES, Stored

ZONES: Final = ("zone-a", "zone-b", "zone-c")
ZONE_KEY: Final = "topology.kubernetes.io/zone"
_HOLE: Final = re.compile(r"@(\w+)@")


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


class Template:
    """A recorded object with ``@FIELD@`` holes, filled by one join."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self._parts = _HOLE.split(json.dumps(obj, separators=(",", ":")))

    def fill(self, **values: str) -> bytes:
        return "".join(
            part if i % 2 == 0 else values[part] for i, part in enumerate(self._parts)
        ).encode()


def _recorded(name: str) -> dict[str, Any]:
    items = json.loads((API_FIXTURES / f"{name}.json").read_text())["items"]
    first: dict[str, Any] = copy.deepcopy(items[0])
    return first


@cache
def _templates(replicas: int) -> dict[str, Template]:
    node = _recorded("nodes-list-limit2")
    node["metadata"].update(name="@NAME@", uid="@UID@")
    node["metadata"]["labels"].update({"kubernetes.io/hostname": "@NAME@", ZONE_KEY: "@ZONE@"})
    sts = _recorded("statefulsets-list")
    sts["metadata"].update(name="@STS@", namespace="@NS@", uid="@OWNER@", labels={"app": "@STS@"})
    sts["metadata"]["annotations"]["stszone.io/zones"] = ",".join(ZONES)
    sts["spec"].update(replicas=replicas, serviceName="@STS@")
    sts["spec"]["selector"] = {"matchLabels": {"app": "@STS@"}}
    sts["spec"]["template"]["metadata"]["labels"] = {"app": "@STS@"}
    pod = _recorded("sts-pods-list")
    meta = pod["metadata"]
    meta.update(name="@STS@-@IDX@", namespace="@NS@", uid="@UID@", generateName="@STS@-")
    meta["labels"].update(
        {
            "app": "@STS@",
            "apps.kubernetes.io/pod-index": "@IDX@",
            "statefulset.kubernetes.io/pod-name": "@STS@-@IDX@",
            ZONE_KEY: "@ZONE@",
        }
    )
    meta["annotations"]["stszone.io/zone"] = "@ZONE@"
    meta["ownerReferences"][0].update(name="@STS@", uid="@OWNER@")
    pod["spec"].update(nodeName="@NODE@", hostname="@STS@-@IDX@", subdomain="@STS@")
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "data-@STS@-@IDX@"
    claim = _recorded("pvc-list")
    claim["metadata"].update(name="data-@STS@-@IDX@", namespace="@NS@", uid="@CLAIM@")
    claim["metadata"]["labels"] = {"app": "@STS@"}
    claim["spec"]["volumeName"] = "@PV@"
    volume = _recorded("pv-list")
    volume["metadata"].update(name="@PV@", uid="@UID@")
    volume["metadata"]["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration")
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"][0]["values"] = ["@ZONE@"]
    volume["spec"]["claimRef"].update(namespace="@NS@", name="data-@STS@-@IDX@", uid="@CLAIM@")
    return {
        "nodes": Template(node),
        "statefulsets": Template(sts),
        "pods": Template(pod),
        "persistentvolumeclaims": Template(claim),
        "persistentvolumes": Template(volume),
    }


def _uid(kind: int, n: int) -> str:
    return f"{kind:08x}-0000-4000-8000-{n:012x}"


def nodes(shape: Shape) -> Iterator[Stored]:
    fill = _templates(shape.replicas)["nodes"].fill
    for i in range(shape.nodes):
        name, zone = node_name(i), ZONES[i % len(ZONES)]
        labels = {ZONE_KEY: zone, "kubernetes.io/hostname": name}
        yield Stored(("", name), labels, fill(NAME=name, UID=_uid(1, i), ZONE=zone))


def namespaces(shape: Shape) -> Iterator[Stored]:
    for n in range(shape.namespaces):
        name = namespace_name(n)
        labels = {"stszone.io/enabled": "true", "kubernetes.io/metadata.name": name}
        obj = {"metadata": {"name": name, "uid": _uid(6, n), "labels": labels}}
        yield Stored(("", name), labels, json.dumps(obj, separators=(",", ":")).encode())


def _sets(shape: Shape) -> Iterator[tuple[str, str, int]]:
    for n in range(shape.namespaces):
        for s in range(shape.sets_per_namespace):
            yield namespace_name(n), set_name(s), n * shape.sets_per_namespace + s


def statefulsets(shape: Shape) -> Iterator[Stored]:
    fill = _templates(shape.replicas)["statefulsets"].fill
    for ns, name, index in _sets(shape):
        yield Stored((ns, name), {"app": name}, fill(NS=ns, STS=name, OWNER=_uid(2, index)))


def _ordinals(shape: Shape) -> Iterator[tuple[int, dict[str, str]]]:
    """Every pod's number and the fields its pod, claim and volume are filled with."""
    for ns, sts, index in _sets(shape):
        for i in range(shape.replicas):
            n = index * shape.replicas + i
            yield n, {"NS": ns, "STS": sts, "IDX": str(i), "ZONE": ZONES[i % len(ZONES)]}


def _pod_node(shape: Shape, n: int, ordinal: int) -> str:
    # Nodes of zone z are z, z + 3, ...: ordinal i's pod is on one of ZONES[i mod 3].
    per_zone = shape.nodes // len(ZONES)
    return node_name(ordinal % len(ZONES) + len(ZONES) * (n * 7 % per_zone))


def pods(shape: Shape) -> Iterator[Stored]:
    fill = _templates(shape.replicas)["pods"].fill
    for n, f in _ordinals(shape):
        name = f"{f['STS']}-{f['IDX']}"
        labels = {
            "app": f["STS"],
            "apps.kubernetes.io/pod-index": f["IDX"],
            "statefulset.kubernetes.io/pod-name": name,
            ZONE_KEY: f["ZONE"],
        }
        node = _pod_node(shape, n, int(f["IDX"]))
        body = fill(**f, UID=_uid(3, n), OWNER=_uid(2, n // shape.replicas), NODE=node)
        yield Stored((f["NS"], name), labels, body)


def claims(shape: Shape) -> Iterator[Stored]:
    fill = _templates(shape.replicas)["persistentvolumeclaims"].fill
    for n, f in _ordinals(shape):
        key = (f["NS"], f"data-{f['STS']}-{f['IDX']}")
        yield Stored(key, {"app": f["STS"]}, fill(**f, CLAIM=_uid(5, n), PV=f"pv-{n:06d}"))


def volumes(shape: Shape) -> Iterator[Stored]:
    fill = _templates(shape.replicas)["persistentvolumes"].fill
    for n, f in _ordinals(shape):
        name = f"pv-{n:06d}"
        yield Stored(("", name), {}, fill(**f, PV=name, UID=_uid(4, n), CLAIM=_uid(5, n)))


#: fake API resource name -> generator
GENERATORS: Final[dict[str, Callable[[Shape], Iterator[Stored]]]] = {
    "nodes": nodes,
    "namespaces": namespaces,
    "statefulsets": statefulsets,
    "pods": pods,
    "persistentvolumeclaims": claims,
    "persistentvolumes": volumes,
}
