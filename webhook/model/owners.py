"""How a pod names its workload and its member: the controlling owner and the ordinal. Pure.

An ordinal workload's pods carry its name twice: in the controller owner reference (group,
kind, name and uid: an apps/v1 StatefulSet and an OpenKruise Advanced StatefulSet of the same
name are told apart by the group) and in their own name, ``<set>-<ordinal>`` (or the
``apps.kubernetes.io/pod-index`` label, set by the StatefulSet controller since 1.28).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from webhook.model import objects, setkinds
from webhook.model.annotations import POD_INDEX_LABEL

#: Ordinals are int32 in Kubernetes: ten digits at most. A longer run of digits is no ordinal
#: (and past 4,300 digits, more than ``int()`` converts).
_ORDINAL_DIGITS: Final = 10
_SUFFIX = re.compile(rf"-([0-9]{{1,{_ORDINAL_DIGITS}}})$")


def workload_owner(meta: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(group, name, uid) of the ordinal workload controlling this object: a StatefulSet of
    group ``apps`` (group "") or ``apps.kruise.io``; None for any other controller."""
    for ref in objects.dicts(meta, "ownerReferences", path="metadata"):
        if ref.get("controller") is not True or ref.get("kind") != setkinds.KIND:
            continue
        api_version, name, uid = ref.get("apiVersion"), ref.get("name"), ref.get("uid")
        if not isinstance(api_version, str) or not isinstance(name, str) or not name:
            return None
        group = setkinds.group_of(api_version)
        return None if group is None else (group, name, uid if isinstance(uid, str) else "")
    return None


def pod_owned(meta: Mapping[str, Any]) -> bool:
    """Whether a Pod is among the object's owners: the garbage collector deletes it with them."""
    refs = objects.dicts(meta, "ownerReferences", path="metadata")
    return any(r.get("kind") == "Pod" and r.get("apiVersion") == "v1" for r in refs)


def owned_by(owner: tuple[str, str, str] | None, *, group: str, name: str, uid: str = "") -> bool:
    """Whether ``owner`` (:func:`workload_owner`'s answer) is the set ``name`` of ``group``: the
    group tells an ``apps/v1`` set from an Advanced StatefulSet of the same name, and the uid,
    when both sides know it, a set from an earlier one deleted and re-created under that name."""
    if owner is None or owner[0] != group or owner[1] != name:
        return False
    return not (uid and owner[2] and owner[2] != uid)


def ordinal_of(meta: Mapping[str, Any], labels: Mapping[str, str]) -> int | None:
    """Ordinal from the ``apps.kubernetes.io/pod-index`` label (``labels``: the metadata's),
    else the name's ``-N`` suffix."""
    index = labels.get(POD_INDEX_LABEL, "")
    if index.isascii() and index.isdigit() and len(index) <= _ORDINAL_DIGITS:
        return int(index)
    match = _SUFFIX.search(objects.string(meta, "name"))
    return int(match.group(1)) if match else None
