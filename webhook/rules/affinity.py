"""Node selection constraints of a pod spec: what they allow, and adding a requirement. Pure.

Kubernetes ORs the ``nodeSelectorTerms`` of a required nodeAffinity and ANDs the requirements
inside a term (its ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name``); an
empty term matches no node, and so does a term Kubernetes cannot parse; ``nodeSelector`` is
ANDed with all of it. So a requirement that must always hold goes into *every* non-empty term.
Terms are read by :mod:`webhook.model.selection`; whether the constraints leave a pod a zone is
:mod:`webhook.rules.fit`'s question (:func:`exclusion` and :func:`allowed_values` ask it by the
zone's name alone, as the reading of a pod whose zone has no node in the view).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.model import objects
from webhook.model.podspec import REQUIRED, required_terms
from webhook.model.selection import NAME_FIELD, PodSelection, parse_term, parse_terms
from webhook.rules import fit
from webhook.rules.fit import Nodes

__all__ = [
    "NODE_NAME_FIELD",
    "Nodes",
    "allowed_values",
    "constrains",
    "exclusion",
    "is_empty",
    "pins",
    "requirement",
    "term_matches",
    "with_requirement",
]

#: ``matchFields`` supports one field: the node's name.
NODE_NAME_FIELD = NAME_FIELD


def requirement(key: str, value: str) -> dict[str, Any]:
    """``{key In [value]}``, the expression stszone adds."""
    return {"key": key, "operator": "In", "values": [value]}


def is_empty(term: Mapping[str, Any]) -> bool:
    """An empty nodeSelectorTerm matches no node (Kubernetes: "A null or empty node selector
    term matches no objects"), so it never admits a zone and is never turned into one."""
    return parse_term(term).empty


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """Whether one nodeSelectorTerm selects the node ``name`` with ``labels``."""
    return parse_term(term).matches(labels, name)


def _selection(terms: Sequence[Mapping[str, Any]], selector: Mapping[str, str]) -> PodSelection:
    # No terms reads as no required affinity, as a template's record holds it.
    return PodSelection(tuple(sorted(selector.items())), parse_terms(terms) or None)


def exclusion(
    pod_spec: Mapping[str, Any],
    key: str,
    value: str,
    *,
    terms: Sequence[Mapping[str, Any]],
    nodes: Nodes | None = None,
) -> str | None:
    """Describe the pod's own constraint that rules out ``key=value`` by its name alone
    (:func:`webhook.rules.fit.by_name`), or None if it is allowed.

    ``terms``: the spec's required node terms (:func:`required_terms`). nodeSelector is ANDed
    with everything; the required terms are ORed, so ``value`` is ruled out when no term can
    select a node with it (an empty term, or one Kubernetes cannot parse, selects none).
    """
    selector = objects.str_map(pod_spec, "nodeSelector", path="spec")
    return fit.by_name(_selection(terms, selector), key, value, nodes=nodes)


def constrains(terms: Sequence[Mapping[str, Any]], selector: Mapping[str, str], key: str) -> bool:
    """Whether a nodeSelector or any required term says anything about label ``key``."""
    return key in selector or any(
        e.get("key") == key
        for t in terms
        for e in objects.dicts(t, "matchExpressions", path="nodeSelectorTerms[]")
    )


def allowed_values(
    terms: Sequence[Mapping[str, Any]],
    selector: Mapping[str, str],
    key: str,
    values: Iterable[str],
    *,
    nodes: Nodes | None = None,
) -> list[str]:
    """The ``values`` that a template's own terms and nodeSelector still allow for ``key``, by
    their names alone."""
    selection = _selection(terms, selector)
    return [v for v in values if fit.by_name(selection, key, v, nodes=nodes) is None]


def with_requirement(
    pod_spec: dict[str, Any],
    key: str,
    value: str,
    *,
    terms: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """A copy of ``pod_spec`` whose required nodeAffinity has ``key In [value]`` in every term.

    ``terms``: the spec's required node terms (:func:`required_terms`). Copy on write: only
    the affinity branch is new; everything else is shared with the input. A term that already
    holds exactly this requirement is left as it is (reinvocation), and so is an empty term: it
    matches no node, and adding the zone would make it match the zone.
    """
    wanted = requirement(key, value)
    new_terms = (
        [t if is_empty(t) else _with_expression(t, wanted) for t in terms]
        if terms
        else [{"matchExpressions": [wanted]}]
    )
    spec = dict(pod_spec)
    affinity = dict(objects.mapping(pod_spec, "affinity"))
    node_affinity = dict(objects.mapping(affinity, "nodeAffinity"))
    required = dict(objects.mapping(node_affinity, REQUIRED))
    required["nodeSelectorTerms"] = new_terms
    node_affinity[REQUIRED] = required
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity
    return spec


def _with_expression(term: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    expressions = objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]")
    if wanted in expressions:
        return term
    return {**term, "matchExpressions": [*expressions, wanted]}


def pins(pod_spec: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether the pod can only ever land on nodes with ``key=value`` (what validation checks).

    Terms that match no node (empty, or not parsable by Kubernetes) need not pin; every other
    one must hold ``key In [value]``.
    """
    if objects.str_map(pod_spec, "nodeSelector", path="spec").get(key) == value:
        return True
    pinned = False
    for term in parse_terms(required_terms(pod_spec)):
        if term.empty or term.invalid:
            continue  # it selects no node
        if not any(
            r.key == key and r.operator == "In" and r.values == (value,)
            for r in term.expressions or ()
        ):
            return False
        pinned = True
    return pinned
