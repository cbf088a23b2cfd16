"""Which workloads ``stszone audit`` covers: opted-in namespaces, never stszone's own. Pure.

The audit, the zone-risk gauges, node removal and ``stszone rebalance`` pick the StatefulSets,
Advanced StatefulSets and KafkaNodePools they weigh here, so they weigh the same ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from webhook.model.nodepools import KafkaNodePoolInfo
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store


def audited(
    store: Store, *, excluded: Collection[str] = (), namespace: str | None = None
) -> list[StatefulSetInfo]:
    """The StatefulSets to audit: in opted-in namespaces (all when opt-in is unknown), or in
    ``namespace`` only when given.

    Namespaces stszone never intercepts (kube-system, its own) are left out even then.
    """
    return sorted(
        (s for s in scope(store, namespace) if audits(store, s, excluded=excluded)),
        key=lambda s: (*s.key, s.group),
    )


def audited_pools(
    store: Store, *, excluded: Collection[str] = (), namespace: str | None = None
) -> list[KafkaNodePoolInfo]:
    """The KafkaNodePools to audit, by namespace and name: as :func:`audited` picks sets."""
    return sorted(
        (
            p
            for p in store.nodepools.values()
            if (namespace is None or p.namespace == namespace)
            and p.namespace not in excluded
            and store.namespace_enabled(p.namespace) is not False
        ),
        key=lambda p: p.key,
    )


def scope(store: Store, namespace: str | None) -> Iterable[StatefulSetInfo]:
    """The workloads of ``namespace`` (None: of every namespace), audited or not."""
    if namespace is None:
        return [*store.statefulsets.values(), *store.kruisesets.values()]
    return store.workloads_in(namespace)


def audits(store: Store, sts: StatefulSetInfo, *, excluded: Collection[str] = ()) -> bool:
    """Whether :func:`audited` lists ``sts`` (leaving its ``namespace`` argument aside)."""
    return sts.namespace not in excluded and store.namespace_enabled(sts.namespace) is not False
