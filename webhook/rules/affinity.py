"""Node selection constraints of a pod spec: what they allow by a zone's name. Pure.

Kubernetes ORs the ``nodeSelectorTerms`` of a required nodeAffinity and ANDs the requirements
inside a term (its ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name``); an
empty term matches no node, and so does a term Kubernetes cannot parse; ``nodeSelector`` is
ANDed with all of it. So a requirement that must always hold is in *every* non-empty term
(:class:`webhook.rules.decision.NodeRequirement`, which the wire adds to each).
Terms are read by :mod:`webhook.model.selection`; whether the constraints leave a pod a zone is
:mod:`webhook.rules.fit`'s question (:func:`exclusion` asks it by the zone's name alone, as the
reading of a pod whose zone has no node in the view).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.model import objects
from webhook.model.podspec import required_terms
from webhook.model.selection import PodSelection, parse_terms
from webhook.rules import fit
from webhook.rules.fit import Nodes

__all__ = ["Nodes", "constrains", "exclusion", "pins"]


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
