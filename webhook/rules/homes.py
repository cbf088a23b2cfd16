"""Where each member of an audited workload may run again: the plans node removal judges. Pure.

For every StatefulSet, Advanced StatefulSet and KafkaNodePool member: the node its pod runs on,
the zone the guard counts it in, its *homes* (the nodes it may be re-created on) and the nodes
its volumes pinned to nodes allow, as :mod:`webhook.rules.removal` defines them; for a pool,
how the brokers drained together are placed again (:class:`Refill`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from webhook.errors import Denied
from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY
from webhook.model.nodepools import GROUP as STRIMZI
from webhook.model.nodepools import KafkaNodePoolInfo
from webhook.model.records import StatefulSetInfo
from webhook.model.selection import template_selection
from webhook.model.store import Store
from webhook.rules.locate import Locator
from webhook.rules.pinned import volume_zones
from webhook.rules.placement import place
from webhook.rules.policy import resolve_policy, walked_members, workload_kind
from webhook.rules.poolplan import Balance
from webhook.rules.poolzones import choose, id_claims, members, pool_balance, pool_policy

#: How the Locator says a member's zone may come from its ordinal label (the replacement of a
#: going pod, or of one whose set is being deleted, is located as a member without a pod).
_FROM_LABEL = frozenset({"node-label", "replacement", "ending"})


@dataclass(frozen=True, slots=True)
class Slot:
    """One ordinal, as node removal sees it."""

    #: The name of its pod (whether the pod exists or not): how the audit names the member.
    pod: str
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


class Workload(NamedTuple):
    """A workload as the audit names it: ``StatefulSet``, ``Advanced StatefulSet`` or
    ``KafkaNodePool`` (``title``), its API group and kind, namespace and name."""

    title: str
    group: str
    kind: str
    namespace: str
    name: str


class Plan(NamedTuple):
    """One workload's members as node removal sees them, its topology key, the workload, and
    for a pool how the brokers drained together are re-created."""

    slots: list[Slot]
    key: str
    workload: Workload
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


def _stuck(pods: Iterable[tuple[str, str]]) -> list[Slot]:
    """A malformed workload's members, (pod, node) of each: those with a node have nowhere to
    go, so no node of theirs can go."""
    return [
        Slot(pod, node, None, frozenset(), None, False)  # pragma: no mutate (by_label unread)
        for pod, node in pods
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
    group = sts.group or "apps"
    workload = Workload(workload_kind(sts.group), group, "StatefulSet", sts.namespace, sts.name)
    try:
        policy = resolve_policy(sts.namespace, sts.name, store=store, group=sts.group)
    except Denied:
        pods = (store.pod(sts.namespace, f"{sts.name}-{o}") for o in ordinals)
        return Plan(_stuck((p.name, p.node) for p in pods if p), DEFAULT_TOPOLOGY_KEY, workload)
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
        pod = f"{sts.name}-{ordinal}"
        found.append(Slot(pod, node, located.zone, homes, expected, by_label, local, labelled))
    return Plan(found, key, workload)


def pool_slots(pool: KafkaNodePoolInfo, *, store: Store) -> Plan:
    """The brokers of ``pool``: each counted in the zone the audit's lowest count and the guard
    count it in (its pod's, else its data's), re-created in the zone ``/mutate`` gives its pod
    (its data's, else the pool's fewest: brokers drained together in turn, :class:`Refill`); a
    malformed pool's pods get no homes."""
    workload = Workload("KafkaNodePool", STRIMZI, "KafkaNodePool", pool.namespace, pool.name)
    try:
        policy = pool_policy(pool.namespace, pool.name, store=store)
    except Denied:
        policy = None
    if policy is None:
        pods = store.pool_pods(pool.namespace, pool.cluster, pool.name)
        return Plan(_stuck((p.name, p.node) for p in pods), DEFAULT_TOPOLOGY_KEY, workload)
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
        name, held = policy.broker(node_id), where.get(node_id)
        found.append(Slot(name, node, held, homes, recreated, False, local, None, fewest))
    refill = None
    if balance is not None:  # no zones: no broker has a zone to go to
        in_zone = {zone: frozenset(nodes) for zone, nodes in by_zone.items()}
        fewest_on = frozenset(s.node for s in found if s.fewest)
        refill = Refill(balance, in_zone, on, fewest_on)
    return Plan(found, key, workload, refill)
