"""The cluster view the pure code reads, and the compact records it is made of.

One :class:`Store` serves both worlds: ``clusterfile.py`` fills it once from a saved
``kubectl get ... -o yaml`` list (offline), and ``watch.py`` keeps it current from list+watch
(live). The admission path only ever reads it: dictionary lookups, no I/O.

Each record keeps only what a rule reads (a node's labels, a volume's zones, a claim's volume,
a pod's node), so a cluster of thousands of nodes and 100k pods stays small in memory. The
``*_info`` functions turn a raw API object (full or metadata-only) into a record and raise
:class:`~webhook.errors.BadObject` for shapes they cannot read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from webhook import objects
from webhook.errors import BadObject
from webhook.spec import DEFAULT_TOPOLOGY_KEY, stszone_annotations

#: Node/PV label keys that name a zone, in order of preference. CSI drivers publish their own
#: topology key on PV nodeAffinity; their values are the same zone names as the node label.
ZONE_KEYS: Final = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
    "topology.gke.io/zone",
    "topology.disk.csi.azure.com/zone",
    "topology.cinder.csi.openstack.org/zone",
)

Kind = Literal["nodes", "volumes", "claims", "statefulsets", "pods", "namespaces"]
KINDS: Final[tuple[Kind, ...]] = (
    "nodes",
    "volumes",
    "claims",
    "statefulsets",
    "pods",
    "namespaces",
)
Key = str | tuple[str, str]

_intern = sys.intern


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node: its labels, and the condition types currently True (when known)."""

    name: str
    labels: Mapping[str, str]
    true_conditions: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A PersistentVolume: the zones it is pinned to per topology key, and its claim."""

    name: str
    zones: Mapping[str, frozenset[str]]
    claim: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        return self.name

    def zones_for(self, topology_key: str) -> frozenset[str]:
        """Zones this volume can be used from, on ``topology_key`` (or an equivalent zone key)."""
        found = self.zones.get(topology_key)
        if found is not None:
            return found
        if topology_key in ZONE_KEYS:
            for key in ZONE_KEYS:
                if key in self.zones:
                    return self.zones[key]
        return frozenset()


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A PersistentVolumeClaim: the volume it is bound to and its phase."""

    namespace: str
    name: str
    volume: str = ""
    phase: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class StatefulSetInfo:
    """A StatefulSet: what placement, the guard and the audit read."""

    namespace: str
    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int = 1
    start: int = 0
    selector: Mapping[str, str] = field(default_factory=dict)
    templates: tuple[str, ...] = ()
    #: The pod template's ``requiredDuringScheduling...`` nodeSelectorTerms and nodeSelector.
    node_terms: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A StatefulSet pod: ordinal, node, owning set, and the zone stszone recorded on it."""

    namespace: str
    name: str
    owner: str | None
    ordinal: int | None
    node: str = ""
    zone_annotation: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """A namespace and whether it is opted in (label ``stszone.io/enabled=true``)."""

    name: str
    enabled: bool

    @property
    def key(self) -> str:
        return self.name


Info = NodeInfo | VolumeInfo | ClaimInfo | StatefulSetInfo | PodInfo | NamespaceInfo


# --- extraction: raw API object -> record -------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise BadObject("object must be a JSON object")
    return objects.mapping(obj, "metadata")


def _name(meta: Mapping[str, Any]) -> str:
    name = objects.string(meta, "name", path="metadata")
    if not name:
        raise BadObject("metadata.name is missing")
    return _intern(name)


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    """Record of a Node or a metadata-only ``PartialObjectMetadata`` node."""
    meta = _meta(obj)
    labels = {_intern(k): _intern(v) for k, v in objects.str_map(meta, "labels").items()}
    status = objects.mapping(obj, "status")
    conditions = frozenset(
        _intern(c["type"])
        for c in objects.dicts(status, "conditions", path="status")
        if c.get("status") == "True" and isinstance(c.get("type"), str)
    )
    return NodeInfo(name=_name(meta), labels=labels, true_conditions=conditions)


def volume_info(obj: Mapping[str, Any]) -> VolumeInfo:
    """Record of a PersistentVolume: zones from ``spec.nodeAffinity`` (In terms) or labels."""
    meta = _meta(obj)
    spec = objects.mapping(obj, "spec")
    zones: dict[str, set[str]] = {}
    required = objects.mapping(objects.mapping(spec, "nodeAffinity"), "required")
    terms = objects.dicts(required, "nodeSelectorTerms", path="spec.nodeAffinity.required")
    for term in terms:
        for expr in objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]"):
            key, op = expr.get("key"), expr.get("operator")
            values = expr.get("values")
            if isinstance(key, str) and op == "In" and isinstance(values, list):
                zones.setdefault(key, set()).update(v for v in values if isinstance(v, str))
    labels = objects.str_map(meta, "labels")
    for key in ZONE_KEYS:
        if key in labels and key not in zones:
            # Zone labels on PVs may hold several zones joined by "__" (regional disks).
            zones[key] = set(labels[key].split("__"))
    claim_ref = objects.mapping(spec, "claimRef")
    claim = None
    if claim_ref.get("name"):
        claim = (
            _intern(objects.string(claim_ref, "namespace")),
            objects.string(claim_ref, "name"),
        )
    return VolumeInfo(
        name=_name(meta),
        zones={_intern(k): frozenset(map(_intern, v)) for k, v in zones.items()},
        claim=claim,
    )


def claim_info(obj: Mapping[str, Any]) -> ClaimInfo:
    """Record of a PersistentVolumeClaim."""
    meta = _meta(obj)
    return ClaimInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        volume=objects.string(objects.mapping(obj, "spec"), "volumeName"),
        phase=_intern(objects.string(objects.mapping(obj, "status"), "phase")),
    )


def statefulset_info(obj: Mapping[str, Any]) -> StatefulSetInfo:
    """Record of a StatefulSet."""
    meta = _meta(obj)
    spec = objects.mapping(obj, "spec")
    template_spec = objects.mapping(objects.mapping(spec, "template"), "spec", path="spec.template")
    affinity = objects.mapping(objects.mapping(template_spec, "affinity"), "nodeAffinity")
    required = objects.mapping(affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    terms = objects.dicts(required, "nodeSelectorTerms")
    templates = tuple(
        _name(objects.mapping(t, "metadata"))
        for t in objects.dicts(spec, "volumeClaimTemplates", path="spec")
    )
    selector = objects.str_map(objects.mapping(spec, "selector"), "matchLabels")
    return StatefulSetInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        annotations=stszone_annotations(objects.str_map(meta, "annotations")),
        replicas=objects.integer(spec, "replicas", default=1, path="spec"),
        start=objects.integer(objects.mapping(spec, "ordinals"), "start", default=0),
        selector=selector,
        templates=templates,
        node_terms=tuple(terms),
        node_selector=objects.str_map(template_spec, "nodeSelector"),
    )


def statefulset_owner(meta: Mapping[str, Any]) -> str | None:
    """Name of the StatefulSet (group ``apps``) that controls this object, if any."""
    for ref in objects.dicts(meta, "ownerReferences", path="metadata"):
        if ref.get("controller") is not True or ref.get("kind") != "StatefulSet":
            continue
        api_version, name = ref.get("apiVersion"), ref.get("name")
        if isinstance(api_version, str) and api_version.startswith("apps/"):
            return name if isinstance(name, str) and name else None
    return None


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    """Record of a StatefulSet pod."""
    from webhook.placement import ordinal_of  # placement imports this module

    meta = _meta(obj)
    owner = statefulset_owner(meta)
    return PodInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        owner=_intern(owner) if owner else None,
        ordinal=ordinal_of(meta),
        node=_intern(objects.string(objects.mapping(obj, "spec"), "nodeName")),
        zone_annotation=objects.str_map(meta, "annotations").get("stszone.io/zone", ""),
    )


def namespace_info(obj: Mapping[str, Any]) -> NamespaceInfo:
    """Record of a Namespace."""
    meta = _meta(obj)
    labels = objects.str_map(meta, "labels")
    return NamespaceInfo(name=_name(meta), enabled=labels.get("stszone.io/enabled") == "true")


#: Extractor per kind, for watchers and file loaders.
EXTRACTORS: Final[dict[Kind, Callable[[Mapping[str, Any]], Info]]] = {
    "nodes": node_info,
    "volumes": volume_info,
    "claims": claim_info,
    "statefulsets": statefulset_info,
    "pods": pod_info,
    "namespaces": namespace_info,
}

#: API ``kind`` -> store kind.
API_KINDS: Final[dict[str, Kind]] = {
    "Node": "nodes",
    "PartialObjectMetadata": "nodes",
    "PersistentVolume": "volumes",
    "PersistentVolumeClaim": "claims",
    "StatefulSet": "statefulsets",
    "Pod": "pods",
    "Namespace": "namespaces",
}


# --- the store ----------------------------------------------------------------------------


class Store:
    """In-memory cluster view. Writers: ``put``/``delete``/``replace``. Readers: the queries.

    All access happens on the event loop thread, so no locking is needed; ``replace`` swaps a
    whole table at once so readers never see a half-filled re-list.
    """

    def __init__(self, *, zones: tuple[str, ...] | None = None, live: bool = False) -> None:
        #: ``--zones``: the zone list new StatefulSets get, overriding discovery.
        self.zones_override = zones
        #: Fed by watches: a StatefulSet missing from a synced table is one the watch has not
        #: delivered yet (creation races its first pod), not one that does not exist.
        self.live = live
        self.nodes: dict[str, NodeInfo] = {}
        self.volumes: dict[str, VolumeInfo] = {}
        self.claims: dict[tuple[str, str], ClaimInfo] = {}
        self.statefulsets: dict[tuple[str, str], StatefulSetInfo] = {}
        self.pods: dict[tuple[str, str], PodInfo] = {}
        self.namespaces: dict[str, NamespaceInfo] = {}
        #: Kinds that have been filled (a file load, or a watch's first list).
        self.loaded: set[Kind] = set()
        self._node_generation = 0
        self._zone_cache: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._label_cache: dict[tuple[str, str], tuple[int, tuple[str, ...]]] = {}
        #: claim (namespace, name) -> PV name, from the PVs' claimRef (pre-bound volumes).
        self._volume_of_claim: dict[tuple[str, str], str] = {}

    # writers
    def table(self, kind: Kind) -> dict[Any, Any]:
        """The dict holding records of ``kind``."""
        table: dict[Any, Any] = getattr(self, kind)
        return table

    def put(self, kind: Kind, info: Info) -> None:
        """Insert or replace one record."""
        table = self.table(kind)
        if kind == "volumes":
            self._unindex_volume(table.get(info.key))
            self._index_volume(info)
        table[info.key] = info
        if kind == "nodes":
            self._node_generation += 1

    def delete(self, kind: Kind, key: Key) -> None:
        """Remove one record (missing is fine: a DELETED may follow a re-list)."""
        old = self.table(kind).pop(key, None)
        if kind == "volumes":
            self._unindex_volume(old)
        if kind == "nodes":
            self._node_generation += 1

    def replace(self, kind: Kind, infos: Iterable[Info]) -> None:
        """Swap the whole table of ``kind`` (a fresh list) and mark it loaded."""
        table = {info.key: info for info in infos}
        if kind == "volumes":
            self._volume_of_claim = {}
            for info in table.values():
                self._index_volume(info)
        setattr(self, kind, table)
        self.loaded.add(kind)
        if kind == "nodes":
            self._node_generation += 1

    def _index_volume(self, info: object) -> None:
        if isinstance(info, VolumeInfo) and info.claim is not None:
            self._volume_of_claim[info.claim] = info.name

    def _unindex_volume(self, info: object) -> None:
        if (
            isinstance(info, VolumeInfo)
            and info.claim is not None
            and self._volume_of_claim.get(info.claim) == info.name
        ):
            del self._volume_of_claim[info.claim]

    # queries
    def server_zones(self, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> tuple[str, ...]:
        """The server's zone source: ``--zones`` in its order, else zones on nodes, sorted."""
        if self.zones_override:
            return self.zones_override
        return self.discovered_zones(topology_key)

    def discovered_zones(self, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> tuple[str, ...]:
        """Sorted distinct values of ``topology_key`` over all nodes (cached per node change)."""
        cached = self._zone_cache.get(topology_key)
        if cached is not None and cached[0] == self._node_generation:
            return cached[1]
        zones = tuple(
            sorted(
                {n.labels[topology_key] for n in self.nodes.values() if topology_key in n.labels}
            )
        )
        self._zone_cache[topology_key] = (self._node_generation, zones)
        return zones

    def node_zone(self, node: str, topology_key: str = DEFAULT_TOPOLOGY_KEY) -> str | None:
        """The zone label of a node, or None when the node or its label is unknown."""
        info = self.nodes.get(node)
        return info.labels.get(topology_key) if info is not None else None

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]:
        """Names of nodes whose label ``key`` equals ``value`` (sorted; cached per node change)."""
        cached = self._label_cache.get((key, value))
        if cached is not None and cached[0] == self._node_generation:
            return cached[1]
        if len(self._label_cache) > 4096:
            self._label_cache.clear()
        names = tuple(sorted(n.name for n in self.nodes.values() if n.labels.get(key) == value))
        self._label_cache[(key, value)] = (self._node_generation, names)
        return names

    def statefulset(self, namespace: str, name: str) -> StatefulSetInfo | None:
        return self.statefulsets.get((namespace, name))

    def lagging(self) -> bool:
        """Whether a StatefulSet absent from this view may simply not have arrived yet."""
        return self.live and "statefulsets" in self.loaded

    def statefulsets_in(self, namespace: str) -> Iterator[StatefulSetInfo]:
        return (s for s in self.statefulsets.values() if s.namespace == namespace)

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pods.get((namespace, name))

    def claim(self, namespace: str, name: str) -> ClaimInfo | None:
        return self.claims.get((namespace, name))

    def volume(self, name: str) -> VolumeInfo | None:
        return self.volumes.get(name)

    def claim_zones(
        self, namespace: str, claim: str, topology_key: str
    ) -> tuple[str, frozenset[str]]:
        """(volume name, zones) of the PV bound to a claim; ``("", frozenset())`` if none.

        The PV's own ``claimRef`` counts too: a pre-bound PV pins the claim before binding.
        """
        info = self.claims.get((namespace, claim))
        volume = info.volume if info is not None and info.volume else ""
        volume = volume or self._volume_of_claim.get((namespace, claim), "")
        pv = self.volumes.get(volume) if volume else None
        if pv is None:
            return "", frozenset()
        return pv.name, pv.zones_for(topology_key)

    def namespace_enabled(self, namespace: str) -> bool | None:
        """True/False when namespaces are known, None when this view holds no namespaces."""
        if "namespaces" not in self.loaded and not self.namespaces:
            return None
        info = self.namespaces.get(namespace)
        return info.enabled if info is not None else False
