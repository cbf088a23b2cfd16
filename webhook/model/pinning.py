"""Where a PersistentVolume can be used: its node constraints as records keep them, and the
nodes and zones of the view they admit. Pure.

kube-scheduler puts a pod with a bound volume only on a node both of these admit:

- the volume's ``spec.nodeAffinity.required`` (VolumeBinding: ``CheckNodeAffinity``), read by
  :mod:`webhook.model.selection` with every operator, against the node's labels alone (so its
  ``matchFields`` never constrain); a ``required`` whose terms are all empty admits no node;
- the volume's own topology labels (VolumeZone): ``topology.kubernetes.io/zone`` and
  ``region`` and their ``failure-domain.beta`` forms, several zones joined by ``__`` for a
  regional disk. A node with none of those labels passes; any other must carry each key (the
  beta key may be read from the GA one) with one of the volume's values.

A volume is in the zones of the view's nodes it admits, on the set's topology key. Two things
make up for a view that does not hold every node it could:

- an expression on a **zone key** (the set's topology key, or any zone key CSI drivers write
  when that is a zone key itself: ``topology.ebs.csi.aws.com/zone``, ``topology.gke.io/zone``,
  ...) that no node of the view carries names zones directly: a node is read as carrying it
  with its own zone;
- a zone such a key names (``In``) in which the view holds no node yet (a node pool at zero)
  is one of the volume's zones when a node there carrying only its zone would be admitted.

A volume that admits none of that (its node was deleted, its key is on no node, its nodes have
no zone label) is **nowhere**: no pod can mount it, and its zone is unknown.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple, Protocol

from webhook.model import objects
from webhook.model.selection import Term, any_term, parse_term

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

#: The labels of a volume VolumeZone reads, each with the key a node may carry it under instead.
TOPOLOGY_LABELS: Final = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region": "topology.kubernetes.io/region",
}

#: How every reason :func:`nowhere` gives begins (messages tell a volume's unknown zone by it).
NOWHERE: Final = "can attach only to"
#: How a reason of :func:`nowhere` ends when the volume's nodes are missing, not unlabelled:
#: the fix is to bring a node back rather than to label one.
ABSENT: Final = "and no such node is in stszone's view"


class Pinning(NamedTuple):
    """A volume's node constraints, as kube-scheduler's volume filters read them."""

    #: ``spec.nodeAffinity.required``'s terms, ORed, empty ones left out (None: no affinity).
    required: tuple[Term, ...] | None = None
    #: Its VolumeZone labels: (key, the values it allows), by key.
    labels: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def anywhere(self) -> bool:
        """Whether it admits every node: nothing pins it, or a term whose only requirements
        are fields (not compared for a volume) with no label beside it."""
        if self.labels:
            return False
        return self.required is None or any(
            t.expressions is None and not t.invalid for t in self.required
        )

    def admits(self, labels: Mapping[str, str], *, regions: bool = True) -> bool:
        """Whether a node with ``labels`` passes both filters (``regions``: False reads the
        region labels as met, for a node the view has not seen)."""
        if self.required is not None and not any_term(self.required, labels):
            return False
        if not self.labels or not any(k in labels for k in TOPOLOGY_LABELS):
            return True
        for key, values in self.labels:
            if not regions and key.endswith("/region"):
                continue
            have = labels.get(key)
            if have is None:
                have = labels.get(TOPOLOGY_LABELS[key])
            if have is None or have not in values:
                return False
        return True

    def describe(self) -> str:
        """Its terms ORed, each with the labels ANDed in, in words."""
        extra = [f"{k} In [{', '.join(v)}]" for k, v in self.labels]
        if self.required is None:
            return " and ".join(extra)
        if not self.required:
            return "no term a node can match"
        described = []
        for term in self.required:
            if term.invalid:
                described.append(term.describe())
                continue
            parts = [r.describe() for r in term.expressions or ()]
            described.append(" and ".join(sorted([*parts, *extra])))
        return " or ".join(described)


#: Nothing pins the volume: any node will do.
UNPINNED: Final = Pinning()


def _zones(value: str) -> tuple[str, ...] | None:
    """A VolumeZone label's zones (``LabelZonesToSet``), None when it has an empty one."""
    parts = [p.strip() for p in value.split("__")]
    return None if "" in parts else tuple(sorted(set(parts)))


#: Volumes by the way their constraints are written: 100,000 volumes pinned to three zones are
#: written three ways, so they hold three records, and a list parses each way once. The key is
#: the raw values pickled: pickle writes each value with its type, so equal keys are equal input
#: for every type a JSON or YAML document holds (a date and its text, ``1``, ``1.0`` and
#: ``True`` differ), which an encoding to JSON does not promise; ``repr`` would too, at three
#: times the cost.
_PINNINGS: dict[bytes, Pinning] = {}
_PINNINGS_MAX: Final = 32768
_LABEL_KEYS: Final = tuple(sorted(TOPOLOGY_LABELS))
_UNWRITTEN: Final = (None, (None,) * len(_LABEL_KEYS))


def volume_pinning(spec: Mapping[str, Any], *, labels: Mapping[str, str]) -> Pinning:
    """The node constraints of a PersistentVolume's ``spec`` and ``metadata.labels``."""
    affinity = objects.mapping(spec, "nodeAffinity", path="spec")
    written = (affinity.get("required"), tuple(labels.get(k) for k in _LABEL_KEYS))
    if written == _UNWRITTEN:
        return UNPINNED
    key = pickle.dumps(written, protocol=5)
    found = _PINNINGS.get(key)
    if found is None:
        if len(_PINNINGS) >= _PINNINGS_MAX:  # pragma: no mutate (a bound: affinities are few)
            _PINNINGS.clear()
        found = _PINNINGS[key] = _read_pinning(affinity, labels)
    return found


def _read_pinning(affinity: Mapping[str, Any], labels: Mapping[str, str]) -> Pinning:
    required: tuple[Term, ...] | None = None
    if affinity.get("required") is not None:
        where = "spec.nodeAffinity.required"
        raw = objects.mapping(affinity, "required", path="spec.nodeAffinity")
        terms = objects.dicts(raw, "nodeSelectorTerms", path=where)
        required = tuple(t for t in map(parse_term, terms) if not t.empty)
    zoned = tuple(
        (k, zones)
        for k in _LABEL_KEYS
        if k in labels and (zones := _zones(labels[k])) is not None  # unreadable: ignored
    )
    if required is None and not zoned:
        return UNPINNED
    return Pinning(required, zoned)


def zone_keys(topology_key: str) -> tuple[str, ...]:
    """The keys whose values are zones for a set on ``topology_key``."""
    return ZONE_KEYS if topology_key in ZONE_KEYS else (topology_key,)


class Labelled(Protocol):
    """A node as the view holds it (:class:`~webhook.model.records.NodeInfo`)."""

    @property
    def labels(self) -> Mapping[str, str]: ...


class Nodes(Protocol):
    """What reading a volume's zones needs of the view (:class:`~webhook.model.store.Store`)."""

    @property
    def nodes(self) -> Mapping[str, Labelled]: ...

    def nodes_with_label(self, key: str, value: str) -> tuple[str, ...]: ...

    def label_values(self, key: str) -> frozenset[str]: ...


class Reach(NamedTuple):
    """Where a volume can attach in the view, on one topology key."""

    #: Its zones; empty: any zone (nothing pins it); None: nowhere.
    zones: frozenset[str] | None
    #: The view's nodes it admits (None: any node, nothing pins it).
    nodes: frozenset[str] | None = None
    #: Those of them without the topology label, sorted.
    unlabelled: tuple[str, ...] = ()


#: A volume nothing pins.
EVERYWHERE: Final = Reach(frozenset())


def _candidates(pinning: Pinning, key: str, unseen: set[str], *, view: Nodes) -> Iterable[str]:
    """The nodes worth checking: those an ``In`` of each term names (by the view's label
    index), or every node when a term has no ``In`` to narrow it by."""
    if pinning.required is None:
        return view.nodes
    found: set[str] = set()
    for term in pinning.required:
        if term.invalid:
            continue  # matches no node
        first = next((r for r in term.expressions or () if r.operator == "In"), None)
        if first is None:
            return view.nodes
        by = key if first.key in unseen else first.key
        for value in first.values:
            found.update(view.nodes_with_label(by, value))
    return sorted(found)


def reach(pinning: Pinning, topology_key: str, *, view: Nodes) -> Reach:
    """The nodes and zones a volume with ``pinning`` can attach to (the module docstring)."""
    if pinning.anywhere:
        return EVERYWHERE
    keys = zone_keys(topology_key)
    unseen = {k for k in keys if not view.label_values(k)}
    admitted: set[str] = set()
    zones: set[str] = set()
    unlabelled: list[str] = []
    nodes = view.nodes
    for name in _candidates(pinning, topology_key, unseen, view=view):
        labels = nodes[name].labels
        zone = labels.get(topology_key)
        if unseen and zone:
            labels = {**dict.fromkeys(unseen, zone), **labels}
        if pinning.admits(labels):
            admitted.add(name)
            if not zone:
                unlabelled.append(name)
            else:
                zones.add(zone)
    # Zones named outright where the view has no node yet: a node there, carrying only its
    # zone, is what the volume waits for.
    values = {
        v
        for t in pinning.required or ()
        for r in t.expressions or ()
        if r.key in keys and r.operator == "In"
        for v in r.values
    }
    values.update(v for k, vs in pinning.labels if k in keys for v in vs)
    present = view.label_values(topology_key)
    for value in sorted(values - present - zones - {""}):
        if pinning.admits(dict.fromkeys(keys, value), regions=False):
            zones.add(value)
    return Reach(frozenset(zones) or None, frozenset(admitted), tuple(sorted(unlabelled)))


def nowhere(pinning: Pinning, topology_key: str, *, view: Nodes) -> str:
    """Why a volume with ``pinning`` is in no zone, in words: the nodes it admits have no zone
    label, or it admits none."""
    unlabelled = reach(pinning, topology_key, view=view).unlabelled
    if unlabelled:
        more = f" and {len(unlabelled) - 3} more" if len(unlabelled) > 3 else ""
        return (
            f"{NOWHERE} node(s) {', '.join(unlabelled[:3])}{more}, which have no "
            f"label {topology_key}"
        )
    return f"{NOWHERE} nodes with {pinning.describe()}, {ABSENT}"


def topology_label(topology: Iterable[tuple[str, str]], key: str) -> str | None:
    """A pod's own label for ``key`` among its topology labels (or an equivalent zone key)."""
    labels = dict(topology)
    found = labels.get(key)
    if found is None and key in ZONE_KEYS:
        found = next((labels[k] for k in ZONE_KEYS if k in labels), None)
    return found


def is_topology_label(key: str) -> bool:
    """Whether a pod label names where it runs: a zone key, or any ``topology.*/`` key."""
    return key in ZONE_KEYS or key.partition("/")[0].startswith("topology.")


#: One shared tuple per distinct set of pod topology labels: the pods of a zone all carry the
#: same few (zone, region), so 100k pods hold a handful of tuples, not 100k.
_TOPOLOGIES: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_TOPOLOGIES_MAX: Final = 4096


def shared_topology(topology: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The one shared tuple equal to ``topology`` (while the table has room)."""
    found = _TOPOLOGIES.get(topology)
    if found is not None:
        return found
    if len(_TOPOLOGIES) < _TOPOLOGIES_MAX:
        _TOPOLOGIES[topology] = topology
    return topology
