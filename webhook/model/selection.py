"""Node selection exactly as Kubernetes reads it: one evaluator for volumes, pods and the
extender. Pure.

It follows ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` and the label and field
selectors under it (``k8s.io/apimachinery``), quirks included:

- A ``NodeSelector``'s terms are ORed. A term with neither ``matchExpressions`` nor
  ``matchFields`` matches no node, and a selector with no other term matches none at all.
- Within a term everything is ANDed: the expressions on the node's labels, the fields on its
  name (``metadata.name``, the one field a node has: any other key reads as ``""``).
- A term Kubernetes cannot parse matches no node (``LazyErrorNodeSelector``: the error surfaces
  only when no other term matches). Parsing refuses an operator other than ``In``, ``NotIn``,
  ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``; a key that is not a qualified name; ``In`` or
  ``NotIn`` without values; ``Exists`` or ``DoesNotExist`` with values; ``Gt`` or ``Lt`` without
  exactly one base-10 64-bit integer; any value that is not a valid label value. A field
  requirement must be ``In`` or ``NotIn`` with exactly one value.
- ``NotIn`` and ``DoesNotExist`` match a node without the key; ``Gt`` and ``Lt`` need the label,
  holding an integer as Go's ``strconv.ParseInt`` reads one.
- Fields are compared only when the node has a name: a PersistentVolume's affinity is checked
  against a node's labels alone (``CheckNodeAffinity``), so its ``matchFields`` never constrain.
- A pod runs on a node when its ``nodeSelector`` (every pair a label of the node), its required
  node affinity and its ``spec.nodeName`` all admit it.

Parsed requirements and terms are tuples, shared between equal ones: the live view holds the
affinity of 100,000 volumes, which name a handful of distinct zones or nodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from webhook.model import objects
from webhook.model.names import is_qualified_name
from webhook.model.podspec import REQUIRED

#: The one field ``matchFields`` can name on a node.
NAME_FIELD: Final = "metadata.name"
OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

#: ``IsValidLabelValue``: empty, or at most 63 alphanumerics, ``-``, ``_``, ``.``, alphanumeric
#: at both ends.
_LABEL_VALUE = re.compile(r"(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
#: What ``strconv.ParseInt(s, 10, 64)`` accepts: a sign, then ASCII digits.
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64: Final = 2**63


def go_int(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it, or None when it refuses."""
    if _GO_INT.fullmatch(text) is None:
        return None
    number = int(text)
    return number if -_INT64 <= number < _INT64 else None


def _label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


class Requirement(NamedTuple):
    """One parsed ``NodeSelectorRequirement``: values sorted, without repeats."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` (or fields) meets it (``labels.Requirement.Matches``)."""
        have = labels.get(self.key)
        op = self.operator
        if op == "In":
            return have is not None and have in self.values
        if op == "NotIn":
            return have is None or have not in self.values
        if op == "Exists":
            return have is not None
        if op == "DoesNotExist":
            return have is None
        number = go_int(have) if have is not None else None
        if number is None:  # Gt, Lt: no label, or not an integer
            return False
        bound = int(self.values[0])  # checked when parsed
        return number > bound if op == "Gt" else number < bound

    def matches_field(self, name: str) -> bool:
        """Whether the node ``name`` meets it as a field requirement: a node's one field is
        its name, and any other reads as ``""`` (``fields.Set.Get``)."""
        have = name if self.key == NAME_FIELD else ""
        return (have == self.values[0]) == (self.operator == "In")

    def describe(self) -> str:
        """``key In [a, b]``, ``key Exists``."""
        shown = f" [{', '.join(self.values)}]" if self.values else ""
        return f"{self.key} {self.operator}{shown}"


class Term(NamedTuple):
    """One parsed ``NodeSelectorTerm``."""

    #: Its matchExpressions (None: it has none, so labels do not matter).
    expressions: tuple[Requirement, ...] | None
    #: Its matchFields (None: it has none).
    fields: tuple[Requirement, ...] | None
    #: Why Kubernetes cannot parse it ("" when it can): then it matches no node.
    invalid: str = ""

    @property
    def empty(self) -> bool:
        """Neither expressions nor fields: it matches no node."""
        return self.expressions is None and self.fields is None

    def matches(self, labels: Mapping[str, str], name: str = "") -> bool:
        """Whether it selects the node ``name`` with ``labels`` (no name: fields not compared)."""
        if self.invalid or self.empty:
            return False
        if self.expressions is not None and not all(r.matches(labels) for r in self.expressions):
            return False
        if self.fields is not None and name:
            return all(f.matches_field(name) for f in self.fields)
        return True

    def describe(self) -> str:
        """Its requirements ANDed, in words (``disk In [ssd] and metadata.name In [n1]``)."""
        if self.empty:
            return "an empty term (it matches no node)"
        if self.invalid:
            return f"a term Kubernetes cannot parse ({self.invalid}; it matches no node)"
        parts = [r.describe() for r in self.expressions or ()]
        parts += [f"matchFields {f.describe()}" for f in self.fields or ()]
        return " and ".join(parts)


def _values(expr: Mapping[str, Any]) -> list[str] | None:
    values = expr.get("values")
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return values


def _requirement(expr: Mapping[str, Any]) -> tuple[Requirement | None, str]:
    """(a matchExpression parsed, "") or (None, why Kubernetes refuses it)."""
    key, op, values = expr.get("key"), expr.get("operator"), _values(expr)
    key = key if isinstance(key, str) else ""
    shown = f"{key} {op}"
    if op not in OPERATORS:
        return None, f"{shown}: unknown operator"
    if values is None:
        return None, f"{shown}: values must be a list of strings"
    if not is_qualified_name(key):
        return None, f"{shown}: {key!r} is not a valid label key"
    if op in ("In", "NotIn") and not values:
        return None, f"{shown}: needs values"
    if op in ("Exists", "DoesNotExist") and values:
        return None, f"{shown}: takes no values"
    if op in ("Gt", "Lt") and (len(values) != 1 or go_int(values[0]) is None):
        return None, f"{shown} [{', '.join(values)}]: needs one integer"
    if not all(map(_label_value, values)):
        return None, f"{shown} [{', '.join(values)}]: not a valid label value"
    return Requirement(key, op, tuple(sorted(set(values)))), ""


def _field(expr: Mapping[str, Any]) -> tuple[Requirement | None, str]:
    """(a matchFields requirement parsed, "") or (None, why Kubernetes refuses it)."""
    key, op, values = expr.get("key"), expr.get("operator"), _values(expr)
    key = key if isinstance(key, str) else ""
    shown = f"matchFields {key} {op}"
    if op not in ("In", "NotIn"):
        return None, f"{shown}: only In and NotIn apply to fields"
    if values is None or len(values) != 1:
        return None, f"{shown}: needs exactly one value"
    return Requirement(key, op, (values[0],)), ""


def _parsed(items: list[dict[str, Any]], parse: Any) -> tuple[tuple[Requirement, ...] | None, str]:
    if not items:
        return None, ""
    found: list[Requirement] = []
    for item in items:
        requirement, why = parse(item)
        if requirement is None:
            return (), why
        found.append(requirement)
    return tuple(found), ""


def parse_term(term: Mapping[str, Any], *, path: str = "nodeSelectorTerms[]") -> Term:
    """A nodeSelectorTerm as Kubernetes parses it (see the module docstring)."""
    expressions, why = _parsed(objects.dicts(term, "matchExpressions", path=path), _requirement)
    fields, field_why = _parsed(objects.dicts(term, "matchFields", path=path), _field)
    return Term(expressions, fields, why or field_why)


def parse_terms(terms: Iterable[Mapping[str, Any]]) -> tuple[Term, ...]:
    """Each of ``terms`` parsed, in order (empty ones kept: messages name them)."""
    return tuple(map(parse_term, terms))


def any_term(terms: Iterable[Term], labels: Mapping[str, str], name: str = "") -> bool:
    """Whether the ORed ``terms`` select the node (none: no node)."""
    return any(t.matches(labels, name) for t in terms)


class PodSelection(NamedTuple):
    """What a pod's own spec says of the nodes it may run on."""

    #: ``spec.nodeSelector``, as sorted (key, value) pairs.
    selector: tuple[tuple[str, str], ...] = ()
    #: The required node affinity's terms (None: the pod has none, any node will do).
    required: tuple[Term, ...] | None = None
    #: ``spec.nodeName`` ("": not set).
    node_name: str = ""

    def admits(self, labels: Mapping[str, str], name: str) -> bool:
        """Whether the pod may run on the node ``name`` with ``labels``
        (``RequiredNodeAffinity.Match``, and ``spec.nodeName``)."""
        if self.node_name and name != self.node_name:
            return False
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        return self.required is None or any_term(self.required, labels, name)

    @property
    def constrained(self) -> bool:
        """Whether it says anything at all (most pods: nothing until stszone pins them)."""
        return bool(self.selector or self.required is not None or self.node_name)


def pod_selection(spec: Mapping[str, Any], *, path: str = "spec") -> PodSelection:
    """The node constraints of a pod spec (or a pod template's spec)."""
    selector = tuple(sorted(objects.str_map(spec, "nodeSelector", path=path).items()))
    required: tuple[Term, ...] | None = None
    affinity = objects.mapping(spec, "affinity", path=path)
    node_affinity = objects.mapping(affinity, "nodeAffinity", path=f"{path}.affinity")
    if node_affinity.get(REQUIRED) is not None:
        where = f"{path}.affinity.nodeAffinity.{REQUIRED}"
        raw = objects.mapping(node_affinity, REQUIRED, path=f"{path}.affinity.nodeAffinity")
        required = parse_terms(objects.dicts(raw, "nodeSelectorTerms", path=where))
    return PodSelection(selector, required, objects.string(spec, "nodeName", path=path))


def template_selection(
    terms: Iterable[Mapping[str, Any]], selector: Mapping[str, str], node_name: str = ""
) -> PodSelection:
    """The node constraints of a StatefulSet's pod template, from its record
    (``StatefulSetInfo.node_terms``, ``node_selector`` and ``node_name``): no terms reads as no
    affinity."""
    parsed = parse_terms(terms)
    return PodSelection(tuple(sorted(selector.items())), parsed or None, node_name)
