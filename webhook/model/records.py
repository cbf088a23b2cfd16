"""The compact records the cluster view holds, and how raw API objects become them. Pure.

Each record keeps only what a rule reads (a node's labels and readiness, a volume's node
affinity, a claim's volume, a pod's node, its own topology labels, its claims and whether it is
going away), so a cluster of thousands of nodes and 100k pods stays small in memory. The
``*_info`` functions turn a raw API object (full or metadata-only) into a record and raise
:class:`~webhook.errors.BadObject` for shapes they cannot read; ``EXTRACTORS`` maps each
table to its function for the watches and the file loader (:mod:`webhook.model.tables`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import field

from webhook.errors import BadObject
from webhook.model import kruise, objects
from webhook.model.annotations import (
    SKIP,
    ZONE,
    Declared,
    misspelt_keys,
    read_annotations,
    stszone_annotations,
)
from webhook.model.namespaces import NamespaceInfo
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo
from webhook.model.owners import ordinal_of, pod_owned, workload_owner
from webhook.model.pinning import (
    UNPINNED,
    Pinning,
    is_topology_label,
    shared_topology,
    topology_label,
    volume_pinning,
)
from webhook.model.podspec import Going, checked_terms, going, mounted
from webhook.model.setkinds import KINDS

#: Node label naming the node itself; local PersistentVolumes are pinned to a node with it.
HOSTNAME: Final = "kubernetes.io/hostname"

#: Taints the node lifecycle controller puts on a node whose kubelet stopped reporting
#: (unreachable) or reports it NotReady; the Ready condition says the same a moment earlier.
NOT_READY_TAINTS: Final = frozenset(
    {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
)


Key = str | tuple[str, str]

_intern = sys.intern


# The records are msgspec Structs with ``gc=False``: immutable values holding strings, numbers,
# and tuples, frozensets and dicts of those, so none can be part of a reference cycle, and the
# cycle collector need not track them. Tracked, the 300k records of a 100k-pod cluster made
# every full collection while the lists load a stop of the event loop of about 250 ms, and
# every full collection after it as long.


class NodeInfo(msgspec.Struct, frozen=True, gc=False):
    """A node: its labels, the condition types currently True (when known), and readiness."""

    name: str
    labels: Mapping[str, str]
    true_conditions: frozenset[str] = frozenset()
    #: False when the node says it is not Ready: its Ready condition is False or Unknown, or
    #: it carries the not-ready or unreachable taint. A node that reports no conditions (a
    #: metadata-only object) counts as Ready: a pod there holds its zone either way, and only
    #: a warning turns on it.
    ready: bool = True

    @property
    def key(self) -> str:
        return self.name


class VolumeInfo(msgspec.Struct, frozen=True, gc=False):
    """A PersistentVolume: the nodes it can attach to (:mod:`webhook.model.pinning`), its
    claim, and whether deleting its claim deletes its data."""

    name: str
    #: Its node affinity and topology labels, parsed (one tuple shared by equal ones).
    pinning: Pinning = UNPINNED
    claim: tuple[str, str] | None = None
    #: ``spec.claimRef.uid``: "" when pre-bound by name (the claim may not exist yet).
    claim_uid: str = ""
    #: ``spec.persistentVolumeReclaimPolicy`` is Delete: the data goes when its claim does.
    reclaim_delete: bool = False

    @property
    def key(self) -> str:
        return self.name


class ClaimInfo(msgspec.Struct, frozen=True, gc=False):
    """A PersistentVolumeClaim: the volume it is bound to."""

    namespace: str
    name: str
    volume: str = ""
    #: Tells a claim from an earlier one of the same name (a volume's claimRef names the uid).
    uid: str = ""
    #: ``stszone.io/zone``: the zone stszone gave it when it was created.
    zone: str = ""
    #: Deleted with the pod mounting it (being deleted, or a Pod owns it: ``whenScaled: Delete``
    #: gives a removed ordinal's claims to its pod): that pod's replacement gets a new claim.
    going: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


class StatefulSetInfo(msgspec.Struct, frozen=True, gc=False):
    """A StatefulSet: what placement, the guard and the audit read."""

    namespace: str
    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``annotations`` parsed once, as the view reads the set (not on every pod's request):
    #: the policy they declare (the defaults when malformed) and their problems. Derived in
    #: ``__post_init__`` from ``annotations`` whatever is passed, so they never disagree.
    declared: Declared = field(default_factory=Declared)
    problems: tuple[str, ...] = ()
    replicas: int = 1
    start: int = 0
    templates: tuple[str, ...] = ()
    #: The pod template's ``requiredDuringScheduling...`` nodeSelectorTerms, nodeSelector and
    #: ``spec.nodeName`` (which binds every pod to that node).
    node_terms: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    #: ``spec.persistentVolumeClaimRetentionPolicy.whenScaled`` is Delete: the controller
    #: deletes the claims of the ordinals a scale-down (or a move of ordinals.start) removes.
    deletes_claims: bool = False
    #: The owner group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: An Advanced StatefulSet's ``spec.reserveOrdinals`` as merged intervals (none when the
    #: controller cannot read them: :func:`webhook.model.kruise.parse_reserve`).
    reserved: tuple[tuple[int, int], ...] = ()
    #: False when ``spec.reserveOrdinals`` holds an entry the controller cannot read.
    reserve_ok: bool = True
    uid: str = ""
    skipped: bool = False  # labelled stszone.io/skip=true, like what the objectSelector skips
    #: Its pod template is labelled ``stszone.io/skip=true``: the objectSelector keeps each of
    #: its pods from stszone, which places none of them (they run wherever they were put).
    template_skipped: bool = False
    #: ``metadata.deletionTimestamp`` is set (a foreground deletion, a finalizer): its
    #: controller creates no pod for it any more, so a pod going away is not replaced.
    deleting: bool = False
    #: The names of its misspelt ``stszone.io/`` keys, which ``annotations`` leaves out: no
    #: path but its UPDATE reads them, and audit and explain name them.
    misspelt: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        declared, problems = read_annotations(self.annotations)
        msgspec.structs.force_setattr(self, "declared", declared)
        msgspec.structs.force_setattr(self, "problems", problems)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


class PodInfo(msgspec.Struct, frozen=True, gc=False):
    """A StatefulSet pod: ordinal, node, owning set, its own topology labels, the claims it
    mounts, and whether it is going away."""

    namespace: str
    name: str
    owner: str | None
    ordinal: int | None
    node: str = ""
    #: The pod's own topology labels, as (key, value) pairs: Kubernetes 1.33+ copies the node's
    #: ``topology.kubernetes.io/{zone,region}`` onto a pod when it is bound (PodTopologyLabels),
    #: so a pod stays located when its node later loses the label or leaves the view.
    topology: tuple[tuple[str, str], ...] = ()
    #: Why the pod is going away, or "": "Terminating" (``metadata.deletionTimestamp`` set),
    #: else its phase once it has ended ("Failed": evicted, OOM-killed; "Succeeded"). The
    #: StatefulSet controller replaces such a pod. Not the phase itself: a pod going from
    #: Pending to Running (a routine status update) changes no record.
    going: Going = ""
    #: The persistentVolumeClaim volumes that mount the claim the StatefulSet controller names
    #: for them, ``<volume>-<pod name>``, by volume name: one shared tuple for a set's pods.
    templates: tuple[str, ...] = ()
    #: The claims it mounts under any other name (a pod made by hand, a volume of the pod
    #: template naming a claim of its own), in full.
    other_claims: tuple[str, ...] = ()
    #: The owner's group: "" for an ``apps/v1`` StatefulSet, ``apps.kruise.io`` for an
    #: Advanced StatefulSet (owners match on group, kind, name and uid).
    group: str = ""
    owner_uid: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def set_key(self) -> tuple[str, str] | tuple[str, str, str] | None:
        """The key of its set's pods in the Store: (namespace, set) for ``apps/v1``, with the
        group appended for another kind, so two kinds' sets of one name never share pods."""
        if self.owner is None:
            return None
        return (
            (self.namespace, self.owner, self.group) if self.group else (self.namespace, self.owner)
        )

    @property
    def claims(self) -> tuple[str, ...]:
        """The names of the claims the pod mounts (``spec.volumes[].persistentVolumeClaim``)."""
        return tuple([f"{t}-{self.name}" for t in self.templates]) + self.other_claims

    def zone_label(self, topology_key: str) -> str | None:
        """The pod's own label for ``topology_key`` (or an equivalent zone key), if any."""
        return topology_label(self.topology, topology_key)


Info = (
    NodeInfo
    | VolumeInfo
    | ClaimInfo
    | StatefulSetInfo
    | PodInfo
    | NamespaceInfo
    | KafkaNodePoolInfo
    | PoolPodInfo
)


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


#: One shared frozenset per distinct set of True conditions: nodes report the same few.
_CONDITIONS: dict[frozenset[str], frozenset[str]] = {}


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    """Record of a Node or a metadata-only ``PartialObjectMetadata`` node."""
    meta = _meta(obj)
    labels = {_intern(k): _intern(v) for k, v in objects.str_map(meta, "labels").items()}
    status = objects.mapping(obj, "status")
    true: set[str] = set()
    ready = True
    for condition in objects.dicts(status, "conditions", path="status"):
        kind, value = condition.get("type"), condition.get("status")
        if value == "True" and isinstance(kind, str):
            true.add(kind)
        elif kind == "Ready":  # False, or Unknown: the kubelet stopped posting its status
            ready = False
    taints = objects.dicts(objects.mapping(obj, "spec"), "taints", path="spec")
    if any(t.get("key") in NOT_READY_TAINTS for t in taints):
        ready = False
    conditions = frozenset(true)
    shared = _CONDITIONS.get(conditions)
    if shared is None:
        if len(_CONDITIONS) >= 256:  # distinct sets are few; bound them all the same
            _CONDITIONS.clear()
        shared = _CONDITIONS[conditions] = frozenset(map(_intern, conditions))
    return NodeInfo(name=_name(meta), labels=labels, true_conditions=shared, ready=ready)


def volume_info(obj: Mapping[str, Any]) -> VolumeInfo:
    """Record of a PersistentVolume: where it can attach (``spec.nodeAffinity``, its zone
    labels), its claim, and its reclaim policy."""
    meta = _meta(obj)
    spec = objects.mapping(obj, "spec")
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
        pinning=volume_pinning(spec, labels=objects.str_map(meta, "labels")),
        claim=claim,
        claim_uid=objects.string(claim_ref, "uid") if claim else "",
        reclaim_delete=objects.string(spec, "persistentVolumeReclaimPolicy") == "Delete",
    )


def claim_info(obj: Mapping[str, Any]) -> ClaimInfo:
    """Record of a PersistentVolumeClaim."""
    meta = _meta(obj)
    return ClaimInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        # Interned: the volume's record holds the same name.
        volume=_intern(objects.string(objects.mapping(obj, "spec"), "volumeName")),
        uid=objects.string(meta, "uid"),
        zone=objects.string(
            objects.mapping(meta, "annotations", path="metadata"), ZONE, path="metadata.annotations"
        ),
        going=bool(meta.get("deletionTimestamp")) or pod_owned(meta),
    )


def statefulset_info(obj: Mapping[str, Any]) -> StatefulSetInfo:
    """Record of a StatefulSet."""
    meta = _meta(obj)
    spec = objects.mapping(obj, "spec")
    template = objects.mapping(spec, "template", path="spec")
    template_spec = objects.mapping(template, "spec", path="spec.template")
    template_meta = objects.mapping(template, "metadata", path="spec.template")
    template_labels = objects.str_map(template_meta, "labels", path="spec.template.metadata")
    terms = checked_terms(template_spec, path="spec.template.spec")
    templates = tuple(
        _name(objects.mapping(t, "metadata"))
        for t in objects.dicts(spec, "volumeClaimTemplates", path="spec")
    )
    retention = objects.mapping(spec, "persistentVolumeClaimRetentionPolicy")
    written = objects.str_map(meta, "annotations")
    return StatefulSetInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=_name(meta),
        annotations=stszone_annotations(written),
        misspelt=misspelt_keys(written),
        replicas=objects.int32(spec, "replicas", default=1, path="spec"),
        start=objects.int32(
            objects.mapping(spec, "ordinals", path="spec"), "start", default=0, path="spec.ordinals"
        ),
        templates=templates,
        node_terms=tuple(terms),
        node_selector=objects.str_map(template_spec, "nodeSelector"),
        node_name=objects.string(template_spec, "nodeName", path="spec.template.spec"),
        deletes_claims=objects.string(retention, "whenScaled") == "Delete",
        skipped=objects.str_map(meta, "labels", path="metadata").get(SKIP) == "true",
        template_skipped=template_labels.get(SKIP) == "true",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    """Record of a StatefulSet pod (of its labels, only the topology ones are kept)."""
    meta = _meta(obj)
    found = workload_owner(meta)
    group, owner = (found[0], found[1]) if found is not None else ("", None)
    owner_uid = found[2] if found is not None and KINDS[group].owner_uid else ""
    labels = objects.str_map(meta, "labels", path="metadata")
    topology = shared_topology(
        tuple(sorted((_intern(k), _intern(v)) for k, v in labels.items() if is_topology_label(k)))
    )
    name = _name(meta)
    spec = objects.mapping(obj, "spec")
    templates, others = mounted(name, spec)
    return PodInfo(
        namespace=_intern(objects.string(meta, "namespace")),
        name=name,
        owner=_intern(owner) if owner else None,
        ordinal=ordinal_of(meta, labels),
        node=_intern(objects.string(spec, "nodeName")),
        topology=topology,
        going=going(meta, objects.mapping(obj, "status")),
        templates=templates,
        other_claims=others,
        group=group,
        owner_uid=owner_uid,
    )


def kruise_set_info(obj: Mapping[str, Any]) -> StatefulSetInfo:
    """Record of an OpenKruise Advanced StatefulSet: a StatefulSet's, plus its reserved
    ordinals and uid (its pods' owner references name it)."""
    base = statefulset_info(obj)
    spec = objects.mapping(obj, "spec")
    reserved, readable = kruise.parse_reserve(spec.get("reserveOrdinals"))
    return msgspec.structs.replace(
        base,
        group=kruise.GROUP,
        reserved=reserved,
        reserve_ok=readable,
        uid=objects.string(_meta(obj), "uid"),
    )
