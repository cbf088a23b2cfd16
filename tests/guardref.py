"""An independent, brute-force reading of the scale-down guard's rules, for property tests.

Written from the rules as the product states them, not from the guard's code: it visits every
ordinal one by one and reads the store's raw tables and the volumes' raw objects (never
``webhook.rules`` nor the Store's queries, nor ``webhook.model.pinning`` or ``selection``):

- a volume's zones are those of the nodes it can attach to, found by scanning every node and
  asking Kubernetes' own volume filters (:mod:`tests.selectionref`, from the Go source). A zone
  key no node carries is read off each node's zone; a zone a valid term names (``In`` on a zone
  key) or a zone label names, where no node is yet, counts when a node there carrying only that
  zone would be admitted. A volume nothing constrains (no required affinity, or a term of valid
  fields alone, and no zone label) is usable anywhere; one that admits no zone is *nowhere*
  (its zone is unknown);
- a pod is the ordinal's when it is named ``<set>-<ordinal>`` and owned by the set; its claims
  are the ones it mounts, and without a pod the ones the controller names ``<t>-<set>-<o>``;
- a pod is going away when Terminating, Failed or Succeeded, or bound to a node the view (which
  holds nodes) does not hold: the node was deleted;
- a scheduled pod that is not going away is in its node's zone label, else its own topology
  label, else its bound volumes' zone when they allow only one, else its zone is unknown
  (never the placement rule);
- any other ordinal -- no pod, a pod not scheduled, a pod going away (its replacement, which
  gets new claims for those going with the pod: being deleted, or owned by a pod) -- is in
  its bound volumes' zone (unknown when one of them is nowhere, or their zones do not meet),
  where, for a set with a ``stszone.io/storage-class-template``, a claim with no volume counts
  in the zone recorded on it (``stszone.io/zone``: its class makes its volume only there, and
  its pod is placed there), else where the rule puts it
  (node-ordinal mode: the zone every node labelled with it is labelled with), else unknown;
- a scale-down is refused when a listed zone held by a removed ordinal of known zone is held by
  no kept ordinal of known zone, or when an unknown zone could change that answer (a kept
  unknown ordinal with a lost zone; a removed unknown ordinal with a listed zone no kept
  ordinal of known zone holds). With no list at all, any removed unknown ordinal refuses;
- a lost zone names the kept ordinals whose going pod still sits there; a listed zone held by
  a removed ordinal whose kept holders are all pods on nodes that are not Ready is reported.

The volumes' raw objects come with the store: build it with :func:`view` (or add a volume with
:func:`put_volume`), and the walk reads them from there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from tests import selectionref as ref
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.annotations import Declared
from webhook.model.extract import volume_info
from webhook.model.records import PodInfo, VolumeInfo
from webhook.model.store import Store

JSON = dict[str, Any]

#: The raw PersistentVolumes behind each store's records, by name.
_RAW: WeakKeyDictionary[Store, dict[str, JSON]] = WeakKeyDictionary()


def view(objects: Iterable[Any], **kw: Any) -> Store:
    """``store_from_objects(objects)``, remembering the raw PersistentVolumes for the walk."""
    items = list(objects)
    store = store_from_objects(items, **kw)
    _RAW[store] = {o["metadata"]["name"]: o for o in items if o.get("kind") == "PersistentVolume"}
    return store


def put_volume(store: Store, pv: JSON) -> None:
    """Put one PersistentVolume into ``store`` (as a watch event does), remembering it."""
    store.put("volumes", volume_info(pv))
    _RAW.setdefault(store, {})[pv["metadata"]["name"]] = pv


class Policy(Protocol):
    """What the reference reads of a set's policy (``webhook.rules.policy.Policy`` has it)."""

    @property
    def statefulset(self) -> str: ...
    @property
    def declared(self) -> Declared: ...
    @property
    def zones(self) -> tuple[str, ...]: ...
    @property
    def start(self) -> int: ...
    @property
    def templates(self) -> tuple[str, ...]: ...


ZONE_KEY = "topology.kubernetes.io/zone"
#: The zone keys, written out again here (the product's list), not imported.
ZONE_KEYS = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
    "topology.gke.io/zone",
    "topology.disk.csi.azure.com/zone",
    "topology.cinder.csi.openstack.org/zone",
)
#: The first few ordinals a finding names (the guard's own limit, by the product's messages).
NAMED = 10

#: A volume usable from any zone.
ANY = frozenset({"*"})


def _volume(store: Store, namespace: str, claim: str) -> VolumeInfo | None:
    """The PV a claim is bound to (``spec.volumeName``), else one pre-bound to it by claimRef."""
    info = store.claims.get((namespace, claim))
    if info is not None and info.volume:
        return store.volumes.get(info.volume)
    uid = info.uid if info is not None else ""
    for pv in store.volumes.values():
        if pv.claim == (namespace, claim) and (not (uid and pv.claim_uid) or pv.claim_uid == uid):
            return pv
    return None


def _valid(term: Mapping[str, Any]) -> bool:
    return all(map(ref.new_requirement, term.get("matchExpressions") or [])) and all(
        map(ref.field_requirement_ok, term.get("matchFields") or [])
    )


def _zone_labels(pv: Mapping[str, Any], keys: Iterable[str]) -> dict[str, set[str]]:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    found = {}
    for key in keys:
        if key in labels and key in ref.TOPOLOGY:
            zones = ref.label_zones(labels[key])
            if zones is not None:
                found[key] = zones
    return found


def volume_where(store: Store, pv: Mapping[str, Any], key: str) -> frozenset[str] | None:
    """ANY, the zones the volume can be used from, or None (nowhere)."""
    affinity = (pv.get("spec") or {}).get("nodeAffinity") or {}
    required = affinity.get("required")
    terms = (required or {}).get("nodeSelectorTerms") or []
    labelled = _zone_labels(pv, ref.TOPOLOGY)
    fields_only = any(
        t.get("matchFields") and not t.get("matchExpressions") and _valid(t) for t in terms
    )
    if not labelled and (required is None or fields_only):
        return ANY
    zone_keys = ZONE_KEYS if key in ZONE_KEYS else (key,)
    carried = {k for n in store.nodes.values() for k in n.labels}
    found: set[str] = set()
    for node in store.nodes.values():
        zone = node.labels.get(key)
        if not zone:
            continue
        labels = {**{k: zone for k in zone_keys if k not in carried}, **node.labels}
        if ref.volume_admits(pv, labels):
            found.add(zone)
    named = {
        v
        for t in terms
        if _valid(t)
        for e in t.get("matchExpressions") or []
        if e.get("key") in zone_keys and e.get("operator") == "In"
        for v in e.get("values") or []
    }
    named |= {v for zones in _zone_labels(pv, zone_keys).values() for v in zones}
    present = {n.labels[key] for n in store.nodes.values() if key in n.labels}
    meta = pv.get("metadata") or {}
    without_regions = {
        **pv,
        "metadata": {
            **meta,
            "labels": {k: v for k, v in (meta.get("labels") or {}).items() if "region" not in k},
        },
    }
    for value in named - present - {""}:
        if ref.volume_admits(without_regions, dict.fromkeys(zone_keys, value)):
            found.add(value)
    return frozenset(found) or None


def gone(store: Store, pod: PodInfo) -> bool:
    """Whether the pod's node was deleted: the view holds nodes, not this one."""
    return bool(pod.node and store.nodes and "nodes" in store.loaded) and (
        pod.node not in store.nodes
    )


def going(store: Store, pod: PodInfo) -> bool:
    """Terminating, ended, or on a deleted node."""
    return bool(pod.going) or gone(store, pod)


def _claims_of(pod: PodInfo | None, policy: Policy, ordinal: int) -> list[str]:
    if pod is not None:
        return [*[f"{t}-{pod.name}" for t in pod.templates], *pod.other_claims]
    return [f"{t}-{policy.statefulset}-{ordinal}" for t in policy.templates]


def _goes(store: Store, namespace: str, claim: str) -> bool:
    info = store.claims.get((namespace, claim))
    return info is not None and info.going


def own_pod(store: Store, policy: Policy, ordinal: int, namespace: str) -> PodInfo | None:
    """The ordinal's pod: ``<set>-<ordinal>``, owned by the set."""
    pod = store.pods.get((namespace, f"{policy.statefulset}-{ordinal}"))
    return pod if pod is not None and pod.owner == policy.statefulset else None


def sits(store: Store, pod: PodInfo, key: str) -> str | None:
    """Where a scheduled pod runs: its node's zone label, else its own (None: unread)."""
    if not pod.node:
        return None
    node = store.nodes.get(pod.node)
    if node is not None and node.labels.get(key):
        return node.labels[key]
    own = dict(pod.topology)
    found = own.get(key)
    if found is None and key in ZONE_KEYS:
        found = next((own[k] for k in ZONE_KEYS if k in own), None)
    return found


def locate(store: Store, policy: Policy, ordinal: int, *, namespace: str = "ns") -> str | None:
    """The zone of one ordinal from the raw tables, or None when it is unknown."""
    key = policy.declared.topology_key
    rule = policy.zones[(ordinal - policy.start) % len(policy.zones)] if policy.zones else None
    pod = own_pod(store, policy, ordinal, namespace)
    #: What the bound volumes allow, and with the claims' recorded zones (no pod running).
    volume: set[str] | None = None
    data: set[str] | None = None
    nowhere = False
    raw = _RAW[store]
    template = bool(policy.declared.storage_class_template)
    for claim in _claims_of(pod, policy, ordinal):
        if pod is not None and going(store, pod) and _goes(store, namespace, claim):
            continue
        pv = _volume(store, namespace, claim)
        where = volume_where(store, raw[pv.name], key) if pv is not None else ANY
        info = store.claims.get((namespace, claim))
        if pv is None and template and info is not None and info.zone:
            data = {info.zone} if data is None else data & {info.zone}
        elif where is None:
            nowhere = True
        elif where != ANY:
            volume = set(where) if volume is None else volume & where
            data = set(where) if data is None else data & where
    if pod is not None and pod.node and not going(store, pod):  # bound volumes only
        one = _among(volume, rule, policy) if volume and len(volume) == 1 else None
        return sits(store, pod, key) or one
    if nowhere or data == set():  # zones that do not meet: no node mounts every volume
        return None
    if data:
        return _among(data, rule, policy)
    if policy.declared.mode == "node-ordinal":
        label = policy.declared.node_label or ""
        # Every node with the label, one without a zone too: its pod may be bound to any.
        labelled = {
            n.labels.get(key) or None
            for n in store.nodes.values()
            if n.labels.get(label) == str(ordinal)
        }
        return labelled.pop() if len(labelled) == 1 else None
    return rule


def _among(zones: set[str], rule: str | None, policy: Policy) -> str:
    """The rule's zone when ``zones`` allow it, else the first of the list they allow, else
    the first by name."""
    ordered = [z for z in policy.zones if z in zones] or sorted(zones)
    return rule if rule in zones else ordered[0]


@dataclass(frozen=True)
class Answer:
    """What the rules say about one scale-down; ordinals are listed in order."""

    refused: bool
    #: Listed zone -> the removed ordinals that hold it (no kept ordinal of known zone does).
    lost: dict[str, list[int]]
    #: Listed zones no kept ordinal of known zone holds, that a removed unknown one may hold.
    at_risk: list[str]
    #: Zone outside the list -> the removed ordinals in it.
    unlisted: dict[str, list[int]]
    depends_on_unknown: bool
    unknown_removed: list[int]
    unknown_kept: list[int]
    #: Lost zone -> kept ordinals whose pod, going away, still sits there.
    leaving: dict[str, list[int]] = field(default_factory=dict)
    #: Listed zone held by a removed ordinal -> its kept holders, all on nodes not Ready.
    unready: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """Per ordinal of the span: its zone, where its going pod sits, whether its pod (scheduled,
    staying) runs on a node that is not Ready."""

    where: dict[int, str | None]
    leaving_from: dict[int, str | None]
    unready: set[int]


def judge(facts: Facts, policy: Policy, old: range, new: range) -> Answer:
    """The rules applied to the zones of every ordinal."""
    where = facts.where
    kept = {where[o] for o in new} - {None}
    removed = [o for o in old if o not in new]
    listed: set[str] = set(policy.zones) or {z for o in old if (z := where[o]) is not None}
    lost: dict[str, list[int]] = {}
    unlisted: dict[str, list[int]] = {}
    for o in removed:
        zone = where[o]
        if zone is not None and zone in listed and zone not in kept:
            lost.setdefault(zone, []).append(o)
        elif zone is not None and zone not in listed:
            unlisted.setdefault(zone, []).append(o)
    unknown_removed = [o for o in removed if where[o] is None]
    unknown_kept = [o for o in new if where[o] is None]
    at_risk = (
        [z for z in policy.zones if z not in kept and z not in lost] if unknown_removed else []
    )
    risky = bool(at_risk) if policy.zones else True
    depends = bool(lost and unknown_kept) or bool(unknown_removed and risky)
    leaving: dict[str, list[int]] = {}
    for o in new:
        if (sat := facts.leaving_from.get(o)) is not None and sat in lost:
            leaving.setdefault(sat, []).append(o)
    unready: dict[str, list[int]] = {}
    gone = {z for o in removed if (z := where[o]) is not None}
    for zone in sorted(listed & gone & {z for z in kept if z is not None}):
        holders = [o for o in new if where[o] == zone]
        if all(o in facts.unready for o in holders):
            unready[zone] = holders
    return Answer(
        bool(lost) or depends,
        lost,
        at_risk,
        unlisted,
        depends,
        unknown_removed,
        unknown_kept,
        dict(sorted(leaving.items())),
        unready,
    )


def facts(store: Store, policy: Policy, span: range, *, namespace: str = "ns") -> Facts:
    """Every ordinal of ``span``, one by one."""
    key = policy.declared.topology_key
    where: dict[int, str | None] = {}
    leaving_from: dict[int, str | None] = {}
    unready: set[int] = set()
    for o in span:
        where[o] = locate(store, policy, o, namespace=namespace)
        pod = own_pod(store, policy, o, namespace)
        if pod is None or not pod.node:
            continue
        if going(store, pod):
            leaving_from[o] = sits(store, pod, key)
        elif (node := store.nodes.get(pod.node)) is not None and not node.ready:
            unready.add(o)
    return Facts(where, leaving_from, unready)


def walk(
    store: Store, policy: Policy, old: range, new: range, *, namespace: str = "ns"
) -> tuple[Answer, int | None]:
    """(the answer for ``old`` -> ``new``, the smallest count the rules allow, or None).

    Counts go up to the larger of the two; when the start moves, also past every ordinal a
    pod or claim names, or in node-ordinal mode a node's label, by twice the zone count (the
    rule alone places those, or none has a zone)."""
    widest = range(new.start, new.start + max(len(old), len(new)))
    span = range(min(old.start, new.start), max(old.stop, widest.stop))
    if old.start != new.start:
        names = [name for _, name in (*store.pods, *store.claims)]
        tails = [n.rpartition("-")[2] for n in names]
        if policy.declared.mode == "node-ordinal":
            label = policy.declared.node_label or ""
            tails += [n.labels.get(label, "") for n in store.nodes.values()]
        named = [int(tail) for tail in tails if tail.isascii() and tail.isdigit()]
        past = max([span.stop, *(o + 1 for o in named)]) + 2 * len(policy.zones)
        widest = range(new.start, max(widest.stop, past))
        span = range(span.start, widest.stop)
    found = facts(store, policy, span, namespace=namespace)
    lowest = next(
        (
            n
            for n in range(len(widest) + 1)
            if not judge(found, policy, old, range(widest.start, widest.start + n)).refused
        ),
        None,
    )
    return judge(found, policy, old, new), lowest
