"""Which nodes can be removed without losing a pod or a zone of any audited workload. Pure.

Definition. A set ``S`` of nodes can be removed (drained, then deleted) when, for every audited
workload -- StatefulSet, Advanced StatefulSet, KafkaNodePool -- and every member ``o`` (an
ordinal in ``[start, start + replicas)``, a live ordinal, a broker's node ID):

1. **no pod is lost**: the *homes* of ``o`` are the nodes it may run on -- the nodes of its
   expected zone (affinity and scheduler modes; for a broker, the zone ``/mutate`` gives its
   pod: its data's, else the pool's fewest, the brokers drained off ``S`` placed in turn,
   lowest node ID first, each counted before the next) or the nodes carrying its ordinal label
   (node-ordinal mode) that its pod template's own nodeSelector and required affinity admit,
   narrowed to the nodes its volumes can attach to (by hostname, a driver's node key, any
   operator). If ``o``
   runs on a node of ``S``, or has any home today, some home must lie outside ``S``: a pod
   drained off ``S`` is re-created on a home, and every other pod needs one at its next
   re-creation (a rolling update re-creates them all). A local volume on ``S`` dies with it,
   so the volumes of ``o`` pinned to nodes need a node outside ``S`` too, even when ``o`` has
   no home (its data still holds its zone for the guard).
2. **no zone is lost**: the zones the workload holds after the pods on ``S`` are re-created (in
   their expected zone; in node-ordinal mode in the zone of their remaining homes, when all
   of them are labelled with one zone) include every zone it holds now (pod, else volume, else
   rule; a broker's pod, else its data: as the scale-down guard counts them). In node-ordinal
   mode the rule is the nodes carrying the ordinal's label, all of them, whatever its pod
   template admits: a member the guard locates by them holds the zone of those outside ``S``,
   when all of them are labelled with one zone (a node with no zone label among them may get
   its pod).

A node is *removable* when ``{node}`` can be removed. *Removable together* is one set that can
be removed at once, grown greedily from the nodes holding the fewest audited pods (then by
name). Two nodes that are each removable may be the last two of a zone, so drain from the
second list, or re-run the audit after each node. Not considered: the CPU and memory left on
the remaining nodes, taints, other workloads, ordinals beyond the current replica count, and
the node constraints of a broker's pod template.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from webhook.errors import Denied
from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY
from webhook.model.nodepools import KafkaNodePoolInfo
from webhook.model.records import StatefulSetInfo
from webhook.model.selection import template_selection
from webhook.model.store import Store
from webhook.rules.locate import Locator
from webhook.rules.pinned import volume_zones
from webhook.rules.placement import place, shared_zone
from webhook.rules.policy import resolve_policy, walked_members
from webhook.rules.poolplan import Balance
from webhook.rules.poolzones import choose, id_claims, members, pool_balance, pool_policy

#: How the Locator says a member's zone may come from its ordinal label (the replacement of a
#: going pod, or of one whose set is being deleted, is located as a member without a pod).
_FROM_LABEL = frozenset({"node-label", "replacement", "ending"})


@dataclass(frozen=True, slots=True)
class Slot:
    """One ordinal, as node removal sees it."""

    node: str
    zone: str | None
    homes: frozenset[str]
    #: Zone of a re-created pod in zone modes; None in node-ordinal mode (taken from homes).
    recreated: str | None
    by_label: bool
    #: The nodes its volumes pinned to nodes allow (None: none is so pinned).
    local: frozenset[str] | None = None
    #: node-ordinal mode: every node carrying its ordinal label, when the guard reads its zone
    #: from them (no running pod, no data of known zone): their zone holds it while it stays.
    labelled: frozenset[str] | None = None
    #: A broker whose zone the pool's fewest gives (no data decides it): ``recreated`` and
    #: ``homes`` hold while it stays; drained, it is placed again with the brokers drained
    #: with it (:class:`Refill`).
    fewest: bool = False


class Plan(NamedTuple):
    """One workload's members as node removal sees them, its topology key, and for a pool
    how the brokers drained together are re-created."""

    slots: list[Slot]
    key: str
    refill: Refill | None = None


@dataclass(frozen=True, slots=True)
class Refill:
    """A pool's brokers drained off removed nodes, re-created as the StrimziPodSet controller
    re-creates them: one pod at a time, lowest node ID first, each through ``/mutate``, where
    the pool's fewest counts the brokers re-created before it (:meth:`Balance.place`). Judged
    one by one against the pool as it is, two brokers drained together may each take the one
    zone with fewest; in turn, the second may be left the zone after it."""

    balance: Balance
    #: The nodes of each zone, the homes of a broker with no volume pinned to nodes.
    homes: dict[str, frozenset[str]]
    #: The brokers on each node: (index in the plan's slots, node ID, the zone its data gives
    #: it, None when the pool's fewest does).
    on: dict[str, list[tuple[int, int, str | None]]]
    #: The nodes running a broker the pool's fewest places: draining only others moves none.
    fewest_on: frozenset[str]

    def drained(
        self, slots: list[Slot], removed: Collection[str]
    ) -> dict[int, tuple[str, frozenset[str]]]:
        """The brokers the pool's fewest places that run on ``removed`` (by index in
        ``slots``): the zone and the homes they get once re-created in turn."""
        if not any(node in self.fewest_on for node in removed):
            return {}
        moved = [each for node in removed for each in self.on.get(node, ())]
        # A broker whose data decides keeps its data's zone, and is counted there.
        zones = self.balance.place({node_id: data for _, node_id, data in moved})
        found: dict[int, tuple[str, frozenset[str]]] = {}
        for index, node_id, data in moved:
            if data is None:
                zone, local = zones[node_id], slots[index].local
                homes = self.homes.get(zone, frozenset())
                found[index] = (zone, homes if local is None else homes & local)
        return found


def _local_nodes(
    claims: Sequence[str], key: str, store: Store, namespace: str
) -> frozenset[str] | None:
    """Nodes the member's volumes pinned to nodes (by hostname, a driver's node key) allow,
    or None when none of them is."""
    allowed: frozenset[str] | None = None
    for claim in claims:
        volume, _ = store.claim_zones(namespace, claim, key)
        nodes = store.volume_nodes(volume, key)  # an unbound claim's "" names no volume: None
        if nodes is not None:
            allowed = nodes if allowed is None else allowed & nodes
    return allowed


def _stuck(nodes: Iterable[str]) -> list[Slot]:
    """A malformed workload's members on ``nodes``: nowhere to go, so no node of theirs can go."""
    return [
        Slot(node, None, frozenset(), None, False)  # pragma: no mutate (by_label unread)
        for node in nodes
        if node
    ]


def _homes(
    zone: str | None, by_zone: dict[str, set[str]], local: frozenset[str] | None
) -> frozenset[str]:
    """The nodes of ``zone`` its volumes pinned to nodes (``local``, when any) allow."""
    homes = frozenset(by_zone.get(zone, ()) if zone else ())
    return homes if local is None else homes & local


def _by_zone(names: Iterable[str], key: str, store: Store) -> dict[str, set[str]]:
    """The nodes ``names`` by their zone under ``key`` (those without one left out)."""
    found: dict[str, set[str]] = {}
    for name in names:
        zone = store.node_zone(name, key)
        if zone is not None:
            found.setdefault(zone, set()).add(name)
    return found


def slots(sts: StatefulSetInfo, *, store: Store) -> Plan:
    """The ordinals of ``sts`` and its topology key; a malformed set's pods get no homes."""
    ordinals = walked_members(sts, store=store)
    try:
        policy = resolve_policy(sts.namespace, sts.name, store=store, group=sts.group)
    except Denied:
        pods = (store.pod(sts.namespace, f"{sts.name}-{o}") for o in ordinals)
        return Plan(_stuck(p.node for p in pods if p), DEFAULT_TOPOLOGY_KEY)
    key = policy.declared.topology_key
    # The template's own constraints leave the re-created pod only some nodes of its zone.
    fits = template_selection(sts.node_terms, sts.node_selector, sts.node_name)
    admitted = {n for n, node in store.nodes.items() if fits.admits(node.labels, n)}
    by_zone = _by_zone(admitted, key, store)
    found: list[Slot] = []
    where = Locator(namespace=sts.namespace, policy=policy, store=store)
    for ordinal in ordinals:
        located = where(ordinal)
        node = located.node  # any scheduled pod, whatever located its zone
        by_label = policy.declared.mode == "node-ordinal"
        expected: str | None = None
        labelled: frozenset[str] | None = None
        if by_label:
            labelled = frozenset(
                store.nodes_with_label(
                    policy.declared.node_label or "",  # pragma: no mutate (never empty here)
                    str(ordinal),
                )
            )
            homes = labelled.intersection(admitted)
            if (
                located.source not in _FROM_LABEL
                or volume_zones(
                    where.claims(ordinal), namespace=sts.namespace, policy=policy, store=store
                ).zones
            ):
                labelled = None
        else:
            claims = where.claims(ordinal)
            try:
                placed = place(
                    ordinal, namespace=sts.namespace, policy=policy, store=store, claims=claims
                )
                expected = placed.zone or None  # "": its volume can attach nowhere
            except Denied:
                expected = None  # no zones, or volumes in disjoint zones: nowhere to go
            homes = frozenset(by_zone.get(expected, ()) if expected else ())
        local = _local_nodes(where.claims(ordinal), key, store, sts.namespace)
        if local is not None:
            homes &= local
        found.append(Slot(node, located.zone, homes, expected, by_label, local, labelled))
    return Plan(found, key)


def pool_slots(pool: KafkaNodePoolInfo, *, store: Store) -> Plan:
    """The brokers of ``pool``: each counted in the zone the audit's lowest count and the guard
    count it in (its pod's, else its data's), re-created in the zone ``/mutate`` gives its pod
    (its data's, else the pool's fewest: brokers drained together in turn, :class:`Refill`); a
    malformed pool's pods get no homes."""
    try:
        policy = pool_policy(pool.namespace, pool.name, store=store)
    except Denied:
        policy = None
    if policy is None:
        pods = store.pool_pods(pool.namespace, pool.cluster, pool.name)
        return Plan(_stuck(p.node for p in pods), DEFAULT_TOPOLOGY_KEY)
    key, namespace = policy.key, pool.namespace
    by_zone = _by_zone(store.nodes, key, store)
    where = members(namespace, policy, store=store)
    # One pool, one view: its counts are worked out once, for every broker's fewest.
    balance = pool_balance(namespace, policy, store=store) if policy.zones else None
    found: list[Slot] = []
    on: dict[str, list[tuple[int, int, str | None]]] = {}
    for node_id in sorted(pool.node_ids if pool.node_ids is not None else where):
        pod = store.poolpods.get((namespace, policy.broker(node_id)))
        claims = id_claims(namespace, node_id, policy=policy, store=store)
        try:  # the call /mutate makes for its pod: its mounted claims, else the pool's fewest
            mounted = list(pod.claims) if pod is not None else claims
            choice = choose(
                namespace, node_id, policy=policy, store=store, claims=mounted, balance=balance
            )
            recreated: str | None = choice.zone
            fewest = choice.why == "fewest"
        except Denied:
            recreated, fewest = None, False  # no zones known: nowhere to go
        local = _local_nodes(claims, key, store, namespace)
        homes = _homes(recreated, by_zone, local)
        node = pod.node if pod is not None else ""
        on.setdefault(node, []).append((len(found), node_id, None if fewest else recreated))
        found.append(Slot(node, where.get(node_id), homes, recreated, False, local, None, fewest))
    refill = None
    if balance is not None:  # no zones: no broker has a zone to go to
        in_zone = {zone: frozenset(nodes) for zone, nodes in by_zone.items()}
        fewest_on = frozenset(s.node for s in found if s.fewest)
        refill = Refill(balance, in_zone, on, fewest_on)
    return Plan(found, key, refill)


def safe(plan: Plan, removed: Collection[str], *, store: Store) -> bool:
    """Whether removing the nodes ``removed`` loses no pod and no zone of one workload."""
    ordinals, key = plan.slots, plan.key
    drained = plan.refill.drained(ordinals, removed) if plan.refill is not None else {}
    before = {s.zone for s in ordinals if s.zone is not None}
    after: set[str | None] = set()
    for index, slot in enumerate(ordinals):
        recreated, homes = drained.get(index, (slot.recreated, slot.homes))
        moved = slot.node in removed
        if (moved or homes) and homes.issubset(removed):
            return False
        if slot.local and slot.local.issubset(removed):
            return False  # its data dies with them, homeless or not (the guard counted it)
        if not moved and slot.labelled is not None:
            after.add(shared_zone((n for n in slot.labelled if n not in removed), key, store=store))
        elif not moved:
            after.add(slot.zone)
        elif slot.by_label:
            after.add(shared_zone((h for h in homes if h not in removed), key, store=store))
        else:
            after.add(recreated)
    return before <= after


def removable_nodes(
    store: Store, sets: Iterable[StatefulSetInfo], pools: Iterable[KafkaNodePoolInfo] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(nodes removable one at a time, one set of nodes removable together), both sorted:
    weighing the StatefulSets and Advanced StatefulSets ``sets`` and the KafkaNodePools
    ``pools``."""
    plans: list[Plan] = []
    touching: dict[str, set[int]] = {name: set() for name in store.nodes}
    # The pools whose brokers on a node the fewest places: draining it moves where the others
    # drained with it go, onto nodes no slot of theirs names.
    drains: dict[str, set[int]] = {}
    pods_on: dict[str, int] = dict.fromkeys(store.nodes, 0)  # pragma: no mutate (order only)
    workloads = [
        *(slots(s, store=store) for s in sets),
        *(pool_slots(p, store=store) for p in pools),
    ]
    for plan in workloads:
        index = len(plans)
        plans.append(plan)
        for slot in plan.slots:
            for name in (slot.node, *slot.homes, *(slot.local or ()), *(slot.labelled or ())):
                touching.setdefault(name, set()).add(index)
            if slot.fewest:
                drains.setdefault(slot.node, set()).add(index)
            if slot.node in pods_on:  # no node (""), or one outside the view: never removed
                pods_on[slot.node] += 1  # pragma: no mutate (only the counts' order is read)

    def fits(removed: set[str], node: str, draining: set[int]) -> bool:
        weighed = touching.get(node, set()) | draining
        return all(safe(plans[i], removed, store=store) for i in weighed)

    alone = tuple(n for n in sorted(store.nodes) if fits({n}, n, set()))
    together: set[str] = set()
    draining: set[int] = set()  # the pools drained by the nodes of ``together``
    for name in sorted(store.nodes, key=lambda n: (pods_on[n], n)):
        if fits(together | {name}, name, draining):
            together.add(name)
            draining |= drains.get(name, set())
    return alone, tuple(sorted(together))
