"""Node selection constraints of a pod spec: what they allow, and adding a requirement. Pure.

Kubernetes ORs the ``nodeSelectorTerms`` of a required nodeAffinity and ANDs the expressions
inside a term; ``nodeSelector`` is ANDed with all of it. So a requirement that must always
hold goes into *every* term, and a pod's own constraints exclude a value only when
``nodeSelector`` excludes it or *every* term does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.model import objects

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def requirement(key: str, value: str) -> dict[str, Any]:
    """``{key In [value]}``, the expression stszone adds."""
    return {"key": key, "operator": "In", "values": [value]}


def required_terms(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod's required nodeSelectorTerms (``[]`` when none)."""
    affinity = objects.mapping(pod_spec, "affinity", path="spec")
    node_affinity = objects.mapping(affinity, "nodeAffinity", path="spec.affinity")
    required = objects.mapping(node_affinity, REQUIRED, path="spec.affinity.nodeAffinity")
    return objects.dicts(
        required, "nodeSelectorTerms", path=f"spec.affinity.nodeAffinity.{REQUIRED}"
    )


def _expressions(term: Mapping[str, Any]) -> list[dict[str, Any]]:
    return objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]")


def expression_allows(expr: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether one matchExpression admits a node whose ``key`` label is ``value``."""
    if expr.get("key") != key:
        return True
    op = expr.get("operator")
    values = [v for v in (expr.get("values") or []) if isinstance(v, str)]
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return True
    if op == "DoesNotExist":
        return False
    if op in ("Gt", "Lt") and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def term_allows(term: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether every expression of one term admits ``key=value``."""
    return all(expression_allows(e, key, value) for e in _expressions(term))


def _describe(expr: Mapping[str, Any]) -> str:
    values = expr.get("values") or []
    shown = f" [{', '.join(map(str, values))}]" if values else ""
    return f"{expr.get('key')} {expr.get('operator')}{shown}"


def exclusion(
    pod_spec: Mapping[str, Any],
    key: str,
    value: str,
    *,
    terms: Sequence[Mapping[str, Any]] | None = None,
) -> str | None:
    """Describe the pod's own constraint that rules out ``key=value``, or None if it is allowed."""
    selector = objects.str_map(pod_spec, "nodeSelector", path="spec")
    if key in selector and selector[key] != value:
        return f"nodeSelector {key}={selector[key]}"
    terms = required_terms(pod_spec) if terms is None else terms
    if terms and not any(term_allows(t, key, value) for t in terms):
        blocking = [
            _describe(e)
            for t in terms
            for e in _expressions(t)
            if not expression_allows(e, key, value)
        ]
        return "required nodeAffinity " + " / ".join(dict.fromkeys(blocking))
    return None


def constrains(terms: Sequence[Mapping[str, Any]], selector: Mapping[str, str], key: str) -> bool:
    """Whether a nodeSelector or any required term says anything about label ``key``."""
    return key in selector or any(e.get("key") == key for t in terms for e in _expressions(t))


def allowed_values(
    terms: Sequence[Mapping[str, Any]], selector: Mapping[str, str], key: str, values: Iterable[str]
) -> list[str]:
    """The ``values`` that a template's own terms and nodeSelector still allow for ``key``."""
    spec = {"nodeSelector": dict(selector)}
    return [v for v in values if exclusion(spec, key, v, terms=terms) is None]


def with_requirement(pod_spec: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """A copy of ``pod_spec`` whose required nodeAffinity has ``key In [value]`` in every term.

    Copy on write: only the affinity branch is new; everything else is shared with the input.
    A term that already holds exactly this requirement is left as it is (reinvocation).
    """
    wanted = requirement(key, value)
    terms = required_terms(pod_spec)
    new_terms = (
        [_with_expression(t, wanted) for t in terms] if terms else [{"matchExpressions": [wanted]}]
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
    expressions = _expressions(term)
    if wanted in expressions:
        return term
    return {**term, "matchExpressions": [*expressions, wanted]}


def pins(pod_spec: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether the pod can only ever land on nodes with ``key=value`` (what validation checks)."""
    if objects.str_map(pod_spec, "nodeSelector", path="spec").get(key) == value:
        return True
    terms = required_terms(pod_spec)
    return bool(terms) and all(_term_pins(t, key, value) for t in terms)


def _term_pins(term: Mapping[str, Any], key: str, value: str) -> bool:
    for expr in _expressions(term):
        if expr.get("key") == key and expr.get("operator") == "In":
            values = expr.get("values") or []
            if values and all(v == value for v in values):
                return True
    return False
