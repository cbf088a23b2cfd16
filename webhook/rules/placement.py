"""The placement rule: ordinal -> zone, and data gravity. Pure functions over a :class:`Store`.

Ordinal ``i`` of a StatefulSet whose ordinals start at ``s`` goes to ``zones[(i - s) mod k]``,
so every prefix of ``k`` or more ordinals covers every zone, and a scale-down (which always
removes the highest ordinals) keeps every zone while ``replicas >= k``. A pod whose claim is
bound to a zone-pinned volume goes where its data is, whatever the rule says: the claims it
mounts decide (``spec.volumes[].persistentVolumeClaim.claimName``), and for a pod not yet made,
the claims its StatefulSet controller names for the ordinal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Final, NamedTuple

from webhook.errors import Denied
from webhook.model import setkinds
from webhook.model.annotations import (
    ZONE,
    ZONES,
    Declared,
    read_annotations,
    stszone_annotations,
)
from webhook.model.kruise import Live, rank_zone
from webhook.model.pinning import ABSENT
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.model.tables import Table
from webhook.rules.ordinals import WALK_LIMIT, walked
from webhook.rules.zonelist import zone_list


def rule_zone(ordinal: int, *, zones: tuple[str, ...], start: int = 0) -> str:
    """``zones[(ordinal - start) mod k]``; ``zones`` must not be empty."""
    return zones[(ordinal - start) % len(zones)]


def claim_name(template: str, statefulset: str, ordinal: int) -> str:
    """Name the StatefulSet controller gives the claim of ``template`` for ``ordinal``."""
    return f"{template}-{statefulset}-{ordinal}"


def controller_claims(ordinal: int, *, policy: Policy) -> tuple[str, ...]:
    """The claims the StatefulSet controller makes (and mounts) for ``ordinal``'s pod."""
    return tuple([claim_name(t, policy.statefulset, ordinal) for t in policy.templates])


class Policy(NamedTuple):
    """Everything placement needs to know about one StatefulSet, resolved from all sources.

    Policies and placements are built on every pod request: named tuples, immutable and
    built twice as fast as frozen dataclasses.
    """

    statefulset: str
    declared: Declared
    zones: tuple[str, ...]
    start: int
    templates: tuple[str, ...]
    #: True when the StatefulSet itself was found in the view.
    known: bool
    #: Why the set's annotations were unusable, when the caller tolerated it (defaults used).
    malformed: tuple[str, ...] = ()
    #: The owner's group: "" for ``apps/v1``, ``apps.kruise.io`` for an Advanced StatefulSet.
    group: str = ""
    #: An Advanced StatefulSet's live ordinals: its members are placed by rank, not ordinal.
    live: Live | None = None

    @property
    def kind(self) -> str:
        """How messages name the workload's kind."""
        return workload_kind(self.group)


def workload_kind(group: str) -> str:
    """``StatefulSet``, or ``Advanced StatefulSet`` for ``apps.kruise.io``."""
    return setkinds.KINDS[group].text


def kruise_live(info: StatefulSetInfo, *, store: Store, replicas: int | None = None) -> Live:
    """The live ordinals of an Advanced StatefulSet record (``replicas``: another count)."""
    return Live(
        replicas=info.replicas if replicas is None else replicas,
        start=info.start if store.kruise_start_ordinal else 0,
        reserved=info.reserved,
    )


def walked_members(sts: StatefulSetInfo, *, store: Store) -> Sequence[int]:
    """The members a check visits one by one (:mod:`webhook.rules.ordinals`): the first
    ordinals of a StatefulSet, or the first live ordinals of an Advanced StatefulSet."""
    if not setkinds.KINDS[sts.group].live_ordinals:
        return walked(sts.start, sts.replicas)
    return list(islice(kruise_live(sts, store=store), WALK_LIMIT))


def policy_zone(ordinal: int, policy: Policy) -> str:
    """The rule's zone for ``ordinal``: ``zones[(ordinal - start) mod k]``, or for an Advanced
    StatefulSet ``zones[rank mod k]`` (:mod:`webhook.model.kruise`); zones must not be empty."""
    if policy.live is not None:
        return rank_zone(ordinal, zones=policy.zones, live=policy.live)
    return rule_zone(ordinal, zones=policy.zones, start=policy.start)


#: Who sends a KafkaNodePool's broker pods and claims again after a refusal meant for retry.
POOL_CREATES_RETRIED_BY: Final = "the Strimzi operator retries its creates by itself"
#: Who sends a ``/scale`` again after such a refusal: an HPA (KEDA's too) on its next sync. An
#: UPDATE of the workload names nobody: the HPA writes only ``/scale``, so a person or tool sent it.
SCALES_RETRIED_BY: Final = "an HPA retries its scale by itself"


def require_synced(
    store: Store,
    *,
    what: str,
    retried_by: str,
    also: tuple[Table, ...] = (),
) -> None:
    """Refuse, for retry, while a live view has not listed every resource yet (``retried_by``:
    who retries the refused request, as the refusal tells it; "" when no controller does: a
    workload's creation is sent by a person or a tool, which retries as it does any refusal).

    An object missing from a view still loading proves nothing: placing by the rule without
    the volumes would pin a pod where its data can never be, and a guard without the pods
    would count no zone. Offline views (``--zones``, ``--cluster FILE``) are complete.
    """
    missing = store.unsynced(*also)
    if missing:
        retried = f" ({retried_by})" if retried_by else ""
        raise Denied(
            f"stszone's view of the cluster is still loading ({', '.join(missing)} not listed "
            f"yet), so it cannot judge {what}; retry in a moment{retried}",
            reason="ViewNotSynced",
        )


def resolve_policy(
    namespace: str,
    statefulset: str,
    *,
    store: Store,
    pod_annotations: Mapping[str, str] | None = None,
    pod_claims: tuple[str, ...] = (),
    tolerate_malformed: bool = False,
    group: str = "",
    retried_by: str | None = None,
) -> Policy:
    """Resolve the policy of a StatefulSet from its annotations, else the pod's, else the server.

    Zones come from the StatefulSet's ``stszone.io/zones``, else the pod's own annotation of
    that name (pods inherit the template's annotations, which helps when the set is not in
    the cache yet), else the server's zone source. Raises :class:`Denied` while a live view
    is still loading, and when the annotations are malformed -- unless ``tolerate_malformed``
    (a Scale, which cannot change them): then the defaults stand in and ``malformed`` says why.
    ``retried_by``: who sends the refused request again (default: the set's controller, which
    sends its pods' and claims' creates; :data:`SCALES_RETRIED_BY` for a ``/scale``).
    """
    kind = workload_kind(group)
    if retried_by is None:
        retried_by = setkinds.KINDS[group].creates_retried_by
    require_synced(
        store,
        what=f"{kind} {namespace}/{statefulset}",
        also=(setkinds.KINDS[group].table,),
        retried_by=retried_by,
    )
    sts = store.statefulset(namespace, statefulset, group)
    if sts is None and store.lagging():
        # Placing by defaults would pin the pod for good with a possibly wrong zone list,
        # mode or ordinals.start; the set's controller retries a refused create, the HPA a
        # refused scale.
        raise Denied(
            f"{kind} {namespace}/{statefulset} has not reached stszone's view yet (its "
            f"watch event is usually milliseconds behind its creation); retry in a moment "
            f"({retried_by})",
            reason="StatefulSetNotYetSeen",
        )
    own = stszone_annotations(pod_annotations or {})
    if sts is not None and own.keys() <= sts.annotations.keys():
        # The set's keys win over the pod's: its annotations alone decide, parsed by the view.
        declared, malformed = sts.declared, sts.problems
    else:
        declared, malformed = read_annotations({**own, **(sts.annotations if sts else {})})
    if malformed and not tolerate_malformed:
        raise Denied(
            f"{kind} {namespace}/{statefulset} has malformed stszone annotations: "
            + "; ".join(malformed),
            reason="Invalid",
        )
    zones = zone_list(declared, store=store)
    templates = (
        sts.templates if sts is not None else _templates_from_claims(statefulset, pod_claims)
    )
    live = None
    if setkinds.KINDS[group].live_ordinals:
        live = kruise_live(sts, store=store) if sts is not None else Live(replicas=0)
    return Policy(
        statefulset=statefulset,
        declared=declared,
        zones=zones,
        start=live.start if live is not None else sts.start if sts is not None else 0,
        templates=templates,
        known=sts is not None,
        malformed=malformed,
        group=group,
        live=live,
    )


def _templates_from_claims(statefulset: str, claims: tuple[str, ...]) -> tuple[str, ...]:
    # Without the StatefulSet, a pod volume's claim "<template>-<sts>-<n>" still names the template.
    suffix = re.compile(rf"^(.+)-{re.escape(statefulset)}-[0-9]+$")
    return tuple(m.group(1) for c in claims if (m := suffix.match(c)))


class Placement(NamedTuple):
    """Where an ordinal goes and why."""

    zone: str
    rule_zone: str
    #: Volume that overrode the rule (data gravity), or "".
    volume: str = ""
    claim: str = ""
    warnings: tuple[str, ...] = ()
    #: Why no zone is chosen (``zone`` is ""): a claim's volume can attach to no node of a
    #: known zone, so the pod can run nowhere and pinning it to the rule's zone would be a guess.
    nowhere: str = ""


class ClaimData(NamedTuple):
    """Where a claim's data is, or will be: :func:`claim_data`."""

    #: The volume bound to it (or pre-bound by claimRef), "" when none.
    volume: str
    #: The zones it can be used from: empty for any zone, None for nowhere (it attaches to no
    #: node of a known zone: :meth:`Store.volume_nowhere` of ``volume`` says why).
    zones: frozenset[str] | None
    #: True when ``zones`` is the zone recorded on a claim with no volume yet.
    recorded: bool = False


def claim_data(
    claim: str,
    *,
    namespace: str,
    policy: Policy,
    store: Store,
    creating: tuple[str, str] | None = None,
) -> ClaimData:
    """Where ``claim``'s data is: the zones of its volume; for a claim with no volume yet of a
    set with a ``stszone.io/storage-class-template``, the zone recorded on it (its
    ``stszone.io/zone``), because its class, from the template, makes its volume only there --
    even when the zone list has changed since it was made (by a replica that had not yet seen
    the change, say). Without a template its volume is made where its pod goes: any zone.

    Placement and the locator (the guard, audit, explain, rebalance) both read it here, so a
    pod goes where they count it. ``creating``: (name, uid) of a claim being created, whose
    recorded zone is what is being decided (:func:`place`).
    """
    uid = creating[1] if creating is not None and creating[0] == claim else None
    volume, zones = store.claim_zones(namespace, claim, policy.declared.topology_key, uid=uid)
    if volume or uid is not None or not policy.declared.storage_class_template:
        return ClaimData(volume, zones)
    made = store.claims.get((namespace, claim))
    if made is None or not made.zone:
        return ClaimData(volume, zones)
    return ClaimData(volume, frozenset((made.zone,)), recorded=True)


def place(
    ordinal: int,
    *,
    namespace: str,
    policy: Policy,
    store: Store,
    claims: Sequence[str] | None = None,
    creating: tuple[str, str] | None = None,
    pod: str = "",
) -> Placement:
    """Zone of ``ordinal``: the rule, unless a bound volume pins it elsewhere (data gravity).

    ``claims``: the claims the pod mounts; None for an ordinal whose pod is not at hand (the
    claims its controller names for it). ``pod``: its name, for the messages (by default the
    one its controller gives it). ``creating`` is (name, uid) of a claim being created:
    what the view holds under that name belongs to it only when the uids agree (an earlier
    claim of the same name, deleted, may still be listed, or still hold a volume by claimRef).

    Raises :class:`Denied` when no zone is known at all, or when two claims of the pod are
    bound to volumes in disjoint zones (no node could ever run it). A claim whose volume is
    nowhere (:meth:`Store.volume_zones`) gives no zone and a warning saying why.
    """
    if not policy.zones:
        raise Denied(
            f"no zones known for {policy.kind} {namespace}/{policy.statefulset}: annotate it with "
            f'{ZONES}: "zone-a,zone-b,zone-c", start stszone with --zones, or label nodes with '
            f"{policy.declared.topology_key}",
            reason="NoZones",
        )
    by_rule = policy_zone(ordinal, policy)
    allowed: frozenset[str] | None = None
    pinned_by = ("", "")
    key = policy.declared.topology_key
    pod = pod or f"{policy.statefulset}-{ordinal}"
    for claim in controller_claims(ordinal, policy=policy) if claims is None else claims:
        volume, zones, _ = claim_data(
            claim, namespace=namespace, policy=policy, store=store, creating=creating
        )
        if zones is None:
            why = store.volume_nowhere(volume, key)
            if ABSENT in why:
                warning = (
                    f"{pod} cannot run anywhere: {why} (claim {claim}); stszone leaves it "
                    "unpinned: restore the node, or give the ordinal a new claim"
                )
            else:  # its nodes are there, without a zone: it runs, stszone cannot tell where
                warning = (
                    f"{pod} is in no zone stszone can tell: {why} (claim {claim}); stszone "
                    "leaves it unpinned: label the node(s) with their zone"
                )
            return Placement(
                zone="",
                rule_zone=by_rule,
                volume=volume,
                claim=claim,
                warnings=(warning,),
                nowhere=why,
            )
        if not zones:
            continue
        if allowed is not None and not (allowed & zones):
            raise Denied(
                f"claims {pinned_by[1]} and {claim} of {pod} are bound "
                f"to volumes in different zones ({', '.join(sorted(allowed))} vs "
                f"{', '.join(sorted(zones))}); no node can mount both. Move or re-create one.",
                reason="VolumeZoneConflict",
            )
        allowed = zones if allowed is None else allowed & zones
        pinned_by = (volume, claim)
    if allowed is None or by_rule in allowed:
        return Placement(zone=by_rule, rule_zone=by_rule)
    zone = zone_among(allowed, ordinal, policy)
    volume, claim = pinned_by
    data = f"volume {volume} (claim {claim})" if volume else f"claim {claim} (its {ZONE})"
    warning = f"{pod} follows {data} to {zone}; the rule says {by_rule}"
    return Placement(zone=zone, rule_zone=by_rule, volume=volume, claim=claim, warnings=(warning,))


def zone_among(zones: frozenset[str], ordinal: int, policy: Policy) -> str:
    """The zone an ordinal takes among several its volume allows (a regional disk): the
    rule's when allowed, else the first in the set's list order (then by name)."""
    if policy.zones:
        by_rule = policy_zone(ordinal, policy)
        if by_rule in zones:
            return by_rule
    order = {z: i for i, z in enumerate(policy.zones)}
    return min(zones, key=lambda z: (order.get(z, len(order)), z))


def place_by_mode(
    ordinal: int,
    *,
    namespace: str,
    policy: Policy,
    store: Store,
    claims: Sequence[str] | None = None,
    creating: tuple[str, str] | None = None,
    pod: str = "",
) -> Placement:
    """Where stszone puts ``ordinal`` in its StatefulSet's mode.

    Zone modes: :func:`place` (the rule, or the zone of its data). Node-ordinal mode: the node
    labelled with the ordinal decides, so the zone is the one its node(s) share
    (:func:`shared_zone`), and ``""`` when no node carries the label, they span zones or one
    has no zone label (the rule plays no part there).
    """
    if policy.declared.mode != "node-ordinal":
        return place(
            ordinal,
            namespace=namespace,
            policy=policy,
            store=store,
            claims=claims,
            creating=creating,
            pod=pod,
        )
    nodes = store.nodes_with_label(policy.declared.node_label or "", str(ordinal))
    zone = shared_zone(nodes, policy.declared.topology_key, store=store)
    return Placement(zone=zone or "", rule_zone="")


def shared_zone(nodes: Iterable[str], key: str, *, store: Store) -> str | None:
    """The zone every one of ``nodes`` (those carrying an ordinal's label) is labelled with,
    else None: none of them, nodes in several zones, or one with no zone label. kube-scheduler
    may bind the pod to any of them, so only a zone all of them are in is sure to be its."""
    zones = {store.node_zone(n, key) for n in nodes}
    return zones.pop() if len(zones) == 1 else None
