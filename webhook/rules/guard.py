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

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Final, Literal, NamedTuple

from webhook.model.annotations import ALLOW_ZONE_LOSS
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules.placement import Policy, claim_name, rule_zone
from webhook.wire import review
from webhook.wire.review import Outcome

OVERRIDE: Final = f'set {ALLOW_ZONE_LOSS}: "true" on the StatefulSet to force it'

Source = Literal["pod", "volume", "node-label", "rule", "unknown"]


class Located(NamedTuple):
    """The zone of one ordinal and what says so (``detail``: node, volume or pinned nodes).

    A named tuple rather than a frozen dataclass: a scale-down locates every known ordinal,
    and a tuple is built several times faster.
    """

    ordinal: int
    zone: str | None
    source: Source
    detail: str = ""


def volume_zones(
    ordinal: int, *, namespace: str, policy: Policy, store: Store
) -> tuple[str, frozenset[str]]:
    """(volume names, zones) allowed by the volumes bound to the ordinal's claims.

    Several claims intersect (the pod must reach all of them); a local PV pinned by hostname
    counts as its node's zone (``Store.claim_zones``).
    """
    key = policy.declared.topology_key
    names: list[str] = []
    allowed: frozenset[str] | None = None
    for template in policy.templates:
        volume, zones = store.claim_zones(
            namespace, claim_name(template, policy.statefulset, ordinal), key
        )
        if zones:
            names.append(volume)
            allowed = zones if allowed is None else allowed & zones
    return ", ".join(names), allowed or frozenset()


def _pick(zones: frozenset[str], ordinal: int, policy: Policy) -> str:
    # A regional volume allows several zones: prefer the rule's, else the first listed one.
    if policy.zones and rule_zone(ordinal, zones=policy.zones, start=policy.start) in zones:
        return rule_zone(ordinal, zones=policy.zones, start=policy.start)
    order = {z: i for i, z in enumerate(policy.zones)}
    return min(zones, key=lambda z: (order.get(z, len(order)), z))


class Locator:
    """Finds the zone of ordinals of one set: its running pod's node, else its volume, else
    its pin or rule. Built once per set, so locating many ordinals shares the lookups."""

    __slots__ = ("key", "namespace", "nodes", "pods", "policy", "store")

    def __init__(self, *, namespace: str, policy: Policy, store: Store) -> None:
        self.namespace, self.policy, self.store = namespace, policy, store
        self.key = policy.declared.topology_key
        self.pods = store.set_pods(namespace, policy.statefulset).by_name
        self.nodes = store.nodes

    def __call__(self, ordinal: int) -> Located:
        pod = self.pods.get(ordinal)
        if pod is not None and pod.node:
            node = self.nodes.get(pod.node)
            zone = node.labels.get(self.key) if node is not None else None
            if zone:
                return Located(ordinal, zone, "pod", pod.node)
        policy, store = self.policy, self.store
        volume, zones = volume_zones(ordinal, namespace=self.namespace, policy=policy, store=store)
        if zones:
            return Located(ordinal, _pick(zones, ordinal, policy), "volume", volume)
        if policy.declared.mode == "node-ordinal":
            nodes = store.nodes_with_label(policy.declared.node_label or "", str(ordinal))
            pinned = store.zones_of(nodes, self.key)
            if len(pinned) == 1:
                return Located(ordinal, next(iter(pinned)), "node-label", ", ".join(nodes))
            return Located(ordinal, None, "unknown", ", ".join(nodes))
        if policy.zones:
            zone = rule_zone(ordinal, zones=policy.zones, start=policy.start)
            return Located(ordinal, zone, "rule")
        return Located(ordinal, None, "unknown")


def locate(ordinal: int, *, namespace: str, policy: Policy, store: Store) -> Located:
    """The zone of ``ordinal`` (see :class:`Locator`, for many ordinals of one set)."""
    return Locator(namespace=namespace, policy=policy, store=store)(ordinal)


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


#: How many ordinals a message names per zone (and unknown ordinals); the rest are counted.
NAMED: Final = 10
#: Ordinals per StatefulSet the audit visits one by one.
MAX_AUDITED: Final = 10_000


def audited_ordinals(sts: StatefulSetInfo) -> range:
    """The ordinals ``stszone audit`` looks at one by one: all, up to ``MAX_AUDITED``.

    ``replicas`` is an int32 that a typo can set to billions; no real set has that many pods.
    """
    return range(sts.start, sts.start + min(sts.replicas, MAX_AUDITED))


@dataclass(frozen=True, slots=True)
class Holders:
    """The ordinals of a range that hold one zone: the first few, and how many in all."""

    first: tuple[Located, ...]
    count: int


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """What a scale-down does to a StatefulSet's zones."""

    name: str
    old: int
    new: int
    #: Zone -> the removed ordinals that hold it (zones no kept ordinal holds).
    lost: Mapping[str, Holders]
    #: Smallest replica count that keeps every zone the old ordinals held (None: none does).
    lowest: int | None
    #: Ordinals (of old and new) whose zone is unknown: the first few, and how many in all.
    unknown: tuple[int, ...]
    unknown_count: int = 0


class _Ranges:
    """Zones of the ordinals of a set, without visiting every ordinal.

    Only ordinals that have a pod, a claim, a pre-bound volume or a labelled node (the
    *known* ones, located one by one) can differ from the rule; all the others follow
    ``zones[(i - start) mod k]`` (or are unknown when there is no rule), so each question
    about a range is answered by stepping through one residue class and skipping known
    ordinals: bounded by the objects in the view, not by ``replicas`` (which may be 2**31-1).
    """

    def __init__(self, span: range, *, namespace: str, policy: Policy, store: Store) -> None:
        self.policy = policy
        known = store.known_ordinals(namespace, policy.statefulset, templates=policy.templates)
        if policy.declared.mode == "node-ordinal":
            label = policy.declared.node_label or ""
            known |= {int(v) for v in store.label_values(label) if v.isascii() and v.isdigit()}
        where = Locator(namespace=namespace, policy=policy, store=store)
        self.known = {o: where(o) for o in sorted(known) if o in span}
        self.ruled = bool(policy.zones) and policy.declared.mode != "node-ordinal"
        # Sorted ordinals per zone and per place in the rule's cycle: a range's share of each
        # is two bisections, whatever the range.
        self.k = len(policy.zones) or 1
        self.by_zone: dict[str, list[int]] = {}
        self.by_residue: list[list[int]] = [[] for _ in range(self.k)]
        for o, item in self.known.items():
            self.by_residue[o % self.k].append(o)
            if item.zone is not None:
                self.by_zone.setdefault(item.zone, []).append(o)

    def _rule_ordinals(self, r: range, zone: str) -> Iterator[int]:
        """Ordinals of ``r`` that are not known and that the rule puts in ``zone``."""
        zones, start = self.policy.zones, self.policy.start
        first = r.start + (zones.index(zone) - (r.start - start)) % len(zones)
        return (o for o in range(first, r.stop, len(zones)) if o not in self.known)

    def holders(self, r: range) -> dict[str, Holders]:
        """Zone -> the ordinals of ``r`` holding it (first few in order, and the count)."""
        found: dict[str, list[Located]] = {}
        counts: dict[str, int] = {}
        for zone, ordinals in self.by_zone.items():
            lo, hi = bisect_left(ordinals, r.start), bisect_left(ordinals, r.stop)
            if hi > lo:
                found[zone] = [self.known[o] for o in ordinals[lo : min(hi, lo + NAMED)]]
                counts[zone] = hi - lo
        if self.ruled:
            k = self.k
            for index, zone in enumerate(self.policy.zones):
                residue = (index + self.policy.start) % k
                in_r = len(range(r.start + (residue - r.start) % k, r.stop, k))
                same = self.by_residue[residue]
                known_there = bisect_left(same, r.stop) - bisect_left(same, r.start)
                if in_r - known_there <= 0:
                    continue
                ruled = [
                    Located(o, zone, "rule") for o in islice(self._rule_ordinals(r, zone), NAMED)
                ]
                found[zone] = sorted([*found.get(zone, []), *ruled], key=lambda i: i.ordinal)
                counts[zone] = counts.get(zone, 0) + in_r - known_there
        return {z: Holders(tuple(found[z][:NAMED]), counts[z]) for z in sorted(found)}

    def unknown(self, r: range) -> tuple[tuple[int, ...], int]:
        """(first few, count) of the ordinals of ``r`` whose zone is unknown."""
        known_unknown = [o for o, item in self.known.items() if o in r and item.zone is None]
        if self.ruled:
            return tuple(known_unknown[:NAMED]), len(known_unknown)
        others = (o for o in r if o not in self.known)
        first = sorted([*known_unknown, *islice(others, NAMED)])[:NAMED]
        count = len(known_unknown) + len(r) - sum(1 for o in self.known if o in r)
        return tuple(first), count


def scale_down(
    name: str, *, old: range, new: range, namespace: str, policy: Policy, store: Store
) -> ScaleDown:
    """Compare the zones of the ``old`` ordinals with those of the ``new`` (kept) ordinals."""
    widest = range(new.start, new.start + max(len(old), len(new)))
    span = range(min(old.start, new.start), max(old.stop, new.stop, widest.stop))
    ranges = _Ranges(span, namespace=namespace, policy=policy, store=store)
    before = ranges.holders(old)
    kept = ranges.holders(new)
    lost = {z: h for z, h in before.items() if z not in kept}
    first_at = {z: h.first[0].ordinal for z, h in ranges.holders(widest).items()}
    lowest = (
        max((first_at[z] - widest.start + 1 for z in before), default=0)
        if all(z in first_at for z in before)
        else None
    )
    if old.start == new.start:
        unknown, unknown_count = ranges.unknown(old if len(old) >= len(new) else new)
    else:  # ordinals.start moved too: old and new may not overlap
        (a, n_a), (b, n_b) = ranges.unknown(old), ranges.unknown(new)
        overlap = range(max(old.start, new.start), min(old.stop, new.stop))
        unknown = tuple(sorted({*a, *b}))[:NAMED]
        unknown_count = n_a + n_b - ranges.unknown(overlap)[1]
    return ScaleDown(
        name=name,
        old=len(old),
        new=len(new),
        lost=lost,
        lowest=lowest,
        unknown=unknown,
        unknown_count=unknown_count,
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


def _zone_phrase(zone: str, holders: Holders) -> str:
    items = holders.first
    named = [str(i.ordinal) for i in items]
    if holders.count > len(items):
        named.append(f"{holders.count - len(items)} more")
    ordinals = _and(named)
    one = holders.count == 1
    notes = list(dict.fromkeys(n for i in items[:3] if (n := _note(i)) is not None))
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
        named = ", ".join(map(str, result.unknown))
        if result.unknown_count > len(result.unknown):
            named += f" and {result.unknown_count - len(result.unknown)} more"
        warnings += (
            f"the zone of ordinal(s) {named} of {result.name} is "
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
