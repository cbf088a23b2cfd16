"""What a pod spec says of itself: the claims a StatefulSet pod mounts, whether it is going
away, and the node terms it requires. Pure; read by :mod:`webhook.model.records` and, for the
terms, :mod:`webhook.rules.affinity`.

The claims and the going-away reason are kept small on purpose, as a pod's record is one of
100,000: the claims a pod mounts under the names the StatefulSet controller gives them
(``<volume>-<pod name>``) are kept as the volume names, one tuple shared by every pod of a set;
going away is one of four strings, never the phase, so the routine status updates of a running
pod change no record.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final, Literal

from webhook.model import objects

#: Why a pod is going away ("" when it is not): its deletion has begun, or it has ended.
Going = Literal["", "Terminating", "Failed", "Succeeded"]

#: One shared tuple per distinct list of volume names (a set's pods all mount the same).
_TEMPLATES: dict[tuple[str, ...], tuple[str, ...]] = {}
_TEMPLATES_MAX: Final = 4096

_intern = sys.intern


#: Where a pod spec keeps the node terms every node it runs on must match.
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"


def required_terms(pod_spec: Mapping[str, Any], *, path: str = "spec") -> list[dict[str, Any]]:
    """The pod spec's required nodeSelectorTerms (``[]`` when none); ``path``: where the spec
    is, for the messages (a StatefulSet's template: ``spec.template.spec``)."""
    if pod_spec.get("affinity") is None:  # most pods, and every one stszone has not pinned yet
        return []
    affinity = objects.mapping(pod_spec, "affinity", path=path)
    node_affinity = objects.mapping(affinity, "nodeAffinity", path=f"{path}.affinity")
    required = objects.mapping(node_affinity, REQUIRED, path=f"{path}.affinity.nodeAffinity")
    return objects.dicts(
        required, "nodeSelectorTerms", path=f"{path}.affinity.nodeAffinity.{REQUIRED}"
    )


def checked_terms(pod_spec: Mapping[str, Any], *, path: str) -> list[dict[str, Any]]:
    """:func:`required_terms`, each term's expressions and fields checked to be lists of
    objects: the rebalance plan reads a StatefulSet template's terms node by node, long after
    the load."""
    terms = required_terms(pod_spec, path=path)
    where = f"{path}.affinity.nodeAffinity.{REQUIRED}"
    for index, term in enumerate(terms):
        for key in ("matchExpressions", "matchFields"):
            objects.dicts(term, key, path=f"{where}.nodeSelectorTerms[{index}]")
    return terms


def going(meta: Mapping[str, Any], status: Mapping[str, Any]) -> Going:
    """ "Terminating" when ``metadata.deletionTimestamp`` is set, "Failed" or "Succeeded" when
    the pod has ended (evicted, OOM-killed, or done), else "".

    The StatefulSet controller deletes an ended pod and re-creates its ordinal, and a
    Terminating one is re-created once it is gone: either way the pod that will hold the
    ordinal is its replacement, placed by stszone.
    """
    if meta.get("deletionTimestamp"):
        return "Terminating"
    phase = objects.string(status, "phase", path="status")
    if phase == "Failed":
        return "Failed"
    if phase == "Succeeded":
        return "Succeeded"
    return ""


def mounted(name: str, spec: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the volume names whose claim is ``<volume>-<name>``, every other claim name), in order.

    The StatefulSet controller mounts the claim of template ``T`` for pod ``<set>-<N>`` as
    volume ``T`` with claim ``T-<set>-<N>``: the first tuple is shared by every such pod.
    """
    templates: list[str] = []
    others: list[str] = []
    for volume in objects.dicts(spec, "volumes", path="spec"):
        source = objects.mapping(volume, "persistentVolumeClaim", path="spec.volumes[]")
        claim = objects.string(source, "claimName", path="spec.volumes[].persistentVolumeClaim")
        if not claim:
            continue
        volume_name = objects.string(volume, "name", path="spec.volumes[]")
        if claim == f"{volume_name}-{name}":
            templates.append(volume_name)
        else:
            others.append(_intern(claim))  # the claim's own record holds the same string
    found = tuple(templates)
    shared = _TEMPLATES.get(found)  # pragma: no mutate (a memo: a miss makes an equal tuple)
    if shared is None:
        if len(_TEMPLATES) >= _TEMPLATES_MAX:  # pragma: no mutate (a bound: distinct lists are few)
            _TEMPLATES.clear()
        shared = _TEMPLATES[found] = tuple(map(_intern, found))
    return shared, tuple(others)
