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

A node is *removable* when ``{node}`` can be removed; of every other node the audit says why
(:class:`Blocked`): per workload, the members left no node to run on, those whose volumes no
node left can mount, and each zone the workload would hold no more, with the members holding
it now (a member drained with nowhere to run, or whose volumes no node can mount, holds no
zone). *Removable together* is one set that can be removed at once, grown greedily from the
nodes holding the fewest audited pods (then by name). Two nodes that are each removable may be
the last two of a zone, so drain from the second list, or re-run the audit after each node.
Not considered: the CPU and memory left on the remaining nodes, taints, other workloads,
ordinals beyond the current replica count, and the node constraints of a broker's pod
template.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

from webhook.model.nodepools import KafkaNodePoolInfo
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules.homes import Plan, Workload, pool_slots, slots
from webhook.rules.placement import shared_zone


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why some nodes cannot be removed, for one workload: its members (named by their pods)
    that would be left no node to run on, those whose volumes pinned to nodes no node left can
    mount (a local volume dies with its node; a zonal one waits for a node of its zone), and
    each zone it holds now and would hold no more, with the members holding it now."""

    workload: Workload
    nowhere: tuple[str, ...] = ()
    unmounted: tuple[str, ...] = ()
    emptied: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Removable(NamedTuple):
    """The nodes removable one at a time, one set removable together (both sorted), and each
    other node (sorted) with what removing it alone would cost each workload it touches."""

    alone: tuple[str, ...]
    together: tuple[str, ...]
    blocked: tuple[tuple[str, tuple[Blocked, ...]], ...] = ()


#: One loss a removal causes: a member (its pod) left ``nowhere`` to run, or whose
#: ``volumes`` no node left can mount; or a ``zone`` the workload holds no more.
Fault = tuple[Literal["nowhere", "volumes", "zone"], str]


def _faults(plan: Plan, removed: Collection[str], *, store: Store) -> Iterator[Fault]:
    """What removing the nodes ``removed`` loses of one workload, as it is found: the members
    first, then the zones (sorted), so that :func:`safe` stops at the first loss."""
    ordinals, key = plan.slots, plan.key
    drained = plan.refill.drained(ordinals, removed) if plan.refill is not None else {}
    before = {s.zone for s in ordinals if s.zone is not None}
    after: set[str | None] = set()
    for index, slot in enumerate(ordinals):
        recreated, homes = drained.get(index, (slot.recreated, slot.homes))
        moved = slot.node in removed
        homeless = (moved or bool(homes)) and homes.issubset(removed)
        if homeless:
            yield "nowhere", slot.pod
        # Its data dies with them (or waits for a node of its zone), homeless or not: the
        # guard counted it.
        local = slot.local or frozenset()
        unmounted = bool(local) and local.issubset(removed)
        if unmounted:
            yield "volumes", slot.pod
        if unmounted or (moved and homeless):
            continue  # drained with nowhere to run, or its volume nowhere: it holds no zone
        if not moved and slot.labelled is not None:
            after.add(shared_zone((n for n in slot.labelled if n not in removed), key, store=store))
        elif not moved:
            after.add(slot.zone)
        elif slot.by_label:
            after.add(shared_zone((h for h in homes if h not in removed), key, store=store))
        else:
            after.add(recreated)
    for zone in sorted(z for z in before if z not in after):
        yield "zone", zone


def safe(plan: Plan, removed: Collection[str], *, store: Store) -> bool:
    """Whether removing the nodes ``removed`` loses no pod and no zone of one workload."""
    return next(_faults(plan, removed, store=store), None) is None


def blocked(plan: Plan, removed: Collection[str], *, store: Store) -> Blocked | None:
    """What removing the nodes ``removed`` would cost one workload, or None: nothing."""
    found: dict[str, list[str]] = {"nowhere": [], "volumes": [], "zone": []}
    for what, name in _faults(plan, removed, store=store):
        found[what].append(name)
    if not any(found.values()):
        return None
    emptied = tuple(
        (zone, tuple(s.pod for s in plan.slots if s.zone == zone)) for zone in found["zone"]
    )
    return Blocked(plan.workload, tuple(found["nowhere"]), tuple(found["volumes"]), emptied)


def removable_nodes(
    store: Store, sets: Iterable[StatefulSetInfo], pools: Iterable[KafkaNodePoolInfo] = ()
) -> Removable:
    """The nodes removable one at a time, one set removable together, and why each other node
    is not: weighing the StatefulSets and Advanced StatefulSets ``sets`` and the KafkaNodePools
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

    # One node at a time, every workload it touches judged in full: a node that cannot go is
    # told of each workload it would cost something.
    costs: list[tuple[str, tuple[Blocked, ...]]] = []
    for name in sorted(store.nodes):
        found = (blocked(plans[i], {name}, store=store) for i in sorted(touching[name]))
        if cost := tuple(each for each in found if each is not None):
            costs.append((name, cost))
    held = {name for name, _ in costs}
    alone = tuple(n for n in sorted(store.nodes) if n not in held)
    together: set[str] = set()
    draining: set[int] = set()  # the pools drained by the nodes of ``together``
    for name in sorted(store.nodes, key=lambda n: (pods_on[n], n)):
        if fits(together | {name}, name, draining):
            together.add(name)
            draining |= drains.get(name, set())
    return Removable(alone, tuple(sorted(together)), tuple(costs))
