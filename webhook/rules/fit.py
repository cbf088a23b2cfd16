"""Whether a pod's own node constraints let it run in one zone, judged on the view's nodes. Pure.

A *zone* here is the nodes whose ``key`` label is ``value``: a zone on the set's topology key,
or, in node-ordinal mode, the nodes labelled with one ordinal. The pod's own constraints
(:class:`~webhook.model.selection.PodSelection`: its nodeSelector, required node affinity and
``spec.nodeName``, read as kube-scheduler reads them) rule the zone out

- **by its nodes**, when the view holds nodes of the zone, the constraints admit none of them,
  and they admit some node elsewhere: the pod would have run there, and pinned to the zone it
  would stay Pending for good. The answer names the constraint that excludes the zone's nodes
  and where the pod would have run;
- **by its name alone**, when the view holds no node of the zone (a node pool at zero, a view
  without nodes) or the constraints admit no node of the view at all (the nodes they wait for
  are still to come): only what they say of ``key`` itself is read -- a nodeSelector on
  ``key``, or no term that could select a node with ``key=value`` -- and every other
  requirement is taken to be met by the nodes to come. A term naming its nodes
  (``matchFields metadata.name In``) that the view all holds is judged on those nodes, and a
  ``spec.nodeName`` the view holds on that node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from webhook.errors import BadObject
from webhook.model.pinning import Labelled
from webhook.model.podspec import REQUIRED
from webhook.model.selection import NAME_FIELD, PodSelection, Requirement, Term, any_term

#: The API server's refusal of a required node affinity with no term, in its words.
NO_TERM: Final = (
    f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms: Required value: must have at "
    f"least one node selector term (the API server refuses it too: give {REQUIRED} a term, "
    "or remove it)"
)
#: How many nodes :attr:`Fit.elsewhere` keeps per zone.
NAMED: Final = 3

#: The labels of a node by name, or None when the view does not hold it.
Nodes = Callable[[str], Mapping[str, str] | None]


class View(Protocol):
    """What judging on nodes needs of the view (:class:`~webhook.model.store.Store`)."""

    @property
    def nodes(self) -> Mapping[str, Labelled]: ...

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Fit:
    """How a pod's own constraints meet the zone ``key=value``."""

    key: str
    value: str
    #: True when judged on the view's nodes of the zone; False when by its name alone (the
    #: module docstring says when).
    by_nodes: bool
    #: The constraint that rules the zone out, in words ("" when none does): "nodeSelector
    #: kubernetes.io/hostname=n4", "required nodeAffinity disk In [nvme] / an empty term ...".
    conflict: str = ""
    #: Where it would have run (by its nodes only): ``key`` value -> the first few nodes there
    #: its constraints admit, sorted ("" for nodes without the label).
    elsewhere: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        """Whether the pod's own constraints leave it the zone."""
        return not self.conflict

    def where(self, *, zones: bool = True) -> str:
        """:attr:`elsewhere` in words: "node n4 in zone-b; nodes n5, n6 in zone-c"; with
        ``zones`` False (``key`` names no zone: a node label), "node n4 with example.io/node=1"."""
        parts = []
        for value, nodes in self.elsewhere.items():
            noun = "node" if len(nodes) == 1 else "nodes"
            place = f"in {value}" if zones else f"with {self.key}={value}"
            place = place if value else f"without {self.key}"
            parts.append(f"{noun} {', '.join(nodes)} {place}")
        return "; ".join(parts)


def fit(selection: PodSelection, *, key: str, value: str, view: View, zones: bool = True) -> Fit:
    """How the constraints of ``selection`` meet the zone ``key=value`` of ``view``; with
    ``zones`` False ``key`` names no zone (a node label): a node is said to carry its value,
    not to be in it.

    :class:`BadObject` for a pod whose required node affinity has no term: the API server
    refuses it (``ValidateNodeSelector``) after the mutating webhooks, in the words here, so
    the user fixes the affinity: a pod with no term is malformed, not one that rules a zone
    out."""
    if selection.required == ():
        raise BadObject(NO_TERM)
    if not selection.constrained:  # nothing of its own rules any zone out: no lookup
        return Fit(key, value, by_nodes=False)
    zone = view.nodes_with_label(key, value)
    if zone:
        nodes = view.nodes
        if any(selection.admits(nodes[n].labels, n) for n in _narrowed(selection, zone, view)):
            return Fit(key, value, by_nodes=True)
        elsewhere = _elsewhere(selection, key=key, view=view)
        if elsewhere:
            why = _culprit(selection, zone, view=view, key=key, zones=zones)
            return Fit(key, value, by_nodes=True, conflict=why, elsewhere=elsewhere)
    conflict = by_name(selection, key, value, nodes=labels_of(view), zones=zones) or ""
    return Fit(key, value, by_nodes=False, conflict=conflict)


def allowed(selection: PodSelection, key: str, values: Iterable[str], *, view: View) -> list[str]:
    """The ``values`` of ``key`` whose zones :func:`fit` leaves to ``selection``, in order."""
    return [v for v in values if fit(selection, key=key, value=v, view=view).allowed]


def labels_of(view: View) -> Nodes:
    """The view's node labels by name (None for a node it does not hold)."""
    nodes = view.nodes

    def labels(name: str) -> Mapping[str, str] | None:
        node = nodes.get(name)
        return node.labels if node is not None else None

    return labels


def _narrowed(selection: PodSelection, zone: Sequence[str], view: View) -> Sequence[str]:
    """The zone's nodes the pod may name: its nodeName's, else the fewer of the zone's and
    those carrying its first nodeSelector pair (the view's label index)."""
    if selection.node_name:
        return [selection.node_name] if selection.node_name in zone else []
    if selection.selector:
        first = view.nodes_with_label(*selection.selector[0])
        if len(first) < len(zone):
            inside = set(zone)
            return [n for n in first if n in inside]
    return zone


def _elsewhere(selection: PodSelection, *, key: str, view: View) -> dict[str, tuple[str, ...]]:
    """``key`` value -> the first few nodes of the view the constraints admit, sorted."""
    nodes = view.nodes
    if selection.node_name:
        candidates: Iterable[str] = [selection.node_name] if selection.node_name in nodes else []
    elif selection.selector:
        candidates = view.nodes_with_label(*selection.selector[0])
    else:
        candidates = sorted(nodes)
    found: dict[str, list[str]] = {}
    for name in candidates:
        labels = nodes[name].labels
        if selection.admits(labels, name):
            found.setdefault(labels.get(key, ""), []).append(name)
    return {v: tuple(sorted(found[v])[:NAMED]) for v in sorted(found)}


def _node_name(name: str, labels: Mapping[str, str] | None, *, key: str, zones: bool) -> str:
    """``spec.nodeName`` and where its node is: in a zone, or carrying a node label's value
    (``zones`` False: "in 1" would read the label as a zone)."""
    if labels is None:
        where = "not in stszone's view"
    elif key not in labels:
        where = f"without {key}"
    else:
        where = f"in {labels[key]}" if zones else f"with {key}={labels[key]}"
    return f"spec.nodeName {name} (a node {where})"


def _culprit(
    selection: PodSelection, zone: Sequence[str], *, view: View, key: str, zones: bool
) -> str:
    """Which of the pod's constraints admits none of the zone's nodes (the first that does
    not alone; else the ones that do not together)."""
    nodes = view.nodes
    if selection.node_name and selection.node_name not in zone:
        node = nodes.get(selection.node_name)
        held = node.labels if node is not None else None
        return _node_name(selection.node_name, held, key=key, zones=zones)
    names = [selection.node_name] if selection.node_name else list(zone)
    labels = {n: nodes[n].labels for n in names}
    pairs = selection.selector
    shown = ", ".join(f"{k}={v}" for k, v in pairs)
    if pairs and not any(all(labels[n].get(k) == v for k, v in pairs) for n in names):
        lone = [f"{k}={v}" for k, v in pairs if not any(labels[n].get(k) == v for n in names)]
        return f"nodeSelector {', '.join(lone) or shown}"
    terms = selection.required
    # Here the nodeName and the nodeSelector admit some node of the zone, so the terms do not.
    assert terms is not None
    if not any(any_term(terms, labels[n], n) for n in names):
        return "required nodeAffinity " + _terms_missing(terms, labels)
    return f"nodeSelector {shown} together with required nodeAffinity {_terms_missing(terms, {})}"


def _terms_missing(terms: Sequence[Term], labels: Mapping[str, Mapping[str, str]]) -> str:
    """Each term, by what in it no node of ``labels`` meets (all of it when each part alone is
    met by some node), joined by " / " (the terms are ORed; there is one at least, as
    :func:`fit` refuses a pod with none before judging it)."""
    described: list[str] = []
    for term in terms:
        if term.empty or term.invalid or not labels:
            described.append(term.describe())
            continue
        parts = [r.describe() for r in term.expressions or () if not _met(r, labels, field=False)]
        parts += [
            f"matchFields {r.describe()}"
            for r in term.fields or ()
            if not _met(r, labels, field=True)
        ]
        described.append(" and ".join(parts) or term.describe())
    return " / ".join(dict.fromkeys(described))


def _met(requirement: Requirement, labels: Mapping[str, Mapping[str, str]], *, field: bool) -> bool:
    """Whether some node of ``labels`` (name -> labels) meets one requirement."""
    if field:
        return any(requirement.matches_field(n) for n in labels)
    return any(requirement.matches(node) for node in labels.values())


def by_name(
    selection: PodSelection,
    key: str,
    value: str,
    *,
    nodes: Nodes | None = None,
    zones: bool = True,
) -> str | None:
    """The constraint that rules ``key=value`` out by what it says of ``key`` alone (and of
    the nodes it names that ``nodes`` holds), or None (the module docstring); ``zones`` as
    in :func:`fit`.

    A required affinity of ``selection`` has a term at least: :func:`fit` refuses a pod with
    none (:data:`NO_TERM`) before asking, and a template's or a spec's terms read by name
    (:mod:`webhook.rules.affinity`) are None when there are none."""
    selector = dict(selection.selector)
    if key in selector and selector[key] != value:
        return f"nodeSelector {key}={selector[key]}"
    if selection.node_name and nodes is not None:
        have = nodes(selection.node_name)
        if have is not None and have.get(key) != value:
            return _node_name(selection.node_name, have, key=key, zones=zones)
    terms = selection.required
    if terms is None:
        return None
    if any(_term_allows(t, key, value, nodes=nodes, selector=selector) for t in terms):
        return None
    blocking = [b for t in terms for b in _blocking(t, key, value, nodes=nodes, selector=selector)]
    return "required nodeAffinity " + " / ".join(dict.fromkeys(blocking))


def _named(term: Term) -> frozenset[str] | None:
    """The only nodes a term's ``matchFields metadata.name In`` lets it select (None: any)."""
    names: frozenset[str] | None = None
    for f in term.fields or ():
        if f.key == NAME_FIELD and f.operator == "In":
            names = frozenset(f.values) if names is None else names & frozenset(f.values)
    return names


def _known(names: frozenset[str] | None, nodes: Nodes | None) -> dict[str, Mapping[str, str]]:
    """Labels of ``names`` when the view holds every one of them, else ``{}``."""
    if names is None or nodes is None:
        return {}
    found = {n: labels for n in names if (labels := nodes(n)) is not None}
    return found if len(found) == len(names) else {}


def _on_key(term: Term, key: str, value: str) -> bool:
    """Whether every expression of ``term`` on ``key`` admits ``value``."""
    return all(r.matches({key: value}) for r in term.expressions or () if r.key == key)


def _term_allows(
    term: Term, key: str, value: str, *, nodes: Nodes | None, selector: Mapping[str, str]
) -> bool:
    """Whether one term can select some node whose ``key`` label is ``value``, by its name."""
    if term.empty or term.invalid:
        return False
    names = _named(term)
    known = _known(names, nodes)
    if known:
        return any(
            labels.get(key) == value
            and all(labels.get(k) == v for k, v in selector.items())
            and term.matches(labels, n)
            for n, labels in sorted(known.items())
        )
    if names is not None and not names:
        return False  # metadata.name In [x] ANDed with In [y]: no node at all
    return _on_key(term, key, value)


def _blocking(
    term: Term, key: str, value: str, *, nodes: Nodes | None, selector: Mapping[str, str]
) -> list[str]:
    """What in one term rules out ``key=value`` (the term is known not to allow it)."""
    if term.empty or term.invalid:
        return [term.describe()]
    known = _known(_named(term), nodes)
    if known:
        named = f"matchFields {NAME_FIELD} In [{', '.join(sorted(known))}]"
        inside = {n: labels for n, labels in known.items() if labels.get(key) == value}
        if inside:
            # The named node is in the zone: what rules the zone out is what it lacks.
            return [
                f"{named} (node {', '.join(sorted(inside))} in {value} does not meet "
                f"{_unmet(term, inside, selector)})"
            ]
        where = sorted({labels.get(key, f"no {key}") for labels in known.values()})
        return [f"{named} (node(s) in {', '.join(where)})"]
    found = [
        r.describe() for r in term.expressions or () if r.key == key and not r.matches({key: value})
    ]
    return found or [f"matchFields {NAME_FIELD} In [] (no node)"]


def _unmet(term: Term, labels: Mapping[str, Mapping[str, str]], selector: Mapping[str, str]) -> str:
    """The nodeSelector pairs and the term's requirements no node of ``labels`` meets (the
    whole term when each is met by some node)."""
    parts = [
        f"nodeSelector {k}={v}"
        for k, v in sorted(selector.items())
        if not any(node.get(k) == v for node in labels.values())
    ]
    parts += [r.describe() for r in term.expressions or () if not _met(r, labels, field=False)]
    parts += [
        f"matchFields {r.describe()}" for r in term.fields or () if not _met(r, labels, field=True)
    ]
    return " and ".join(parts) or term.describe()
