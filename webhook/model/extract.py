"""How raw API objects become the view's records (:mod:`webhook.model.records`). Pure.

Each ``*_info`` function turns a raw API object, full or metadata-only, into its record and
raises :class:`~webhook.errors.BadObject` for shapes it cannot read. Strings the records share
with one another (names, label keys and values, a volume's claim and a claim's volume) are
interned, so a cluster of thousands of nodes and 100k pods holds each once. The watches and
the file loader reach these functions through :mod:`webhook.model.tables`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from webhook.errors import BadObject
from webhook.model import kruise, objects
from webhook.model.annotations import SKIP, ZONE, misspelt_keys, stszone_annotations
from webhook.model.owners import ordinal_of, pod_owned, workload_owner
from webhook.model.pinning import is_topology_label, shared_topology, volume_pinning
from webhook.model.podspec import checked_terms, going, mounted
from webhook.model.records import ClaimInfo, NodeInfo, PodInfo, StatefulSetInfo, VolumeInfo
from webhook.model.setkinds import KINDS

#: Taints the node lifecycle controller puts on a node whose kubelet stopped reporting
#: (unreachable) or reports it NotReady; the Ready condition says the same a moment earlier.
NOT_READY_TAINTS: Final = frozenset(
    {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
)


_intern = sys.intern


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
