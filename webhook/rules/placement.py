"""The placement rule: ordinal -> zone, and data gravity. Pure functions over a :class:`Store`.

Ordinal ``i`` of a StatefulSet whose ordinals start at ``s`` goes to ``zones[(i - s) mod k]``,
so every prefix of ``k`` or more ordinals covers every zone, and a scale-down (which always
removes the highest ordinals) keeps every zone while ``replicas >= k``. A pod whose claim is
bound to a zone-pinned volume goes where its data is, whatever the rule says: the claims it
mounts decide (``spec.volumes[].persistentVolumeClaim.claimName``), and for a pod not yet made,
the claims its StatefulSet controller names for the ordinal. The set's zones, start and claim
templates come resolved in its :class:`~webhook.rules.policy.Policy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from webhook.errors import Denied
from webhook.model.annotations import ZONE, ZONES
from webhook.model.kruise import rank_zone
from webhook.model.pinning import ABSENT
from webhook.model.store import Store
from webhook.rules.policy import Policy


def rule_zone(ordinal: int, *, zones: tuple[str, ...], start: int = 0) -> str:
    """``zones[(ordinal - start) mod k]``; ``zones`` must not be empty."""
    return zones[(ordinal - start) % len(zones)]


def claim_name(template: str, statefulset: str, ordinal: int) -> str:
    """Name the StatefulSet controller gives the claim of ``template`` for ``ordinal``."""
    return f"{template}-{statefulset}-{ordinal}"


def controller_claims(ordinal: int, *, policy: Policy) -> tuple[str, ...]:
    """The claims the StatefulSet controller makes (and mounts) for ``ordinal``'s pod."""
    return tuple([claim_name(t, policy.statefulset, ordinal) for t in policy.templates])


def policy_zone(ordinal: int, policy: Policy) -> str:
    """The rule's zone for ``ordinal``: ``zones[(ordinal - start) mod k]``, or for an Advanced
    StatefulSet ``zones[rank mod k]`` (:mod:`webhook.model.kruise`); zones must not be empty."""
    if policy.live is not None:
        return rank_zone(ordinal, zones=policy.zones, live=policy.live)
    return rule_zone(ordinal, zones=policy.zones, start=policy.start)


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
