"""Where a PersistentVolume can be used: its node affinity as records keep it, and its zones. Pure.

A volume's zones are the zones of the nodes it can attach to. ``spec.nodeAffinity.required``
holds nodeSelectorTerms, ORed, each a list of expressions, ANDed; of those, the ``In``
expressions are kept (other operators only widen what a term admits, so a term without any
``In`` admits any node as far as stszone reads). Each expression is one of two kinds:

- on a **zone key** -- the set's topology key, or any zone key CSI drivers write when that is a
  zone key itself (``topology.ebs.csi.aws.com/zone``, ``topology.gke.io/zone``, the beta
  ``failure-domain.beta.kubernetes.io/zone``, ...) -- its values are zones, read as they are;
- on any other key -- ``kubernetes.io/hostname`` (local volumes, local-path, OpenEBS LocalPV),
  a driver's own node key (TopoLVM's ``topology.topolvm.io/node``) -- it selects the nodes
  carrying one of its values, and the volume is in those nodes' zones.

A volume whose terms select no zone that way (the node was deleted, the key is on no node, its
nodes have no zone label) is **nowhere**: no pod can mount it, and its zone is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from webhook.model import objects

#: Node/PV label keys that name a zone, in order of preference. CSI drivers publish their own
#: topology key on PV nodeAffinity; their values are the same zone names as the node label.
ZONE_KEYS: Final = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
    "topology.gke.io/zone",
    "topology.disk.csi.azure.com/zone",
    "topology.cinder.csi.openstack.org/zone",
)

#: How every reason :func:`nowhere` gives begins (messages tell a volume's unknown zone by it).
NOWHERE: Final = "can attach only to"

#: One term: its ``In`` expressions as (key, values), sorted by key (a key twice: intersected).
Term = tuple[tuple[str, frozenset[str]], ...]
#: A volume's terms, ORed; empty when nothing pins it (any node will do).
Terms = tuple[Term, ...]

#: One shared tuple per distinct affinity: 100k volumes pinned to three zones hold three.
_SHARED: dict[Terms, Terms] = {}
_SHARED_MAX: Final = 4096


def volume_terms(spec: Mapping[str, Any], *, labels: Mapping[str, str]) -> Terms:
    """The terms of a PersistentVolume's ``spec`` and ``metadata.labels``.

    Zone labels on the volume itself (the older way of pinning one, several zones joined by
    ``__`` for a regional disk) apply to every term, unless the term names that key itself.
    """
    required = objects.mapping(objects.mapping(spec, "nodeAffinity"), "required")
    found: list[dict[str, frozenset[str]]] = []
    for term in objects.dicts(required, "nodeSelectorTerms", path="spec.nodeAffinity.required"):
        expressions: dict[str, frozenset[str]] = {}
        for expr in objects.dicts(term, "matchExpressions", path="nodeSelectorTerms[]"):
            key, op, values = expr.get("key"), expr.get("operator"), expr.get("values")
            if isinstance(key, str) and op == "In" and isinstance(values, list):
                got = frozenset([v for v in values if isinstance(v, str)])
                expressions[key] = expressions[key] & got if key in expressions else got
        found.append(expressions)
    zoned = {k: frozenset(labels[k].split("__")) for k in ZONE_KEYS if k in labels}
    if zoned:
        found = [{**zoned, **term} for term in found] or [zoned]
    terms: Terms = tuple(tuple(sorted(term.items())) for term in found)
    shared = _SHARED.get(terms)
    if shared is None:
        if len(_SHARED) >= _SHARED_MAX:  # distinct affinities are few; bound them all the same
            _SHARED.clear()
        shared = _SHARED[terms] = terms
    return shared


def zone_keys(topology_key: str) -> tuple[str, ...]:
    """The keys whose values are zones for a set on ``topology_key``."""
    return ZONE_KEYS if topology_key in ZONE_KEYS else (topology_key,)


class Nodes(Protocol):
    """What reading a volume's zones needs of the view (:class:`~webhook.model.store.Store`)."""

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]: ...

    def node_zone(self, node: str, topology_key: str) -> str | None: ...


#: A term that admits any node: the volume is not pinned.
_ANYWHERE: Final[frozenset[str]] = frozenset()


def _term_zones(term: Term, topology_key: str, *, view: Nodes) -> frozenset[str] | None:
    """The zones one term admits (None: any, it reads no constraint)."""
    keys = zone_keys(topology_key)
    zones: frozenset[str] | None = None
    nodes: set[str] | None = None
    for key, values in term:
        if key in keys:
            zones = values if zones is None else zones & values
        else:
            selected = {n for v in values for n in view.nodes_with_label(key, v)}
            nodes = selected if nodes is None else nodes & selected
    if nodes is None:
        return zones
    at = frozenset([z for n in nodes if (z := view.node_zone(n, topology_key))])
    return at if zones is None else zones & at


def zones(terms: Terms, topology_key: str, *, view: Nodes) -> frozenset[str] | None:
    """The zones a volume with ``terms`` can be used from, on ``topology_key``.

    Empty: any zone (nothing pins it). None: nowhere -- its terms select no zone (see the
    module docstring); :func:`nowhere` says why.
    """
    if not terms:
        return _ANYWHERE
    found: frozenset[str] | None = None
    for term in terms:
        admitted = _term_zones(term, topology_key, view=view)
        if admitted is None:
            return _ANYWHERE
        found = admitted if found is None else found | admitted
    return found or None


def nodes(terms: Terms, topology_key: str, *, view: Nodes) -> frozenset[str] | None:
    """The nodes a volume pinned to nodes can attach to (None: some term names no node key,
    so it is pinned to zones at most, or to nothing)."""
    keys = zone_keys(topology_key)
    found: set[str] = set()
    for term in terms:
        selected: set[str] | None = None
        zones: frozenset[str] | None = None
        for key, values in term:
            if key in keys:
                zones = values if zones is None else zones & values
                continue
            named = {n for v in values for n in view.nodes_with_label(key, v)}
            selected = named if selected is None else selected & named
        if selected is None:
            return None
        found.update(
            n for n in selected if zones is None or view.node_zone(n, topology_key) in zones
        )
    return frozenset(found) if terms else None


def nowhere(terms: Terms, topology_key: str, *, view: Nodes) -> str:
    """Why a volume with ``terms`` is in no zone, in words: the nodes it selects have no zone
    label, or it selects none."""
    keys = zone_keys(topology_key)
    selected: set[str] = set()
    for term in terms:
        for key, values in term:
            if key not in keys:
                selected.update(n for v in values for n in view.nodes_with_label(key, v))
    unlabelled = sorted(n for n in selected if not view.node_zone(n, topology_key))
    if unlabelled:
        more = f" and {len(unlabelled) - 3} more" if len(unlabelled) > 3 else ""
        return (
            f"{NOWHERE} node(s) {', '.join(unlabelled[:3])}{more}, which have no "
            f"label {topology_key}"
        )
    described = [" and ".join(f"{k} In [{', '.join(sorted(v))}]" for k, v in t) for t in terms]
    wanted = " or ".join(described)
    return f"{NOWHERE} nodes with {wanted}, and no such node is in stszone's view"
