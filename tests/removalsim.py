"""Node removal played out, for property tests of :mod:`webhook.rules.removal`.

Random clusters of StatefulSets, Advanced StatefulSets and KafkaNodePools (:func:`clusters`),
and :func:`remove`: delete some nodes and the pods on them, re-create each such pod through
stszone's own admission chain (mutate, then validate) and bind it to a node that is left and
that admits it (its required affinity and nodeSelector, the node affinity of its bound volumes:
:mod:`tests.selectionref`, Kubernetes' filters from the Go source). Then it reports what went
wrong: a pod refused or with no node, a member that had a node to be re-created on and has none,
data on a local volume whose nodes are all gone, bound volumes no node left can mount together,
a zone a workload held and holds no more --
counted by the brute-force reference (:mod:`tests.guardref`) for a StatefulSet, and as the
guard counts them for an Advanced StatefulSet (the Locator) and a pool (``poolzones.members``).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests import builders as b
from tests import guardref
from tests import poolsim as sim
from tests import selectionref as ref
from tests.kruise_ref import live_ordinals
from webhook.config import Defaults
from webhook.model.extract import pod_info
from webhook.model.nodepools import poolpod_info
from webhook.model.store import Store
from webhook.rules.locate import Locator
from webhook.rules.policy import resolve_policy
from webhook.rules.poolzones import members, pool_policy
from webhook.wire import review

JSON = dict[str, Any]
KEY, HOST, LABEL = "topology.kubernetes.io/zone", "kubernetes.io/hostname", "example.io/node"
ZONES = sim.ZONES
LISTED = {"stszone.io/zones": ",".join(ZONES)}
KRUISE_SET = sim.FIXTURES.parent / "kruise" / "objects"


@dataclass
class Member:
    """One member of one workload: how its pod is made afresh, and its local volumes."""

    workload: tuple[str, str, str]  # (kind, namespace, name)
    fresh: JSON  # the pod its controller creates (no node)
    local: list[str] = field(default_factory=list)  # PVs pinned to nodes by hostname
    #: A broker with no data of known zone: /mutate gives it the pool's fewest zone.
    balanced: bool = False

    @property
    def table(self) -> str:
        return "poolpods" if self.workload[0] == "pool" else "pods"

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload[1], self.fresh["metadata"]["name"])


@dataclass
class Before:
    """The cluster before any removal: its view, and what each removal is held to."""

    view: Store
    raw: dict[str, JSON]  # its PersistentVolumes by name
    zones: dict[tuple[str, str, str], set[str]]
    homed: set[tuple[str, str]]  # members with a node to be re-created on
    mounted: set[tuple[str, str]]  # members with bound volumes some node mounts


@dataclass
class Cluster:
    objects: list[JSON]
    members: list[Member]
    nodes: list[str]
    _before: Before | None = None

    @property
    def before(self) -> Before:
        if self._before is None:
            view = guardref.view(self.objects)
            raw = guardref._RAW[view]
            self._before = Before(
                view,
                raw,
                held(view, self),
                {m.key for m in self.members if home(m, view, raw)},
                {m.key for m in self.members if mounts(m, view, raw)},
            )
        return self._before

    def __repr__(self) -> str:
        """The objects in short: nodes with their labels, pods, volumes, workloads."""
        lines = []
        for o in self.objects:
            meta, spec = o["metadata"], o.get("spec") or {}
            if o["kind"] == "Node":
                lines.append(f"node {meta['name']} {meta['labels']}")
            elif o["kind"] == "Pod":
                going = " Terminating" if meta.get("deletionTimestamp") else ""
                lines.append(f"pod {meta['name']} on {spec.get('nodeName')!r}{going}")
            elif o["kind"] == "PersistentVolume":
                term = spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
                lines.append(f"pv {meta['name']} {term['matchExpressions'][0]}")
            elif o["kind"] == "PersistentVolumeClaim":
                lines.append(f"pvc {meta['name']} {meta.get('annotations')}")
            else:
                kept = {k: spec.get(k) for k in ("replicas", "reserveOrdinals") if k in spec}
                lines.append(f"{o['kind']} {meta['name']} {meta.get('annotations')} {kept}")
        return "\n".join(["", *lines])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@functools.cache
def _read(name: str) -> JSON:
    item: JSON = json.loads((KRUISE_SET / name).read_text())["items"][0]
    return item


def _recorded(name: str) -> JSON:
    """The first object of a recorded kruise list (read once)."""
    return copy.deepcopy(_read(name))


_pool_pod = functools.cache(sim.pod_object)  # the recorded ones, renamed, read once
_pool_claim = functools.cache(sim.claim_object)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """Nodes in zone-a/b/c (0-2 each), maybe one in unlisted zone-x and one unlabelled, some
    labelled disk=ssd or with an ordinal label; 0-2 StatefulSets (zone or node-ordinal mode,
    maybe a template nodeSelector), 0-1 Advanced StatefulSet with reserved ordinals, 0-2
    KafkaNodePools; members with a pod on any node, pending, Terminating, on a deleted node or
    none, and data bound to a zonal or a local volume, or not bound."""
    names: list[str] = []
    zone_of: dict[str, str | None] = {}
    for zone in ZONES:
        for i in range(draw(st.integers(0, 2), label=f"nodes in {zone}")):
            names.append(f"{zone[-1]}{i}")
            zone_of[names[-1]] = zone
    for name, outside in (("x0", "zone-x"), ("bare", None)):
        if draw(st.booleans()):
            names.append(name)
            zone_of[name] = outside
    if not names:
        names, zone_of = ["a0"], {"a0": ZONES[0]}
    ssd = draw(st.sets(st.sampled_from(names)), label="ssd")
    ordinal_label = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 3)))
    objects: list[JSON] = []
    for name in names:
        labels = {"disk": "ssd"} if name in ssd else {}
        if name in ordinal_label:
            labels[LABEL] = str(ordinal_label[name])
        objects.append(b.node(name, zone_of[name], labels=labels))
    found: list[Member] = []
    on = st.sampled_from([*names, "", "gone"])
    data = st.sampled_from(["none", "zonal", "local"])

    def place(pod: JSON, member: Member, claim: str, made: JSON | None = None) -> None:
        """``made``: the claim as its controller made it (else none unless bound)."""
        namespace = member.workload[1]
        where = draw(on, label="node")
        state = draw(st.sampled_from(["none", "running", "terminating"]), label="pod")
        kind = draw(data, label="data")
        if kind != "none":
            pv = f"pv-{namespace}-{claim}"
            target = draw(st.sampled_from([*ZONES, "zone-x"] if kind == "zonal" else names))
            bound = b.pvc(claim, namespace=namespace, volume=pv)
            if made is not None:
                made["spec"]["volumeName"], made["status"] = pv, bound["status"]
            objects.append(made or bound)
            objects.append(b.pv(pv, target, key=KEY if kind == "zonal" else HOST))
            if kind == "local":
                member.local.append(pv)
        elif made is not None:
            objects.append(made)
        else:
            member.balanced = member.workload[0] == "pool"
        if state != "none":
            made = copy.deepcopy(pod)
            if where:
                made["spec"]["nodeName"] = where
            if state == "terminating":
                made["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
            objects.append(made)
        found.append(member)

    for s in range(draw(st.integers(0, 2), label="statefulsets")):
        name, replicas = f"db{s}", draw(st.integers(1, 4))
        annotations = dict(LISTED)
        if draw(st.booleans(), label="node-ordinal"):
            annotations |= {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": LABEL}
        selector = {"disk": "ssd"} if draw(st.booleans(), label="ssd only") else None
        objects.append(
            b.statefulset(name, replicas=replicas, annotations=annotations, node_selector=selector)
        )
        for o in range(replicas):
            pod = b.sts_pod(name, o, node_selector=selector)
            place(pod, Member(("sts", "ns", name), pod), f"data-{name}-{o}")
    if draw(st.booleans(), label="advanced statefulset"):
        replicas = draw(st.integers(1, 4))
        reserve = sorted(draw(st.sets(st.integers(0, 5), max_size=2)))
        obj = _recorded("statefulsets.v1beta1.json")
        obj["metadata"]["annotations"] = dict(LISTED)
        obj["spec"].update(replicas=replicas, reserveOrdinals=reserve)
        objects.append(obj)
        for o in live_ordinals(replicas, reserve=reserve):
            pod = _recorded("pods.json")
            pod["metadata"]["name"] = f"web-{o}"
            pod["metadata"]["labels"].update(
                {"statefulset.kubernetes.io/pod-name": f"web-{o}",
                 "apps.kubernetes.io/pod-index": str(o)}
            )  # fmt: skip
            pod["metadata"]["ownerReferences"][0]["uid"] = obj["metadata"]["uid"]
            pod["spec"]["hostname"] = f"web-{o}"
            pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = f"data-web-{o}"
            pod.pop("status", None)
            pod["spec"].pop("nodeName", None)
            place(pod, Member(("kruise", "shop", "web"), pod), f"data-web-{o}")
    for p in range(draw(st.integers(0 if found else 1, 2), label="pools")):
        name = f"p{p}"
        ids = sorted(draw(st.sets(st.integers(10 * p, 10 * p + 5), min_size=1, max_size=4)))
        objects.append(sim.pool_object(name, replicas=len(ids), node_ids=ids))
        for node_id in ids:
            pod = copy.deepcopy(_pool_pod("my-cluster", name, node_id))
            pod["spec"].pop("nodeName", None)
            pod.pop("status", None)
            claim = f"data-my-cluster-{name}-{node_id}"
            recorded = draw(st.sampled_from([None, *ZONES]), label="claim zone")
            made = None
            if recorded is not None:
                made = copy.deepcopy(_pool_claim("my-cluster", name, node_id))
                made["metadata"].setdefault("annotations", {})["stszone.io/zone"] = recorded
            place(pod, Member(("pool", "kafka", name), pod), claim, made)
    return Cluster(objects, found, names)


def admitted(pod: JSON, store: Store) -> JSON | None:
    """The pod as the API server stores it after stszone's webhooks, or None when refused."""
    body = b.review(pod) if "strimzi.io/cluster" not in pod["metadata"]["labels"] else sim.body(pod)
    answer = review.chain(review.from_dict(body), store=store, defaults=Defaults())
    return answer.edited if answer.allowed else None


def volumes(pod: JSON, store: Store, raw: dict[str, JSON]) -> list[JSON]:
    """The PersistentVolumes bound to the claims ``pod`` mounts."""
    found = []
    for volume in pod["spec"].get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        info = store.claims.get((pod["metadata"]["namespace"], claim)) if claim else None
        if info is not None and info.volume in raw:
            found.append(raw[info.volume])
    return found


def fitting(pod: JSON, store: Store, raw: dict[str, JSON], *, any_pod: bool = False) -> list[str]:
    """The nodes of ``store`` a scheduler may bind ``pod`` to (sorted); ``any_pod``: by its
    volumes alone."""
    pvs = volumes(pod, store, raw)
    return sorted(
        name
        for name, node in store.nodes.items()
        if (any_pod or ref.pod_match(pod["spec"], node.labels, name))
        and all(ref.volume_admits(pv, node.labels) for pv in pvs)
    )


def mounts(member: Member, store: Store, raw: dict[str, JSON]) -> bool:
    """Whether the member has bound volumes and a node of ``store`` mounts them all."""
    pod = member.fresh
    return bool(volumes(pod, store, raw) and fitting(pod, store, raw, any_pod=True))


def _record(member: Member, pod: JSON) -> Any:
    return poolpod_info(pod) if member.table == "poolpods" else pod_info(pod)


def home(member: Member, store: Store, raw: dict[str, JSON]) -> list[str]:
    """Where the member's pod could be bound if it were re-created now (its own pod gone)."""
    table: Any = member.table
    own = store.table(table).get(member.key)
    store.delete(table, member.key)
    try:
        made = admitted(member.fresh, store)
        return fitting(made, store, raw) if made is not None else []
    finally:
        if own is not None:
            store.put(table, own)


def held(store: Store, cluster: Cluster) -> dict[tuple[str, str, str], set[str]]:
    """Zones each workload holds, as the guard counts them (the reference for StatefulSets)."""
    zones: dict[tuple[str, str, str], set[str]] = {}
    for member in cluster.members:
        kind, namespace, name = member.workload
        ordinal = int(member.key[1].rpartition("-")[2])
        zone: str | None
        if kind == "pool":
            policy = pool_policy(namespace, name, store=store)
            assert policy is not None
            zone = members(namespace, policy, store=store).get(ordinal)
        else:
            group = "apps.kruise.io" if kind == "kruise" else ""
            policy_ = resolve_policy(namespace, name, store=store, group=group)
            if kind == "sts":
                zone = guardref.locate(store, policy_, ordinal, namespace=namespace)
            else:
                zone = Locator(namespace=namespace, policy=policy_, store=store)(ordinal).zone
        zones.setdefault(member.workload, set()).update({zone} - {None})  # type: ignore[arg-type]
    return zones


def _homed_with(member: Member, view: Store, raw: dict[str, JSON], nodes: list[Any]) -> bool:
    """Whether the member would have a home in ``view`` with ``nodes`` back: if not, it lost
    it to something else (a broker's fewest zone moves as the pods re-created fill the pool)."""
    for node in nodes:
        view.put("nodes", node)
    try:
        return bool(home(member, view, raw))
    finally:
        for node in nodes:
            view.delete("nodes", node.key)


def pinned(pod: JSON) -> bool:
    """Whether stszone's required affinity ties the pod to a zone or to labelled nodes."""
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(ref.REQUIRED)
    terms = (required or {}).get("nodeSelectorTerms") or []
    keys = {e.get("key") for t in terms for e in t.get("matchExpressions") or []}
    return bool(keys & {KEY, LABEL})


def remove(
    cluster: Cluster, gone: Iterable[str], pick: Callable[[list[str]], str]
) -> tuple[list[str], list[str]]:
    """Remove the nodes ``gone``: (what went wrong, empty when nothing; what removal does not
    foresee: pods re-created free to go to any zone or to nodes of several, brokers given the
    pool's fewest zone as the re-created brokers leave it). ``pick`` plays the scheduler."""
    removed = set(gone)
    before = cluster.before
    raw = before.raw
    evicted = {
        (o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in cluster.objects
        if o["kind"] == "Pod" and o["spec"].get("nodeName") in removed
    }
    kept = [
        o
        for o in cluster.objects
        if not (o["kind"] == "Node" and o["metadata"]["name"] in removed)
        and not (o["kind"] == "Pod" and (o["metadata"].get("namespace"), o["metadata"]["name"]) in evicted)
    ]  # fmt: skip
    view = guardref.view(kept)
    wrong: list[str] = []
    loose: list[str] = []
    for member in sorted(cluster.members, key=lambda m: m.key):
        if member.key not in evicted:
            continue
        made = admitted(member.fresh, view)
        if made is not None and (member.balanced or not pinned(made)):
            loose.append(member.key[1])
        nodes = fitting(made, view, raw) if made is not None else []
        if len({view.nodes[n].labels.get(KEY) for n in nodes}) > 1:
            loose.append(member.key[1])  # the scheduler picks its zone
        if not nodes:
            wrong.append(f"{member.key[1]}: {'refused' if made is None else 'no node'}")
            continue
        assert made is not None
        made["spec"]["nodeName"] = pick(nodes)
        view.put(member.table, _record(member, made))  # type: ignore[arg-type]
    for member in cluster.members:
        back = [before.view.nodes[n] for n in removed]
        if (
            member.key not in evicted
            and member.key in before.homed
            and not home(member, view, raw)
            and _homed_with(member, view, raw, back)
        ):  # a broker the pool balances: its fewest zone moved with the brokers re-created
            (loose if member.balanced else wrong).append(f"{member.key[1]}: no home left")
        if member.key in before.mounted and not mounts(member, view, raw):
            wrong.append(f"{member.key[1]}: no node left that mounts its volumes")
        for pv in member.local:
            was = any(ref.volume_admits(raw[pv], n.labels) for n in before.view.nodes.values())
            if was and not any(ref.volume_admits(raw[pv], n.labels) for n in view.nodes.values()):
                wrong.append(f"{member.key[1]}: data on {pv} lost")
    after = held(view, cluster)
    for workload, zones in before.zones.items():
        if lost := zones - after.get(workload, set()):
            wrong.append(f"{workload[2]}: lost {sorted(lost)}")
    return wrong, loose
