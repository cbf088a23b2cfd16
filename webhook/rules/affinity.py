"""Node selection constraints of a pod spec: what they allow, and adding a requirement. Pure.

Kubernetes ORs the ``nodeSelectorTerms`` of a required nodeAffinity and ANDs the requirements
inside a term (its ``matchExpressions`` on labels and ``matchFields`` on ``metadata.name``); an
empty term matches no node; ``nodeSelector`` is ANDed with all of it. So a requirement that must
always hold goes into *every* non-empty term, and a pod's own constraints exclude a value only
when ``nodeSelector`` excludes it or *every* term does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from webhook.model import objects
from webhook.model.podspec import REQUIRED, required_terms


def requirement(key: str, value: str) -> dict[str, Any]:
    """``{key In [value]}``, the expression stszone adds."""
    return {"key": key, "operator": "In", "values": [value]}


#: The labels of a node by name, or None when the view does not hold it.
Nodes = Callable[[str], Mapping[str, str] | None]
#: ``matchFields`` supports one field: the node's name.
NODE_NAME_FIELD = "metadata.name"


def _expressions(term: Mapping[str, Any]) -> list[dict[str, Any]]:
    return objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]")


def _fields(term: Mapping[str, Any]) -> list[dict[str, Any]]:
    return objects.dicts(term, "matchFields", path="nodeSelectorTerms[]")


def is_empty(term: Mapping[str, Any]) -> bool:
    """An empty nodeSelectorTerm matches no node (Kubernetes: "A null or empty node selector
    term matches no objects"), so it never admits a zone and is never turned into one."""
    return not _expressions(term) and not _fields(term)


def _values(expr: Mapping[str, Any]) -> list[str]:
    return [v for v in (expr.get("values") or []) if isinstance(v, str)]


def requirement_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies one NodeSelectorRequirement."""
    key, op, values = expr.get("key"), expr.get("operator"), _values(expr)
    have = labels.get(key) if isinstance(key, str) else None
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and len(values) == 1:
        try:
            number, bound = int(have), int(values[0])
        except ValueError:
            return False
        return number > bound if op == "Gt" else number < bound
    return False


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """Whether one nodeSelectorTerm selects the node ``name`` with ``labels``."""
    if is_empty(term):
        return False
    node = {NODE_NAME_FIELD: name}
    return all(requirement_matches(e, labels) for e in _expressions(term)) and all(
        requirement_matches(f, node) for f in _fields(term)
    )


def expression_allows(expr: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether one matchExpression can admit a node whose ``key`` label is ``value``.

    Expressions on other keys can always be met by some node, as far as zones go.
    """
    if expr.get("key") != key:
        return True
    return requirement_matches(expr, {key: value})


def named_nodes(term: Mapping[str, Any]) -> frozenset[str] | None:
    """The only nodes a term's ``matchFields metadata.name In`` lets it select (None: any)."""
    names: frozenset[str] | None = None
    for field in _fields(term):
        if field.get("key") == NODE_NAME_FIELD and field.get("operator") == "In":
            these = frozenset(_values(field))
            names = these if names is None else names & these
    return names


def _known(names: frozenset[str] | None, nodes: Nodes | None) -> dict[str, Mapping[str, str]]:
    """Labels of ``names`` when the view holds every one of them, else ``{}``."""
    if names is None or nodes is None:
        return {}
    found = {n: labels for n in names if (labels := nodes(n)) is not None}
    return found if len(found) == len(names) else {}


def term_allows(
    term: Mapping[str, Any],
    key: str,
    value: str,
    *,
    nodes: Nodes | None = None,
    selector: Mapping[str, str] | None = None,
) -> bool:
    """Whether one term can select some node whose ``key`` label is ``value``.

    A term naming its nodes (``matchFields metadata.name In``) is judged on those nodes when
    the view holds them all (with the pod's ``nodeSelector``, ANDed with it); otherwise only
    its expressions on ``key`` can rule ``value`` out.
    """
    if is_empty(term):
        return False
    names = named_nodes(term)
    known = _known(names, nodes)
    if known:
        wanted = selector or {}
        return any(
            labels.get(key) == value
            and all(labels.get(k) == v for k, v in wanted.items())
            and term_matches(term, labels, n)
            for n, labels in sorted(known.items())
        )
    if names is not None and not names:
        return False  # metadata.name In [] and In [x] ANDed with In [y]: no node at all
    return all(expression_allows(e, key, value) for e in _expressions(term))


def _describe(expr: Mapping[str, Any]) -> str:
    values = expr.get("values") or []
    shown = f" [{', '.join(map(str, values))}]" if values else ""
    return f"{expr.get('key')} {expr.get('operator')}{shown}"


def _blocking(term: Mapping[str, Any], key: str, value: str, *, nodes: Nodes | None) -> list[str]:
    """What in one term rules out ``key=value`` (the term is known not to allow it)."""
    if is_empty(term):
        return ["an empty term (it matches no node)"]
    known = _known(named_nodes(term), nodes)
    if known:
        where = sorted({labels.get(key, f"no {key}") for labels in known.values()})
        return [
            f"matchFields {NODE_NAME_FIELD} In [{', '.join(sorted(known))}] "
            f"(node(s) in {', '.join(where)})"
        ]
    blocking = [_describe(e) for e in _expressions(term) if not expression_allows(e, key, value)]
    return blocking or [f"matchFields {NODE_NAME_FIELD} In [] (no node)"]


def exclusion(
    pod_spec: Mapping[str, Any],
    key: str,
    value: str,
    *,
    terms: Sequence[Mapping[str, Any]],
    nodes: Nodes | None = None,
) -> str | None:
    """Describe the pod's own constraint that rules out ``key=value``, or None if it is allowed.

    ``terms``: the spec's required node terms (:func:`required_terms`).

    nodeSelector is ANDed with everything; the required terms are ORed, so ``value`` is ruled
    out when no term can select a node with it (an empty term selects none).
    """
    selector = objects.str_map(pod_spec, "nodeSelector", path="spec")
    if key in selector and selector[key] != value:
        return f"nodeSelector {key}={selector[key]}"
    if terms and not any(term_allows(t, key, value, nodes=nodes, selector=selector) for t in terms):
        blocking = [b for t in terms for b in _blocking(t, key, value, nodes=nodes)]
        return "required nodeAffinity " + " / ".join(dict.fromkeys(blocking))
    return None


def constrains(terms: Sequence[Mapping[str, Any]], selector: Mapping[str, str], key: str) -> bool:
    """Whether a nodeSelector or any required term says anything about label ``key``."""
    return key in selector or any(e.get("key") == key for t in terms for e in _expressions(t))


def allowed_values(
    terms: Sequence[Mapping[str, Any]],
    selector: Mapping[str, str],
    key: str,
    values: Iterable[str],
    *,
    nodes: Nodes | None = None,
) -> list[str]:
    """The ``values`` that a template's own terms and nodeSelector still allow for ``key``."""
    spec = {"nodeSelector": dict(selector)}
    return [v for v in values if exclusion(spec, key, v, terms=terms, nodes=nodes) is None]


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
    expressions = _expressions(term)
    if wanted in expressions:
        return term
    return {**term, "matchExpressions": [*expressions, wanted]}


def pins(pod_spec: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether the pod can only ever land on nodes with ``key=value`` (what validation checks).

    Empty terms select no node, so only the others need to pin.
    """
    if objects.str_map(pod_spec, "nodeSelector", path="spec").get(key) == value:
        return True
    pinned = False
    for term in required_terms(pod_spec):
        expressions = _expressions(term)
        if not expressions and not _fields(term):
            continue  # empty: it selects no node
        if not _term_pins(expressions, key, value):
            return False
        pinned = True
    return pinned


def _term_pins(expressions: list[dict[str, Any]], key: str, value: str) -> bool:
    for expr in expressions:
        if expr.get("key") == key and expr.get("operator") == "In":
            values = expr.get("values") or []
            if values and all(v == value for v in values):
                return True
    return False
