"""``stszone explain`` of Strimzi KafkaNodePools and their brokers' pods. Pure.

For a pool: each broker (node ID) with its zone -- where its data is (a claim bound to a volume
of a known zone, or given a zone by stszone), else where its pod runs, else where stszone
would place it (the pool's fewest) -- the zone the scale-down guard counts it in, the brokers
per zone, and for each smaller replica count the IDs the operator would remove
(``strimzi.io/remove-node-ids`` in order, then the highest) with the guard's answer. For a
broker's pod: its pool and node ID, the zone stszone gives it and why (data gravity, or the
pool's balance), the zone recorded on the pod, where it runs and what the guard counts.

Nothing is worked out here that the webhook works out itself: the zones come from
:mod:`webhook.rules.poolzones` (``choose``, ``members``), the rows from
:mod:`webhook.rules.poolaudit`, and each size's answer from the admission functions of
:mod:`webhook.rules.poolscaling`, called with the request a ``kubectl scale`` (the ``/scale``
subresource) and a ``kubectl apply``/``patch`` of ``spec.replicas`` would send. So explain and
the webhook never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final, Literal

from webhook.errors import Denied
from webhook.model.annotations import SKIP, misspelt_warnings
from webhook.model.nodepools import (
    CLUSTER_LABEL,
    GROUP,
    REMOVE_NODE_IDS,
    VERSIONS,
    KafkaNodePoolInfo,
    format_node_ids,
    node_id_of,
    parse_node_ids,
)
from webhook.model.store import Store
from webhook.rules.decision import Decision, MetadataAnnotation
from webhook.rules.explain_sizes import SIZES, namespace_refusal
from webhook.rules.poolaudit import BrokerRow, broker_row
from webhook.rules.poolguard import counts, order_for
from webhook.rules.poolplan import Balance
from webhook.rules.poolscaling import (
    mutate_pool_update,
    validate_pool_scale,
    validate_pool_update,
)
from webhook.rules.poolzones import (
    READ_BY_POOLS,
    Choice,
    PoolPolicy,
    choose,
    id_claims,
    members,
    pool_balance,
    pool_policy,
)

#: What gave a broker its zone: its data, its pod (where it runs, or was pinned), or the
#: pool's balance (where stszone would place it now).
ZoneBy = Literal["data", "pod", "balance"]
KIND: Final = "KafkaNodePool"


@dataclass(frozen=True, slots=True)
class PoolHead:
    """The pool a broker belongs to."""

    namespace: str
    name: str
    cluster: str
    zones: tuple[str, ...]
    replicas: int
    #: ``status.nodeIds`` (None: the operator has not reconciled the pool yet).
    node_ids: tuple[int, ...] | None
    remove_node_ids: str | None
    #: Its misspelt ``stszone.io/`` keys, named.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker: its zone and what set it, the audit's row, and what the guard counts."""

    node_id: int
    zone: str | None
    zone_by: ZoneBy
    #: The claim whose data gave the zone ("" unless ``zone_by`` is "data").
    claim: str
    row: BrokerRow
    #: The zone the scale-down guard counts it in (None: unknown), and why in words.
    guard_zone: str | None
    guard_why: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The webhook's answer to one request."""

    allowed: bool
    reason: str
    message: str
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PoolSize:
    """The answers to a scale-down to ``replicas``.

    ``removed`` and ``scale``: the IDs the operator removes with the pool as it stands, and the
    answer to ``kubectl scale`` (the ``/scale`` subresource, as an HPA sends it). ``update``:
    the answer to an UPDATE of the pool's ``spec.replicas`` (``kubectl apply``/``patch``),
    after ``/mutate`` wrote ``written`` as ``remove-node-ids`` (None: nothing written).
    """

    replicas: int
    removed: tuple[int, ...]
    scale: Verdict
    update: Verdict
    written: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class PoolExplanation:
    """Each broker, the brokers per zone, and the answers for each smaller size."""

    pool: PoolHead
    brokers: tuple[Broker, ...] = ()
    #: Brokers per zone (the listed zones first, zero included) by each broker's zone.
    counts: tuple[tuple[str, int], ...] = ()
    sizes: tuple[PoolSize, ...] = ()
    unjudged: int = 0
    problem: str = ""
    #: The guard's zone of each broker, where ``problem`` leaves no broker table to read it in.
    guarded: tuple[tuple[int, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerPodExplanation:
    """Where stszone places one broker's pod and why (``left_alone``: why it does not)."""

    namespace: str
    name: str
    pool: PoolHead | None = None
    broker: Broker | None = None
    #: The zone stszone gives the pod when it is created: its data's, else the pool's fewest.
    choice: Choice | None = None
    #: ``stszone.io/zone`` on the pod in the view ("": none, or no pod).
    recorded: str = ""
    left_alone: str = ""


def _head(pool: KafkaNodePoolInfo, policy: PoolPolicy | None) -> PoolHead:
    zones = policy.zones if policy is not None else ()
    return PoolHead(
        pool.namespace,
        pool.name,
        pool.cluster,
        zones,
        pool.replicas,
        pool.node_ids,
        pool.annotations.get(REMOVE_NODE_IDS),
        misspelt_warnings(pool.name, keys=pool.misspelt, known=READ_BY_POOLS),
    )


def _guard_why(row: BrokerRow, zone: str | None, data: Choice) -> str:
    if zone is None:
        return (
            "its zone is unknown (no scheduled pod of a known zone, no data of a known zone): "
            "a scale-down that removes it is refused when a listed zone is then held by no "
            "kept broker"
        )
    if row.node and row.zone == zone and row.status != "going":
        return f"holds {zone} for the scale-down guard (its pod runs there)"
    source = "its data is" if data.why == "data" and data.zone == zone else "stszone pinned it"
    if row.node and row.status != "going":
        return (
            f"holds {zone} for the scale-down guard: its node {row.node} has no zone label, "
            f"{zone} is where {source}"
        )
    return f"not running: the guard counts it in {zone}, where {source}"


def _broker(
    node_id: int,
    *,
    policy: PoolPolicy,
    store: Store,
    where: dict[int, str | None],
    balance: Balance | None = None,
) -> Broker:
    namespace = policy.pool.namespace
    row = broker_row(namespace, node_id, policy, store)
    claims = id_claims(namespace, node_id, policy=policy, store=store)
    chosen = choose(namespace, node_id, policy=policy, store=store, claims=claims, balance=balance)
    guarded = where.get(node_id)
    why = _guard_why(row, guarded, chosen)
    if chosen.why == "data":
        return Broker(node_id, chosen.zone, "data", chosen.claim, row, guarded, why)
    if guarded is not None:
        return Broker(node_id, guarded, "pod", "", row, guarded, why)
    return Broker(node_id, chosen.zone, "balance", "", row, guarded, why)


def _verdict(decided: Decision) -> Verdict:
    return Verdict(decided.allowed, decided.reason, decided.message, tuple(decided.warnings))


def _pool_object(pool: KafkaNodePoolInfo, replicas: int) -> dict[str, Any]:
    """The pool as an UPDATE carries it, with the fields the pool rules read."""
    labels = {CLUSTER_LABEL: pool.cluster} if pool.cluster else {}
    return {
        "apiVersion": f"{GROUP}/{VERSIONS[0]}",
        "kind": KIND,
        "metadata": {
            "name": pool.name,
            "namespace": pool.namespace,
            "uid": pool.uid,
            "labels": labels,
            "annotations": dict(pool.annotations),
        },
        "spec": {"replicas": replicas},
        "status": {} if pool.node_ids is None else {"nodeIds": list(pool.node_ids)},
    }


def _written(decided: Decision) -> tuple[int, ...] | None:
    for change in decided.edits:
        if isinstance(change, MetadataAnnotation) and change.key == REMOVE_NODE_IDS:
            items = parse_node_ids(change.value) or ()
            return tuple(i for first, last in items for i in range(first, last + 1))
    return None


def _size(policy: PoolPolicy, store: Store, replicas: int, *, refused: str = "") -> PoolSize:
    pool = policy.pool
    namespace = pool.namespace
    removed = order_for(policy, replicas, pool.annotations.get(REMOVE_NODE_IDS))
    if refused:  # the namespaceSelector never sends its requests to stszone
        unjudged = Verdict(True, "", "", (f"not judged: {refused}",))
        return PoolSize(replicas, removed, unjudged, unjudged)
    if pool.skipped:  # its writes (the objectSelector) and its /scale are never judged
        unjudged = Verdict(True, "", "", (f"not judged: the {KIND} is labelled {SKIP}=true",))
        return PoolSize(replicas, removed, unjudged, unjudged)
    scale = validate_pool_scale(
        {"spec": {"replicas": replicas}},
        old={"spec": {"replicas": pool.replicas}},
        name=pool.name,
        namespace=namespace,
        store=store,
    )
    old = _pool_object(pool, pool.replicas)
    new = _pool_object(pool, replicas)
    mutated = mutate_pool_update(new, old=old, namespace=namespace, store=store)
    written = _written(mutated)
    if written is not None:
        new["metadata"]["annotations"][REMOVE_NODE_IDS] = format_node_ids(written)
    update = validate_pool_update(new, old=old, namespace=namespace, store=store)
    if mutated.warnings:
        update = update._replace(warnings=tuple(mutated.warnings) + tuple(update.warnings))
    return PoolSize(replicas, removed, _verdict(scale), _verdict(update), written)


def explain_pool(
    store: Store, namespace: str, name: str, *, excluded: Collection[str] = ()
) -> PoolExplanation | None:
    """Each broker of KafkaNodePool ``namespace/name`` and the answers for each smaller size
    (in a namespace stszone never hears from, the API server's: allowed); None when the view
    does not hold it."""
    pool = store.nodepool(namespace, name)
    if pool is None:
        return None
    try:
        policy = pool_policy(namespace, name, store=store)
    except Denied as err:
        return _malformed(pool, err.message, store=store, excluded=excluded)
    if policy is None:  # pragma: no cover - found above in the same view
        return None
    try:
        where = members(namespace, policy, store=store)
        node_ids = sorted(pool.node_ids if pool.node_ids is not None else where)
        # Every broker's fewest is asked of the same view: its counts are worked out once.
        balance = pool_balance(namespace, policy, store=store) if policy.zones else None
        brokers = tuple(
            _broker(i, policy=policy, store=store, where=where, balance=balance) for i in node_ids
        )
        sizes = _sizes(pool, policy, store, excluded)
    except Denied as err:  # no zones known: nothing can be placed
        return PoolExplanation(_head(pool, policy), problem=err.message)
    held = counts(policy.zones, {b.node_id: b.zone for b in brokers}, node_ids)
    return PoolExplanation(
        _head(pool, policy),
        brokers,
        tuple(held.items()),
        sizes,
        max(pool.replicas - SIZES, 0),
    )


def _malformed(
    pool: KafkaNodePoolInfo, problem: str, *, store: Store, excluded: Collection[str]
) -> PoolExplanation:
    """The PROBLEM, then each smaller size's answer when the annotations are malformed: its
    /scale is judged on the defaults all the same. No broker table is drawn from them."""
    head = _head(pool, None)
    try:
        policy = pool_policy(pool.namespace, pool.name, store=store, tolerate_malformed=True)
        if policy is None or not policy.malformed:  # pragma: no cover - the same view
            return PoolExplanation(head, problem=problem)
        where = members(pool.namespace, policy, store=store)
        sizes = _sizes(pool, policy, store, excluded)
    except Denied:  # the view is loading, or no zone is known: nothing is judged
        return PoolExplanation(head, problem=problem)
    unjudged = max(pool.replicas - SIZES, 0)
    guarded = tuple(sorted(where.items()))
    return PoolExplanation(head, sizes=sizes, unjudged=unjudged, problem=problem, guarded=guarded)


def _sizes(
    pool: KafkaNodePoolInfo, policy: PoolPolicy, store: Store, excluded: Collection[str]
) -> tuple[PoolSize, ...]:
    """The answer for each smaller size, nearest first (:data:`SIZES` of them at most)."""
    smaller = range(pool.replicas - 1, max(pool.replicas - 1 - SIZES, -1), -1)
    refused = namespace_refusal(store, pool.namespace, excluded=excluded)
    return tuple(_size(policy, store, n, refused=refused) for n in smaller)


def broker_of(store: Store, namespace: str, name: str) -> tuple[KafkaNodePoolInfo, int] | None:
    """The pool and node ID of broker pod ``name``: a pod of a pool in the view, else a name
    ``<cluster>-<pool>-<id>`` of a pool in the view (a broker whose pod is not there)."""
    pod = store.poolpods.get((namespace, name))
    if pod is not None:
        pool = store.nodepool(namespace, pod.pool)
        if pool is None or pool.cluster != pod.cluster or pod.node_id is None:
            return None
        return (pool, pod.node_id) if name == f"{pod.cluster}-{pod.pool}-{pod.node_id}" else None
    node_id = node_id_of(name)
    if node_id is None:
        return None
    for pool in store.nodepools.values():
        if pool.namespace == namespace and name == f"{pool.cluster}-{pool.name}-{node_id}":
            return pool, node_id
    return None


def explain_broker_pod(
    store: Store, namespace: str, name: str, *, excluded: Collection[str] = ()
) -> BrokerPodExplanation | None:
    """Where broker pod ``namespace/name`` goes and why; None when it is no pool's broker."""
    found = broker_of(store, namespace, name)
    if found is None:
        return None
    pool, node_id = found
    refused = namespace_refusal(store, namespace, excluded=excluded)
    try:
        policy = pool_policy(namespace, pool.name, store=store)
        if policy is None:  # pragma: no cover - found above in the same view
            return None
        pod = store.poolpods.get((namespace, name))
        if pod is not None:
            claims = list(pod.claims)
        else:
            claims = id_claims(namespace, node_id, policy=policy, store=store)
        # The call /mutate makes for this pod: its mounted claims, else the pool's fewest.
        choice = choose(namespace, node_id, policy=policy, store=store, claims=claims)
        where = members(namespace, policy, store=store)
        broker = _broker(node_id, policy=policy, store=store, where=where)
    except Denied as err:
        return BrokerPodExplanation(namespace, name, _head(pool, None), left_alone=err.message)
    recorded = pod.zone if pod is not None else ""
    if pool.node_ids is not None and node_id not in pool.node_ids:
        ids = format_node_ids(pool.node_ids)
        outside = f"not a broker of the pool now (status.nodeIds {ids}): the guard skips it"
        broker = dataclasses.replace(broker, guard_zone=None, guard_why=outside)
    return BrokerPodExplanation(
        namespace, name, _head(pool, policy), broker, choice, recorded, left_alone=refused
    )
