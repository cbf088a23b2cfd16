"""The compact records the cluster view holds, and how raw API objects become them. Pure.

Each record keeps only what a rule reads (a node's labels, a volume's zones, a claim's volume,
a pod's node and its own topology labels), so a cluster of thousands of nodes and 100k pods
stays small in memory. The
``*_info`` functions turn a raw API object (full or metadata-only) into a record and raise
:class:`~webhook.errors.BadObject` for shapes they cannot read; ``EXTRACTORS`` maps each
store kind to its function for the watches and the file loader.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from webhook.errors import BadObject
from webhook.model import objects
from webhook.model.annotations import ENABLED, POD_INDEX_LABEL, stszone_annotations

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

#: Node label naming the node itself; local PersistentVolumes are pinned to a node with it.
HOSTNAME: Final = "kubernetes.io/hostname"

Table = Literal["nodes", "volumes", "claims", "statefulsets", "pods", "namespaces"]
TABLES: Final[tuple[Table, ...]] = (
    "nodes",
    "volumes",
    "claims",
    "statefulsets",
    "pods",
    "namespaces",
)
Key = str | tuple[str, str]

_intern = sys.intern
_SUFFIX = re.compile(r"-([0-9]+)$")


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
    #: ``spec.claimRef.uid``: "" when pre-bound by name (the claim may not exist yet).
    claim_uid: str = ""

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
    """A PersistentVolumeClaim: the volume it is bound to."""

    namespace: str
    name: str
    volume: str = ""
    #: Tells a claim from an earlier one of the same name (a volume's claimRef names the uid).
    uid: str = ""

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
    templates: tuple[str, ...] = ()
    #: The pod template's ``requiredDuringScheduling...`` nodeSelectorTerms and nodeSelector.
    node_terms: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A StatefulSet pod: ordinal, node, owning set, and its own topology labels."""

    namespace: str
    name: str
    owner: str | None
    ordinal: int | None
    node: str = ""
    #: The pod's own topology labels, as (key, value) pairs: Kubernetes 1.33+ copies the node's
    #: ``topology.kubernetes.io/{zone,region}`` onto a pod when it is bound (PodTopologyLabels),
    #: so a pod stays located when its node later loses the label or leaves the view.
    topology: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def zone_label(self, topology_key: str) -> str | None:
        """The pod's own label for ``topology_key`` (or an equivalent zone key), if any."""
        labels = dict(self.topology)
        found = labels.get(topology_key)
        if found is None and topology_key in ZONE_KEYS:
            found = next((labels[k] for k in ZONE_KEYS if k in labels), None)
        return found


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
    # A Released (or Failed) volume keeps the claimRef of its deleted claim, uid and all, but
    # never binds again: a new claim of that name must not be pinned to where the old data was.
    phase = objects.string(objects.mapping(obj, "status"), "phase")
    if claim_ref.get("name") and phase not in ("Released", "Failed"):
        # Interned: the claim's own record holds the same name (100k volumes: ~7 MB).
        claim = (
            _intern(objects.string(claim_ref, "namespace")),
            _intern(objects.string(claim_ref, "name")),
        )
    return VolumeInfo(
        name=_name(meta),
        zones=_shared_zones(zones),
        claim=claim,
        claim_uid=objects.string(claim_ref, "uid") if claim else "",
    )


#: One read-only zones mapping per distinct value: 100k volumes pinned to three zones share
#: three mappings instead of holding 100k dicts and frozensets (~45 MB).
_ZONE_MAPS: dict[tuple[tuple[str, tuple[str, ...]], ...], Mapping[str, frozenset[str]]] = {}


def _shared_zones(zones: dict[str, set[str]]) -> Mapping[str, frozenset[str]]:
    key = tuple(sorted((k, tuple(sorted(v))) for k, v in zones.items()))
    shared = _ZONE_MAPS.get(key)
    if shared is None:
        if len(_ZONE_MAPS) >= 4096:  # distinct zone sets are few; bound them all the same
            _ZONE_MAPS.clear()
        shared = _ZONE_MAPS[key] = MappingProxyType(
            {_intern(k): frozenset(map(_intern, v)) for k, v in zones.items()}
        )
    return shared


def claim_info(obj: Mapping[str, Any]) -> ClaimInfo:
    """Record of a PersistentVolumeClaim."""
    meta = _meta(obj)
    return ClaimInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        # Interned: the volume's record holds the same name.
        volume=_intern(objects.string(objects.mapping(obj, "spec"), "volumeName")),
        uid=objects.string(meta, "uid"),
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
    return StatefulSetInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        annotations=stszone_annotations(objects.str_map(meta, "annotations")),
        replicas=objects.integer(spec, "replicas", default=1, path="spec"),
        start=objects.integer(objects.mapping(spec, "ordinals"), "start", default=0),
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


def ordinal_of(meta: Mapping[str, Any], *, labels: Mapping[str, str] | None = None) -> int | None:
    """Ordinal from the ``apps.kubernetes.io/pod-index`` label, else the name's ``-N`` suffix.

    ``labels``: the metadata's labels, when the caller has already read them.
    """
    if labels is None:
        labels = objects.str_map(meta, "labels")
    index = labels.get(POD_INDEX_LABEL, "")
    if index.isascii() and index.isdigit():
        return int(index)
    match = _SUFFIX.search(objects.string(meta, "name"))
    return int(match.group(1)) if match else None


def is_topology_label(key: str) -> bool:
    """Whether a pod label names where it runs: a zone key, or any ``topology.*/`` key."""
    return key in ZONE_KEYS or key.partition("/")[0].startswith("topology.")


#: One shared tuple per distinct set of pod topology labels: the pods of a zone all carry the
#: same few (zone, region), so 100k pods hold a handful of tuples, not 100k.
_TOPOLOGIES: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_TOPOLOGIES_MAX: Final = 4096


def _shared(topology: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    found = _TOPOLOGIES.get(topology)
    if found is not None:
        return found
    if len(_TOPOLOGIES) < _TOPOLOGIES_MAX:
        _TOPOLOGIES[topology] = topology
    return topology


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    """Record of a StatefulSet pod (of its labels, only the topology ones are kept)."""
    meta = _meta(obj)
    owner = statefulset_owner(meta)
    labels = objects.str_map(meta, "labels", path="metadata")
    topology = _shared(
        tuple(sorted((_intern(k), _intern(v)) for k, v in labels.items() if is_topology_label(k)))
    )
    return PodInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        owner=_intern(owner) if owner else None,
        ordinal=ordinal_of(meta),
        node=_intern(objects.string(objects.mapping(obj, "spec"), "nodeName")),
        topology=topology,
    )


def namespace_info(obj: Mapping[str, Any]) -> NamespaceInfo:
    """Record of a Namespace."""
    meta = _meta(obj)
    labels = objects.str_map(meta, "labels")
    return NamespaceInfo(name=_name(meta), enabled=labels.get(ENABLED) == "true")


#: Extractor per table, for watchers and file loaders.
EXTRACTORS: Final[dict[Table, Callable[[Mapping[str, Any]], Info]]] = {
    "nodes": node_info,
    "volumes": volume_info,
    "claims": claim_info,
    "statefulsets": statefulset_info,
    "pods": pod_info,
    "namespaces": namespace_info,
}

#: API ``kind`` -> the store table its objects go to.
TABLE_OF_KIND: Final[dict[str, Table]] = {
    "Node": "nodes",
    "PartialObjectMetadata": "nodes",
    "PersistentVolume": "volumes",
    "PersistentVolumeClaim": "claims",
    "StatefulSet": "statefulsets",
    "Pod": "pods",
    "Namespace": "namespaces",
}
