"""The scale-down guard: where each ordinal really is, and which zones a scale-down drops. Pure.

Kubernetes removes the highest ordinals first, so a scale-down from ``old`` to ``new`` keeps
``[start, start + new)`` and removes ``[start + new, start + old)``. The zone of an ordinal is,
in order of trust:

1. where its pod really runs: pod -> node -> the node's zone label;
2. else where its data is: the zone of the PersistentVolume bound to its claim (a local volume
   pinned to a node by hostname counts as that node's zone);
3. else where stszone will put it: the placement rule (affinity and scheduler modes), or, in
   node-ordinal mode, the zone of the node(s) carrying its ordinal label when they share one
   zone. The zone rule is not used in node-ordinal mode: there nothing pins pods to zones.

An ordinal whose zone none of these gives is *unknown*: it neither holds a zone among the
removed ordinals nor covers one among the kept ones, so the guard errs towards refusing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from webhook import review
from webhook.placement import Policy, claim_name, rule_zone
from webhook.review import Outcome
from webhook.spec import ALLOW_ZONE_LOSS
from webhook.state import Store

#: Node label naming the node itself; local PersistentVolumes are pinned with it.
HOSTNAME: Final = "kubernetes.io/hostname"
OVERRIDE: Final = f'set {ALLOW_ZONE_LOSS}: "true" on the StatefulSet to force it'

Source = Literal["pod", "volume", "node-label", "rule", "unknown"]


@dataclass(frozen=True, slots=True)
class Located:
    """The zone of one ordinal and what says so (``detail``: node, volume or pinned nodes)."""

    ordinal: int
    zone: str | None
    source: Source
    detail: str = ""


def volume_zones(
    ordinal: int, *, namespace: str, policy: Policy, store: Store
) -> tuple[str, frozenset[str]]:
    """(volume names, zones) allowed by the volumes bound to the ordinal's claims.

    Several claims intersect (the pod must reach all of them); a volume pinned to a node by
    hostname (a local PV) contributes the zone of that node.
    """
    key = policy.spec.topology_key
    names: list[str] = []
    allowed: frozenset[str] | None = None
    for template in policy.templates:
        volume, zones = store.claim_zones(
            namespace, claim_name(template, policy.statefulset, ordinal), key
        )
        info = store.volume(volume) if volume and not zones else None
        if info is not None:
            hosts = info.zones.get(HOSTNAME, frozenset())
            zones = _zones_of(
                (n for h in hosts for n in store.nodes_with_label(HOSTNAME, h)), key, store
            )
        if zones:
            names.append(volume)
            allowed = zones if allowed is None else allowed & zones
    return ", ".join(names), allowed or frozenset()


def _zones_of(nodes: Iterable[str], key: str, store: Store) -> frozenset[str]:
    return frozenset(z for n in nodes if (z := store.node_zone(n, key)) is not None)


def _pick(zones: frozenset[str], ordinal: int, policy: Policy) -> str:
    # A regional volume allows several zones: prefer the rule's, else the first listed one.
    if policy.zones and rule_zone(ordinal, zones=policy.zones, start=policy.start) in zones:
        return rule_zone(ordinal, zones=policy.zones, start=policy.start)
    order = {z: i for i, z in enumerate(policy.zones)}
    return min(zones, key=lambda z: (order.get(z, len(order)), z))


def locate(ordinal: int, *, namespace: str, policy: Policy, store: Store) -> Located:
    """The zone of ``ordinal``: its running pod's node, else its volume, else its pin or rule."""
    key = policy.spec.topology_key
    pod = store.pod(namespace, f"{policy.statefulset}-{ordinal}")
    if pod is not None and pod.owner == policy.statefulset and pod.node:
        zone = store.node_zone(pod.node, key)
        if zone:
            return Located(ordinal, zone, "pod", pod.node)
    volume, zones = volume_zones(ordinal, namespace=namespace, policy=policy, store=store)
    if zones:
        return Located(ordinal, _pick(zones, ordinal, policy), "volume", volume)
    if policy.spec.mode == "node-ordinal":
        nodes = store.nodes_with_label(policy.spec.node_label or "", str(ordinal))
        pinned = _zones_of(nodes, key, store)
        if len(pinned) == 1:
            return Located(ordinal, next(iter(pinned)), "node-label", ", ".join(nodes))
        return Located(ordinal, None, "unknown", ", ".join(nodes))
    if policy.zones:
        return Located(ordinal, rule_zone(ordinal, zones=policy.zones, start=policy.start), "rule")
    return Located(ordinal, None, "unknown")


def lowest_keeping(located: Iterable[Located], zones: Iterable[str]) -> int | None:
    """Smallest count of the leading ``located`` ordinals that holds every one of ``zones``."""
    needed = set(zones)
    seen: set[str] = set()
    if not needed:
        return 0
    for count, item in enumerate(located, start=1):
        if item.zone is not None:
            seen.add(item.zone)
        if needed <= seen:
            return count
    return None


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """What a scale-down does to a StatefulSet's zones."""

    name: str
    old: int
    new: int
    #: Zone -> the removed ordinals that hold it (zones no kept ordinal holds).
    lost: Mapping[str, tuple[Located, ...]]
    #: Smallest replica count that keeps every zone the old ordinals held (None: none does).
    lowest: int | None
    unknown: tuple[int, ...]


def scale_down(
    name: str, *, old: range, new: range, namespace: str, policy: Policy, store: Store
) -> ScaleDown:
    """Compare the zones of the ``old`` ordinals with those of the ``new`` (kept) ordinals."""
    cache: dict[int, Located] = {}

    def at(ordinal: int) -> Located:
        if ordinal not in cache:
            cache[ordinal] = locate(ordinal, namespace=namespace, policy=policy, store=store)
        return cache[ordinal]

    before = [at(o) for o in old]
    kept = {at(o).zone for o in new} - {None}
    lost: dict[str, list[Located]] = {}
    for item in before:
        if item.zone is not None and item.zone not in kept:
            lost.setdefault(item.zone, []).append(item)
    held = {item.zone for item in before if item.zone is not None}
    widest = range(new.start, new.start + max(len(old), len(new)))
    return ScaleDown(
        name=name,
        old=len(old),
        new=len(new),
        lost={z: tuple(items) for z, items in sorted(lost.items())},
        lowest=lowest_keeping((at(o) for o in widest), held),
        unknown=tuple(o for o in sorted({*old, *new}) if at(o).zone is None),
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _note(item: Located) -> str | None:
    idle = f"ordinal {item.ordinal} is not running but"
    if item.source == "volume":
        return f"{idle} its volume {item.detail} is there"
    if item.source == "node-label":
        return f"{idle} node {item.detail}, pinned to it by label, is there"
    if item.source == "rule":
        return f"{idle} the placement rule puts it there"
    return None


def _zone_phrase(zone: str, items: tuple[Located, ...]) -> str:
    ordinals = _and([str(i.ordinal) for i in items])
    one = len(items) == 1
    notes = [n for i in items if (n := _note(i)) is not None]
    if notes:  # not every holder is a running pod
        held = (
            f"ordinal {ordinals} is the only one there"
            if one
            else (f"ordinals {ordinals} are the only ones there")
        )
    else:
        held = (
            f"ordinal {ordinals} is its only pod"
            if one
            else f"ordinals {ordinals} are its only pods"
        )
    return f"{zone} ({'; '.join([held, *notes])})"


def describe_loss(result: ScaleDown) -> str:
    """``zone zone-c (ordinal 3 is its only pod)``, joined with ``and`` for several zones."""
    noun = "zones" if len(result.lost) > 1 else "zone"
    return f"{noun} {_and([_zone_phrase(z, items) for z, items in result.lost.items()])}"


def _lowest(result: ScaleDown) -> str:
    if result.lowest is None:
        return f"no replica count up to {result.old} keeps every zone"
    return f"the smallest replica count that keeps every zone is {result.lowest}"


def verdict(result: ScaleDown, *, allow_zone_loss: bool) -> Outcome:
    """Deny a scale-down that drops a zone, unless the StatefulSet allows it (then warn)."""
    warnings: tuple[str, ...] = ()
    if result.unknown:
        warnings += (
            f"the zone of ordinal(s) {', '.join(map(str, result.unknown))} of {result.name} is "
            "unknown (no running pod on a node with a zone label, no zone-pinned volume, no "
            "zone list): the scale-down guard counted them in no zone",
        )
    if not result.lost:
        return review.allowed(warnings=warnings)
    what = f"scale-down of {result.name} from {result.old} to {result.new}"
    if allow_zone_loss:
        return review.allowed(
            warnings=(
                *warnings,
                f'{what} drops {describe_loss(result)}; allowed by {ALLOW_ZONE_LOSS}: "true" '
                f"({_lowest(result)}); remove the annotation so the guard protects the next "
                "scale-down",
            )
        )
    return review.denied(
        f"{what} would drop {describe_loss(result)}; {_lowest(result)}; {OVERRIDE}",
        reason="ZoneLoss",
        warnings=warnings,
    )
