"""Strimzi KafkaNodePools as an ordinal workload: their records, node IDs and claim names. Pure.

A KafkaNodePool (``kafka.strimzi.io``) owns no pods itself: the Strimzi cluster operator
creates a StrimziPodSet ``<cluster>-<pool>`` whose controller creates one pod per node ID,
named ``<cluster>-<pool>-<nodeId>`` and labelled ``strimzi.io/cluster`` and
``strimzi.io/pool-name``. Node IDs are shared by every pool of a cluster, so a pool's IDs need
not be consecutive: the pool's current IDs are its ``status.nodeIds``. The operator creates a
broker's claims before its pod: ``data-<cluster>-<pool>-<id>`` for persistent-claim storage,
``data-<volume id>-<cluster>-<pool>-<id>`` for each JBOD volume.

On a scale-down the operator removes the IDs of ``strimzi.io/remove-node-ids`` that the pool
holds, in the order listed, then the highest remaining ones; it never writes that annotation.
The records here keep what placement and the guard read and nothing else.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from msgspec import field

from webhook.errors import BadObject
from webhook.model import objects
from webhook.model.annotations import SKIP, ZONE, misspelt_keys, stszone_annotations
from webhook.model.pinning import ZONE_KEYS, topology_label
from webhook.model.podspec import Going, going

GROUP: Final = "kafka.strimzi.io"
#: The versions Strimzi serves KafkaNodePools at, the current one first: Strimzi 1.0 serves
#: ``v1`` only, Strimzi before 0.49 ``v1beta2`` only.
VERSIONS: Final = ("v1", "v1beta2")
PODSET_GROUP: Final = "core.strimzi.io"
CLUSTER_LABEL: Final = "strimzi.io/cluster"
POOL_LABEL: Final = "strimzi.io/pool-name"
REMOVE_NODE_IDS: Final = "strimzi.io/remove-node-ids"
NEXT_NODE_IDS: Final = "strimzi.io/next-node-ids"
#: The Strimzi annotations a pool's record keeps besides ``stszone.io/*``.
KEPT: Final = (REMOVE_NODE_IDS, NEXT_NODE_IDS)

_SUFFIX = re.compile(r"-([0-9]+)$")
#: Java's ``\s`` (NodeIdRange's patterns): ``[ \t\n\x0B\f\r]``, not Python's wider one.
_JAVA_SPACE: Final = " \t\n\x0b\x0c\r"
_ITEM = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", re.ASCII)
#: Java's ``Integer.MAX_VALUE``: the operator cannot read a larger ID and ignores the annotation.
_INT_MAX: Final = 2**31 - 1


class KafkaNodePoolInfo(msgspec.Struct, frozen=True, gc=False):
    """A KafkaNodePool: its cluster, policy annotations, replicas and current node IDs."""

    namespace: str
    name: str
    uid: str = ""
    #: ``kafka.strimzi.io/<version>`` it was read at: a version the cluster serves (Strimzi 1.0
    #: serves ``v1`` only, Strimzi before 0.49 ``v1beta2`` only); "" when the object named none.
    api_version: str = ""
    #: ``metadata.labels["strimzi.io/cluster"]``.
    cluster: str = ""
    #: Its ``stszone.io/*`` annotations and the operator's node-ID annotations.
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int = 0
    #: ``status.nodeIds``; None before the operator has reconciled the pool.
    node_ids: tuple[int, ...] | None = None
    #: The prefixes of its brokers' claim names: ``data``, or ``data-<id>`` per JBOD volume.
    claim_prefixes: tuple[str, ...] = ()
    #: Labelled ``stszone.io/skip=true``: the webhooks' objectSelector leaves it alone.
    skipped: bool = False
    #: The names of its misspelt ``stszone.io/`` keys, which ``annotations`` leaves out: no
    #: path but its UPDATE reads them, and audit and explain name them.
    misspelt: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def claim_stems(self) -> tuple[str, ...]:
        """``<prefix>-<cluster>-<pool>`` of each claim of its brokers (the ID follows)."""
        return tuple(f"{p}-{self.cluster}-{self.name}" for p in self.claim_prefixes)


class PoolPodInfo(msgspec.Struct, frozen=True, gc=False):
    """A pod of a KafkaNodePool: its node ID, node, zone facts, claims and whether it goes."""

    namespace: str
    name: str
    cluster: str
    pool: str
    node_id: int | None = None
    node: str = ""
    #: Its own zone labels (PodTopologyLabels), as (key, value) pairs.
    topology: tuple[tuple[str, str], ...] = ()
    #: ``stszone.io/zone``: the zone stszone chose when the pod was created.
    zone: str = ""
    going: Going = ""
    claims: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def group(self) -> tuple[str, str, str]:
        """(namespace, cluster, pool): the pool this pod belongs to."""
        return (self.namespace, self.cluster, self.pool)

    def zone_label(self, topology_key: str) -> str | None:
        """The pod's own label for ``topology_key`` (or an equivalent zone key), if any."""
        return topology_label(self.topology, topology_key)


def _int(value: Any, *, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadObject(f"{path} must be an integer")
    return value


def _node_ids(status: Mapping[str, Any]) -> tuple[int, ...] | None:
    ids = status.get("nodeIds")
    if ids is None:
        return None
    if not isinstance(ids, list):
        raise BadObject("status.nodeIds must be a list")
    return tuple(sorted(_int(i, path="status.nodeIds[]") for i in ids))


def claim_prefixes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The claim-name prefixes of a pool's ``spec.storage`` (none for ephemeral storage)."""
    storage = objects.mapping(spec, "storage", path="spec")
    kind = objects.string(storage, "type", path="spec.storage")
    if kind == "persistent-claim":
        return ("data",)
    if kind != "jbod":
        return ()
    volumes = objects.dicts(storage, "volumes", path="spec.storage")
    return tuple(
        f"data-{_int(v.get('id', 0), path='spec.storage.volumes[].id')}"
        for v in volumes
        if v.get("type") == "persistent-claim"
    )


def nodepool_info(obj: Mapping[str, Any]) -> KafkaNodePoolInfo:
    """Record of a KafkaNodePool (``v1beta2`` and ``v1`` have the same fields read here)."""
    meta = objects.mapping(obj, "metadata")
    name = objects.string(meta, "name", path="metadata")
    if not name:
        raise BadObject("metadata.name is missing")
    annotations = objects.str_map(meta, "annotations", path="metadata")
    labels = objects.str_map(meta, "labels", path="metadata")
    kept = stszone_annotations(annotations)
    kept.update({k: annotations[k] for k in KEPT if k in annotations})
    spec = objects.mapping(obj, "spec")
    replicas = spec.get("replicas", 0)
    api_version = obj.get("apiVersion")
    return KafkaNodePoolInfo(
        namespace=objects.string(meta, "namespace"),
        name=name,
        uid=objects.string(meta, "uid"),
        api_version=api_version
        if isinstance(api_version, str) and api_version.startswith(f"{GROUP}/")
        else "",
        cluster=labels.get(CLUSTER_LABEL, ""),
        annotations=kept,
        replicas=_int(replicas, path="spec.replicas"),
        node_ids=_node_ids(objects.mapping(obj, "status")),
        claim_prefixes=claim_prefixes(spec),
        skipped=labels.get(SKIP) == "true",
        misspelt=misspelt_keys(annotations),
    )


def node_id_of(name: str) -> int | None:
    """The node ID a pod or claim name ends with (``-<digits>``)."""
    match = _SUFFIX.search(name)
    return int(match.group(1)) if match else None


def pool_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(cluster, pool) of an object labelled by the operator, else None."""
    cluster, pool = labels.get(CLUSTER_LABEL, ""), labels.get(POOL_LABEL, "")
    return (cluster, pool) if cluster and pool else None


def poolpod_info(obj: Mapping[str, Any]) -> PoolPodInfo:
    """Record of a pod of a KafkaNodePool; :class:`BadObject` when it names no pool."""
    meta = objects.mapping(obj, "metadata")
    name = objects.string(meta, "name", path="metadata")
    labels = objects.str_map(meta, "labels", path="metadata")
    owner = pool_of(labels)
    if not name or owner is None:
        raise BadObject(f"pod without a name or without {CLUSTER_LABEL} and {POOL_LABEL}")
    spec = objects.mapping(obj, "spec")
    claims = tuple(
        objects.string(objects.mapping(v, "persistentVolumeClaim"), "claimName")
        for v in objects.dicts(spec, "volumes", path="spec")
        if v.get("persistentVolumeClaim")
    )
    topology = tuple(sorted((k, v) for k, v in labels.items() if k in ZONE_KEYS))
    return PoolPodInfo(
        namespace=objects.string(meta, "namespace"),
        name=name,
        cluster=owner[0],
        pool=owner[1],
        node_id=node_id_of(name),
        node=objects.string(spec, "nodeName"),
        topology=topology,
        zone=objects.str_map(meta, "annotations", path="metadata").get(ZONE, ""),
        going=going(meta, objects.mapping(obj, "status")),
        claims=claims,
    )


def parse_node_ids(text: str) -> tuple[tuple[int, int], ...] | None:
    """The items of a ``remove-node-ids`` / ``next-node-ids`` value as (first, last) ranges,
    in the order listed; None when the operator ignores it (not ``[...]`` of IDs and ``a-b``
    ranges, or an ID beyond Java's ``int``). Blank and ``[]`` are empty."""
    body = text.strip(_JAVA_SPACE)
    if not body:
        return ()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    inner = body[1:-1]
    if not inner.strip(_JAVA_SPACE):
        return ()
    items: list[tuple[int, int]] = []
    for part in inner.split(","):
        match = _ITEM.fullmatch(part)
        if match is None:
            return None
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if max(first, last) > _INT_MAX:
            return None
        items.append((first, last))
    return tuple(items)


def format_node_ids(ids: Iterable[int]) -> str:
    """The annotation value listing ``ids`` in order: ``[3, 5]``."""
    return "[" + ", ".join(str(i) for i in ids) + "]"


def removal_order(
    node_ids: Sequence[int], replicas: int, remove_node_ids: str | None
) -> tuple[int, ...]:
    """The IDs the operator removes when ``spec.replicas`` is below ``len(node_ids)``, in order:
    the annotation's IDs the pool holds, as listed (a range either way), then the highest."""
    count = len(node_ids) - max(0, replicas)
    if count <= 0:
        return ()
    # The IDs still held, sorted: each item takes its slice out (two bisections), so the
    # work is bounded by the IDs and the items, never their product.
    held = sorted(set(node_ids))
    removed: list[int] = []
    items = parse_node_ids(remove_node_ids) if remove_node_ids is not None else None
    for first, last in items or ():
        lo = bisect_left(held, min(first, last))
        hi = bisect_right(held, max(first, last), lo)
        within = held[lo:hi]
        del held[lo:hi]
        for node_id in within if last >= first else reversed(within):
            if len(removed) == count:
                return tuple(removed)
            removed.append(node_id)
    removed.extend(reversed(held[max(0, len(held) - (count - len(removed))) :]))
    return tuple(removed)
