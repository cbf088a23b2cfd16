"""A decision's edits made to a copy of the object the API server sent. Pure.

Copy on write: every dict or list an edit changes is a fresh copy, everything it leaves alone
is the very object of the original (so :func:`webhook.wire.patch.diff` need only compare the
branches that were copied). An edit the object already carries returns it as it is: that is
what makes a second invocation of the mutating webhook answer an empty patch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.model import objects
from webhook.model.annotations import ZONE, ZONES
from webhook.model.objects import JSON
from webhook.model.podspec import REQUIRED, required_terms
from webhook.rules.decision import (
    Edit,
    MetadataAnnotation,
    NodeRequirement,
    SchedulerName,
    ZoneAnnotation,
    ZonesAnnotation,
)


def apply(obj: JSON, edits: Iterable[Edit]) -> JSON:
    """``obj`` with ``edits`` made, as a copy sharing what they do not touch.

    Raises :class:`~webhook.errors.BadObject` when a field on an edit's path has the wrong
    shape (the rules read those fields first, so a request that gets here has them right).
    """
    for change in edits:
        if isinstance(change, ZoneAnnotation):
            obj = _annotated(obj, ZONE, change.zone)
        elif isinstance(change, ZonesAnnotation):
            obj = _annotated(obj, ZONES, ",".join(change.zones))
        elif isinstance(change, NodeRequirement):
            obj = _required(obj, change.key, change.value)
        elif isinstance(change, MetadataAnnotation):
            obj = _annotated(obj, change.key, change.value)
        elif isinstance(change, SchedulerName):
            obj = _with_spec(obj, "schedulerName", change.name)
        else:
            obj = _with_spec(obj, "storageClassName", change.name)
    return obj


def _annotated(obj: JSON, key: str, value: str) -> JSON:
    meta = objects.mapping(obj, "metadata")
    annotations = objects.str_map(meta, "annotations", path="metadata")
    if annotations.get(key) == value:
        return obj
    return {**obj, "metadata": {**meta, "annotations": {**annotations, key: value}}}


def _with_spec(obj: JSON, field: str, value: str) -> JSON:
    spec = objects.mapping(obj, "spec")
    if spec.get(field) == value:
        return obj
    return {**obj, "spec": {**spec, field: value}}


def _is_empty(term: JSON) -> bool:
    # "A null or empty node selector term matches no objects": adding a requirement to one
    # would make it match, so it is left as it is.
    return not term.get("matchExpressions") and not term.get("matchFields")


def _required(obj: JSON, key: str, value: str) -> JSON:
    """``key In [value]`` in every non-empty term of the required node affinity (the terms are
    ORed, so a requirement that must always hold goes into each); a term of its own when there
    is none."""
    spec = objects.mapping(obj, "spec")
    terms = required_terms(spec)
    wanted: dict[str, Any] = {"key": key, "operator": "In", "values": [value]}
    if not terms:
        new_terms = [{"matchExpressions": [wanted]}]
    else:
        new_terms = [t if _is_empty(t) else _with_expression(t, wanted) for t in terms]
        if all(new is old for new, old in zip(new_terms, terms, strict=True)):
            return obj
    affinity = objects.mapping(spec, "affinity", path="spec")
    node_affinity = objects.mapping(affinity, "nodeAffinity", path="spec.affinity")
    required = objects.mapping(node_affinity, REQUIRED, path="spec.affinity.nodeAffinity")
    required = {**required, "nodeSelectorTerms": new_terms}
    node_affinity = {**node_affinity, REQUIRED: required}
    return {**obj, "spec": {**spec, "affinity": {**affinity, "nodeAffinity": node_affinity}}}


def _with_expression(term: JSON, wanted: JSON) -> JSON:
    expressions = objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]")
    if wanted in expressions:
        return term
    return {**term, "matchExpressions": [*expressions, wanted]}
