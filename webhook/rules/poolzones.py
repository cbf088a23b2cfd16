"""Where the brokers of a Strimzi KafkaNodePool are, and where a new one goes. Pure.

A rule from the node ID alone cannot spread a pool: node IDs are shared by every pool of a
cluster, so one pool may hold only IDs equal mod k. A broker therefore goes where its data is
(a claim bound to a volume of a known zone, or a claim stszone already gave a zone; with
several, a zone every one of them allows; a claim being deleted holds none), else to
the pool's listed zone holding the fewest of its other brokers (ties: the first listed), the
brokers without a known zone -- the new IDs of a scale-up among them -- worked out together,
lowest ID first (:mod:`webhook.rules.poolplan`), so claims created together get the zones they
would get one by one. The operator creates a broker's claims before its pod, so the claim gets
its zone first by this rule, and the pod then follows its claims: claim and pod agree, and a
pod re-created under the same name (a rolling update) returns to its data. Every scale-up adds
each broker to a zone with the fewest, so the pool's zone counts never differ by more than one
after scale-ups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from webhook.errors import Denied
from webhook.model.annotations import (
    DEFAULT_TOPOLOGY_KEY,
    MODE,
    NODE_LABEL,
    POLICY_KEYS,
    SCHEDULER_NAME,
    ZONES,
    Declared,
    InvalidAnnotations,
    parse_annotations,
    template_problems,
)
from webhook.model.nodepools import KafkaNodePoolInfo, PoolPodInfo, node_id_of
from webhook.model.store import Store
from webhook.model.tables import POOL_TABLES
from webhook.rules.policy import POOL_CREATES_RETRIED_BY, require_synced
from webhook.rules.poolplan import Balance, cluster_pools, new_ids
from webhook.rules.zonelist import zone_list, zones_origin


class PoolPolicy(NamedTuple):
    """A KafkaNodePool in the view and its resolved placement policy."""

    pool: KafkaNodePoolInfo
    declared: Declared
    zones: tuple[str, ...]
    #: Why the pool's annotations were unusable, when the caller tolerated it (defaults used).
    malformed: tuple[str, ...] = ()
    #: Where ``zones`` come from, as a refusal names them (:func:`zones_origin`).
    origin: str = ZONES

    @property
    def key(self) -> str:
        return self.declared.topology_key

    def broker(self, node_id: int) -> str:
        """The pod name of a node ID: ``<cluster>-<pool>-<id>``."""
        return f"{self.pool.cluster}-{self.pool.name}-{node_id}"


def pool_policy(
    namespace: str,
    name: str,
    *,
    store: Store,
    tolerate_malformed: bool = False,
    retried_by: str = POOL_CREATES_RETRIED_BY,
) -> PoolPolicy | None:
    """The policy of KafkaNodePool ``namespace/name``; None when the view does not hold it.

    Raises :class:`Denied` while a live view is still loading, and for malformed annotations
    -- unless ``tolerate_malformed`` (a Scale, which cannot change them): then the defaults
    stand in and ``malformed`` says why. ``retried_by``: who sends the refused request again
    (default: the Strimzi operator, which creates the brokers' pods and claims).
    """
    require_synced(
        store,
        what=f"KafkaNodePool {namespace}/{name}",
        also=POOL_TABLES,
        retried_by=retried_by,
    )
    pool = store.nodepool(namespace, name)
    if pool is None:
        return None
    policy = policy_of(pool, store=store)
    if policy.malformed and not tolerate_malformed:
        raise Denied(
            f"KafkaNodePool {namespace}/{name} has malformed stszone annotations: "
            + "; ".join(policy.malformed),
            reason="Invalid",
        )
    return policy


def policy_of(
    pool: KafkaNodePoolInfo,
    *,
    store: Store,
    read: tuple[Declared, tuple[str, ...]] | None = None,
) -> PoolPolicy:
    """The policy ``pool``'s annotations give (the defaults, and why, when malformed);
    ``read``: what :func:`pool_annotations` made of them, when the caller has read them."""
    declared, malformed = (
        read if read is not None else pool_annotations(pool.annotations, store=store)
    )
    origin = zones_origin(declared, store=store)
    return PoolPolicy(pool, declared, zone_list(declared, store=store), malformed, origin)


#: StatefulSet annotations a pool does not read: its brokers are always pinned to a zone by a
#: required node affinity.
_NOT_READ = (MODE, NODE_LABEL, SCHEDULER_NAME)
#: What a pool does read (its misspelt keys' warning lists them).
READ_BY_POOLS = tuple(key for key in POLICY_KEYS if key not in _NOT_READ)
#: The same, for the message that refuses the others.
_POOL_KEYS = ", ".join(READ_BY_POOLS)


def _not_for_pools(annotations: Mapping[str, str]) -> list[str]:
    """The problem of a pool asking for what only a StatefulSet gets (none for the mode its
    brokers get anyway, ``affinity``)."""
    found = [
        f"{key}: {annotations[key]!r}"
        for key in _NOT_READ
        if key in annotations and not (key == MODE and annotations[key] == "affinity")
    ]
    if not found:
        return []
    one = len(found) == 1
    return [
        f"{', '.join(found)} {'does' if one else 'do'} not apply to a KafkaNodePool: its "
        "brokers are pinned to a zone (their pool's share, or their data's) by a required node "
        "affinity, never to a node by label nor to another scheduler; remove "
        f"{'it' if one else 'them'} (a pool takes {_POOL_KEYS})"
    ]


def pool_annotations(
    annotations: Mapping[str, str], *, store: Store
) -> tuple[Declared, tuple[str, ...]]:
    """(the policy, no problems) of a pool's well-formed ``stszone.io/*`` annotations, else
    (the defaults, every problem): how every path reads them (its brokers' pods and claims,
    its ``/scale``, an UPDATE's guard and the check of CREATE and UPDATE), so that what one
    refuses as malformed no other takes. The StatefulSet parsing, with the keys a pool does not
    read refused; a storage-class template is filled in for every zone it will get."""
    problems = _not_for_pools(annotations)
    try:
        # Parsed without them: "node-ordinal needs node-label" would ask for one more.
        declared = parse_annotations(
            {k: v for k, v in annotations.items() if k not in _NOT_READ}, keys=READ_BY_POOLS
        )
    except InvalidAnnotations as err:
        problems += err.problems
    else:
        template = declared.storage_class_template
        if template is not None:
            zones = zone_list(declared, store=store)
            problems += template_problems(template, zones=zones)
    return (Declared(), tuple(problems)) if problems else (declared, ())


def _first_listed(zones: Iterable[str], order: tuple[str, ...]) -> str:
    rank = {z: i for i, z in enumerate(order)}
    return min(zones, key=lambda z: (rank.get(z, len(rank)), z))


def going_away(pod: PoolPodInfo, *, store: Store) -> bool:
    """Whether a broker's pod holds no zone: it is Terminating or has ended, or it is bound to
    a node that no longer exists (PodGC deletes it, and the StrimziPodSet controller re-creates
    it where :func:`choose` says, with its data), as the StatefulSet guard counts such pods."""
    return bool(pod.going) or store.node_gone(pod.node)


def pod_zone(pod: PoolPodInfo, *, store: Store, key: str = DEFAULT_TOPOLOGY_KEY) -> str | None:
    """Where a live pod of a pool is: its node's zone, its own zone label, else the zone
    stszone pinned it to; None when going away (:func:`going_away`) or unknown."""
    if going_away(pod, store=store):
        return None
    if pod.node and (zone := store.node_zone(pod.node, key)):
        return zone
    return pod.zone_label(key) or pod.zone or None


def _data_zones(
    namespace: str, claim: str, *, policy: PoolPolicy, store: Store, uid: str | None = None
) -> frozenset[str]:
    """The zones a claim's data allows: its volume's (a regional disk allows several), else
    the one stszone gave it; none when neither says."""
    volume, zones = store.claim_zones(namespace, claim, policy.key, uid=uid)
    if volume and zones:
        return zones
    info = store.claims.get((namespace, claim))
    if info is not None and info.zone and (uid is None or not info.uid or info.uid == uid):
        return frozenset((info.zone,))
    return frozenset()


def members(namespace: str, policy: PoolPolicy, *, store: Store) -> dict[int, str | None]:
    """Every node ID of the pool (its ``status.nodeIds``, its live pods, its claims) and its
    zone where known: the live pod's, else its data's."""
    pool = policy.pool
    found: dict[int, str | None] = dict.fromkeys(pool.node_ids or (), None)
    for stem in pool.claim_stems():
        for info in store.claims_with_stem(namespace, stem):
            node_id = node_id_of(info.name)
            if node_id is not None and found.get(node_id) is None:
                found[node_id] = data_zone(namespace, node_id, policy=policy, store=store)
    for pod in store.pool_pods(namespace, pool.cluster, pool.name):
        if pod.node_id is None or pod.name != policy.broker(pod.node_id):
            continue
        zone = pod_zone(pod, store=store, key=policy.key)
        if zone is not None:
            found[pod.node_id] = zone
        elif not going_away(pod, store=store):
            found.setdefault(pod.node_id, None)
    return found


class Choice(NamedTuple):
    """A broker's zone and why: "data" (its claims), or "fewest" (the pool's balance)."""

    zone: str
    why: str
    claim: str = ""


def choose(
    namespace: str,
    node_id: int,
    *,
    policy: PoolPolicy,
    store: Store,
    claims: Iterable[str] = (),
    creating: tuple[str, str] | None = None,
    balance: Balance | None = None,
) -> Choice:
    """The zone of broker ``node_id``: where its claims' data is (a zone all of them allow),
    else the fewest.

    ``claims``: its claims by name (a pod's mounted ones; for a claim being created, every
    claim of that ID the view holds); one being deleted holds no data for it (the operator
    makes a new one). ``creating``: (name, uid) of a claim being created. ``balance``: the
    pool's :func:`pool_balance`, when the caller asks of many brokers of the same view.
    """
    if not policy.zones:
        raise Denied(
            f"no zones known for KafkaNodePool {namespace}/{policy.pool.name}: annotate it with "
            '"stszone.io/zones: zone-a,zone-b,zone-c", start stszone with --zones, or label '
            f"nodes with {policy.key}",
            reason="NoZones",
        )
    if (data := _data_choice(namespace, policy, claims, store, creating)) is not None:
        return data
    # Its own zone is what is being chosen: its pod is created anew.
    if balance is None:
        balance = pool_balance(namespace, policy, store=store)
    return Choice(balance.fewest(node_id), "fewest")


def pool_balance(namespace: str, policy: PoolPolicy, *, store: Store) -> Balance:
    """The pool's brokers as its fewest counts them: its members (those a scale-down left
    behind left out) and the IDs the operator's next pass adds."""
    added = new_ids(policy.pool, store=store)
    found = members(namespace, policy, store=store)
    stale = _left_behind(namespace, policy, found, added, store=store)
    found = {i: z for i, z in found.items() if i not in stale}
    return Balance(policy.zones, found, added)


def data_zone(namespace: str, node_id: int, *, policy: PoolPolicy, store: Store) -> str | None:
    """The zone the data of broker ``node_id`` decides (its claims the view holds, as its pod
    mounts them), None when none does. A claim being deleted still counts until it is gone:
    the scale-down guard and the audit count a broker whose pod is Terminating in its data's
    zone."""
    claims = [f"{stem}-{node_id}" for stem in policy.pool.claim_stems()]
    data = _data_choice(namespace, policy, claims, store, None, placing=False)
    return data.zone if data is not None else None


def _data_choice(
    namespace: str,
    policy: PoolPolicy,
    claims: Iterable[str],
    store: Store,
    creating: tuple[str, str] | None,
    *,
    placing: bool = True,
) -> Choice | None:
    """The zone the data of ``claims`` decides (:func:`choose`), None when none does. The pod
    must reach every claim (JBOD volumes): only the zones all of them allow can run it. A claim
    whose zones meet none of the others' is left out (the first ones decide): no zone runs
    that pod, and kube-scheduler says which volume conflicts. ``placing`` (a pod or claim being
    placed) leaves out the claims being deleted."""
    allowed: frozenset[str] | None = None
    first = ""
    for claim in claims:
        uid = creating[1] if creating is not None and creating[0] == claim else None
        held = store.claims.get((namespace, claim))
        if placing and uid is None and held is not None and held.going:
            # The StrimziPodSet controller creates a pod whatever its claims' state: one being
            # deleted is gone once the old pod is, and the operator makes a new, empty one.
            continue
        zones = _data_zones(namespace, claim, policy=policy, store=store, uid=uid)
        if not zones:
            continue
        if allowed is None:
            allowed, first = zones, claim
        elif allowed & zones:
            allowed &= zones
    return None if allowed is None else Choice(_first_listed(allowed, policy.zones), "data", first)


def _left_behind(
    namespace: str,
    policy: PoolPolicy,
    found: dict[int, str | None],
    added: tuple[int, ...],
    *,
    store: Store,
) -> set[int]:
    """IDs of ``found`` known only from claims a scale-down left (``deleteClaim: false``):
    no broker of the pool, so not counted in its balance. Such an ID is another pool's now,
    or, while the view shows the pool's pass (spec.replicas above its IDs), outside both the
    pool's IDs and those the pass adds. A claim of an ID outside a pass the view does not
    show yet may be a sibling being created, so it counts then."""
    pool = policy.pool
    live = {
        p.node_id
        for p in store.pool_pods(namespace, pool.cluster, pool.name)
        if p.node_id is not None and not going_away(p, store=store)
    }
    held = set(pool.node_ids or ()) | set(added) | live
    others = {
        i
        for p in cluster_pools(namespace, pool.cluster, store=store)
        if p.name != pool.name
        for i in p.node_ids or ()
    }
    short = pool.replicas > len(pool.node_ids or ())
    return {i for i in found if i not in held and (i in others or short)}


def id_claims(namespace: str, node_id: int, *, policy: PoolPolicy, store: Store) -> list[str]:
    """The names of the claims of one broker the view holds."""
    return [
        f"{stem}-{node_id}"
        for stem in policy.pool.claim_stems()
        if (namespace, f"{stem}-{node_id}") in store.claims
    ]
