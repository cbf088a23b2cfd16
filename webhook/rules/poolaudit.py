"""``stszone audit`` of Strimzi KafkaNodePools: each broker's expected and actual zone. Pure.

For each KafkaNodePool in an opted-in namespace (all when opt-in is unknown) and each of its
node IDs (``status.nodeIds``, else those its pods and claims show): the zone its data says
(a claim bound to a volume of a known zone, or the zone stszone gave its claim), its pod's
node and zone, and a status: ``ok``, ``MISPLACED`` (running outside its data's zone),
``pending`` (no node yet), ``no pod``, ``going`` (Terminating, ended, or on a node that no
longer exists) or ``unknown`` (its node has no zone label). Also the pool's zone counts, their
imbalance, and the lowest replica count at which the operator's removal order
(``strimzi.io/remove-node-ids``, then the highest) keeps every zone the pool holds now: the
scale-down guard's own judgement of it.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass

import msgspec

from webhook.errors import Denied
from webhook.model.annotations import misspelt_warnings
from webhook.model.nodepools import REMOVE_NODE_IDS, KafkaNodePoolInfo, removal_order
from webhook.model.store import Store
from webhook.rules.audit import Status
from webhook.rules.auditscope import audited_pools
from webhook.rules.poolguard import judge
from webhook.rules.poolzones import (
    READ_BY_POOLS,
    PoolPolicy,
    data_zone,
    going_away,
    members,
    pool_policy,
)


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """One broker of a pool."""

    node_id: int
    pod: str
    #: The zone its data is in (None: no claim of a known zone).
    expected_zone: str | None
    node: str
    zone: str | None
    status: Status


@dataclass(frozen=True, slots=True)
class PoolReport:
    """The audit of one KafkaNodePool."""

    namespace: str
    name: str
    cluster: str
    zones: tuple[str, ...]
    replicas: int
    rows: tuple[BrokerRow, ...] = ()
    #: Brokers per listed zone (a broker's actual zone, else its data's).
    counts: tuple[tuple[str, int], ...] = ()
    #: None when no replica count keeps every zone held now.
    lowest: int | None = None
    problem: str = ""
    #: Its misspelt ``stszone.io/`` keys, named.
    warnings: tuple[str, ...] = ()

    @property
    def imbalance(self) -> int:
        values = [n for _, n in self.counts]
        return max(values) - min(values) if values else 0

    @property
    def misplaced(self) -> int:
        return sum(r.status == "MISPLACED" for r in self.rows)

    @property
    def has_problems(self) -> bool:
        return bool(self.misplaced or self.problem)


def broker_row(namespace: str, node_id: int, policy: PoolPolicy, store: Store) -> BrokerRow:
    """One broker as the audit sees it: its data's zone, its pod's node and zone, a status."""
    name = policy.broker(node_id)
    expected = data_zone(namespace, node_id, policy=policy, store=store)
    pod = store.poolpods.get((namespace, name))
    if pod is None:
        return BrokerRow(node_id, name, expected, "", None, "no pod")
    if going_away(pod, store=store):
        return BrokerRow(node_id, name, expected, pod.node, None, "going")
    if not pod.node:
        return BrokerRow(node_id, name, expected, "", None, "pending")
    zone = store.node_zone(pod.node, policy.key) or pod.zone_label(policy.key)
    if zone is None:
        return BrokerRow(node_id, name, expected, pod.node, None, "unknown")
    status: Status = "MISPLACED" if expected is not None and zone != expected else "ok"
    return BrokerRow(node_id, name, expected, pod.node, zone, status)


def audit_pool(pool: KafkaNodePoolInfo, *, store: Store) -> PoolReport:
    """The audit of one pool."""
    warned = misspelt_warnings(pool.name, keys=pool.misspelt, known=READ_BY_POOLS)
    base = PoolReport(pool.namespace, pool.name, pool.cluster, (), pool.replicas, warnings=warned)
    try:
        policy = pool_policy(pool.namespace, pool.name, store=store)
    except Denied as err:
        return dataclasses.replace(base, problem=err.message)
    if policy is None:  # pragma: no cover (listed from the same view)
        return base
    where = members(pool.namespace, policy, store=store)
    node_ids = sorted(pool.node_ids if pool.node_ids is not None else where)
    rows = tuple(broker_row(pool.namespace, i, policy, store) for i in node_ids)
    located = {r.node_id: r.zone or where.get(r.node_id) for r in rows if r.status != "going"}
    counts = dict.fromkeys(policy.zones, 0)
    for zone in located.values():
        if zone in counts:
            counts[zone] += 1
    annotation = pool.annotations.get(REMOVE_NODE_IDS)
    # The guard's own judgement of each count, so the audit never names one it refuses.
    judged = policy._replace(pool=msgspec.structs.replace(pool, node_ids=tuple(node_ids)))

    def allowed(replicas: int) -> bool:
        return not judge(judged, where, removal_order(node_ids, replicas, annotation)).refused

    # A higher count removes a prefix of the same removal order, so it loses no zone a lower
    # one keeps: the counts allowed are those from the lowest up, found by bisection (the
    # gauges compute this on every scrape, for pools of any size). 0 is one: a pool whose
    # brokers hold no zone (none yet, or none left) loses none at any count.
    sizes = range(len(node_ids) + 1)
    found = bisect_left(sizes, True, key=allowed)
    lowest = sizes[found] if found < len(sizes) else None
    return PoolReport(
        pool.namespace,
        pool.name,
        pool.cluster,
        policy.zones,
        pool.replicas,
        rows,
        tuple(counts.items()),
        lowest,
        warnings=warned,
    )


def audit_pools(
    store: Store, *, excluded: Collection[str] = (), namespace: str | None = None
) -> tuple[PoolReport, ...]:
    """Audit every opted-in KafkaNodePool of ``store`` (or of one namespace)."""
    pools = audited_pools(store, excluded=excluded, namespace=namespace)
    return tuple(audit_pool(p, store=store) for p in pools)
