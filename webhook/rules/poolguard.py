"""The scale-down guard of KafkaNodePools, and the choice of who leaves. Pure.

The operator removes the IDs of ``strimzi.io/remove-node-ids`` that the pool holds, in the
order listed, then the highest of ``status.nodeIds``. A change that lowers ``spec.replicas``
(an UPDATE or ``kafkanodepools/scale``) or changes that annotation is judged by those IDs:
refused when a zone of ``stszone.io/zones`` (else of the server's zones) that the pool's
brokers hold would be held by none of the kept ones, unless the pool carries
``stszone.io/allow-zone-loss: "true"``.

The choice (:func:`balanced`): from the fullest zones, among equals the highest ID, so that
the zone counts left are as even as they can be and the operator's default order is kept
whenever it is already that even. A zone is known from facts only (the broker's pod, its
data); a broker of unknown zone holds none, and no choice is made while one is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from heapq import heapify, heappop, heappush
from typing import NamedTuple

from webhook.model.nodepools import REMOVE_NODE_IDS, format_node_ids, removal_order
from webhook.rules.guard import zone_loss
from webhook.rules.poolzones import PoolPolicy
from webhook.rules.text import joined, some
from webhook.rules.verdict import force_hint


def counts(
    zones: Sequence[str], where: Mapping[int, str | None], kept: Sequence[int]
) -> dict[str, int]:
    """How many of ``kept`` each zone holds: the listed zones first (zero included)."""
    found = dict.fromkeys(zones, 0)
    for node_id in kept:
        zone = where.get(node_id)
        if zone is not None:
            found[zone] = found.get(zone, 0) + 1
    return found


def imbalance(zones: Sequence[str], where: Mapping[int, str | None], kept: Sequence[int]) -> int:
    """Largest minus smallest count over the listed zones (and any other zone held)."""
    found = counts(zones, where, kept)
    return max(found.values()) - min(found.values()) if found else 0


def balanced(
    node_ids: Sequence[int], where: Mapping[int, str | None], count: int
) -> tuple[int, ...]:
    """``count`` IDs to remove, one at a time from a zone holding the most of those left;
    among those, the highest ID. None of unknown zone is ever chosen while others remain."""
    by_zone: dict[str, list[int]] = {}
    unknown: list[int] = []
    for node_id in sorted(node_ids):
        zone = where.get(node_id)
        (unknown if zone is None else by_zone.setdefault(zone, [])).append(node_id)
    # The zones by (most IDs left, highest ID left): only the zone just taken from changes,
    # so each choice costs a heap step, not a count over every ID left.
    heap = [(-len(ids), -ids[-1], zone) for zone, ids in by_zone.items()]
    heapify(heap)
    chosen: list[int] = []
    while len(chosen) < count and (heap or unknown):
        if not heap:
            chosen.append(unknown.pop())
            continue
        _, _, zone = heappop(heap)
        ids = by_zone[zone]
        chosen.append(ids.pop())
        if ids:
            heappush(heap, (-len(ids), -ids[-1], zone))
    return tuple(chosen)


class Removal(NamedTuple):
    """What a scale-down of a pool removes and which listed zones it leaves empty."""

    removed: tuple[int, ...]
    kept: tuple[int, ...]
    #: Listed zones held now and by none of the kept brokers -> the removed brokers there.
    lost: dict[str, tuple[int, ...]]
    #: Brokers removed whose zone is unknown.
    unknown: tuple[int, ...]
    #: Listed zones no kept broker is known to hold, which a removed broker of unknown zone
    #: may hold: the guard goes by facts, so these may be lost too.
    at_risk: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        """Whether the guard refuses it (before ``allow-zone-loss`` is considered)."""
        return bool(self.lost or self.at_risk)


def judge(policy: PoolPolicy, where: Mapping[int, str | None], removed: Sequence[int]) -> Removal:
    """The zones ``removed`` leaves empty among the pool's current IDs."""
    node_ids = policy.pool.node_ids or ()
    gone = set(removed)
    kept = tuple(i for i in node_ids if i not in gone)
    held_after = {where.get(i) for i in kept}
    # The listed zones the removed brokers hold (one only kept brokers hold is never lost),
    # each with those brokers in the order removed, as the refusal names them. So a pool with
    # no zone list protects no zone, where a StatefulSet protects the zones it holds.
    before: dict[str, tuple[int, ...]] = {}
    for zone in policy.zones:
        if there := tuple(i for i in removed if where.get(i) == zone):
            before[zone] = there
    unknown = tuple(i for i in removed if where.get(i) is None)
    _, lost, at_risk = zone_loss(policy.zones, before, held_after, unknown=bool(unknown))
    return Removal(tuple(removed), kept, lost, unknown, at_risk)


def brokers(policy: PoolPolicy, ids: Sequence[int], where: Mapping[int, str | None]) -> str:
    """``my-cluster-broker-5 (zone-c) and my-cluster-broker-3 (zone-a)``."""
    named = [f"{policy.broker(i)} ({where.get(i) or 'zone unknown'})" for i in ids]
    return some(named, len(named))


def loss_text(policy: PoolPolicy, result: Removal) -> str:
    """``zone zone-c (my-cluster-broker-5 and my-cluster-broker-2 are its only brokers)``."""
    parts = []
    for zone, ids in result.lost.items():
        names = some([policy.broker(i) for i in ids], len(ids))
        parts.append(
            f"{zone} ({names} {'is its only broker' if len(ids) == 1 else 'are its only brokers'})"
        )
    return f"zone{'s' if len(parts) > 1 else ''} {joined(parts)}"


def annotate_command(policy: PoolPolicy, ids: Sequence[int]) -> str:
    """The ``kubectl annotate`` that makes the operator remove ``ids``, in that order."""
    pool = policy.pool
    return (
        f"kubectl annotate kafkanodepool {pool.name} -n {pool.namespace} "
        f"{REMOVE_NODE_IDS}='{format_node_ids(ids)}' --overwrite"
    )


def override(policy: PoolPolicy) -> str:
    """How to force it. While the pool's annotations are malformed, an update that changes
    them (adding allow-zone-loss alone) is refused, and the guard reads none of them: they are
    fixed in the same update that sets allow-zone-loss."""
    return force_hint(f"KafkaNodePool {policy.pool.name}", policy.malformed)


def denial(policy: PoolPolicy, result: Removal, *, change: str) -> str:
    """The message of a refused pool scale-down."""
    removed = some([policy.broker(i) for i in result.removed], len(result.removed))
    parts = [f"would drop {loss_text(policy, result)} of {policy.origin}"] if result.lost else []
    if result.at_risk:
        zones = joined(list(result.at_risk))
        unknown = some([policy.broker(i) for i in result.unknown], len(result.unknown))
        parts.append(
            f"may drop zone{'s' if len(result.at_risk) > 1 else ''} {zones}, which no kept "
            f"broker is known to hold: the zone of {unknown} is unknown (no scheduled pod, "
            "no volume of a known zone)"
        )
    return (
        f"{change} of KafkaNodePool {policy.pool.name} removes {removed} and {'; and '.join(parts)}"
    )


def order_for(policy: PoolPolicy, replicas: int, annotation: str | None) -> tuple[int, ...]:
    """The IDs the operator removes at ``replicas`` with ``annotation``, in order."""
    return removal_order(policy.pool.node_ids or (), replicas, annotation)
