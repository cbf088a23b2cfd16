"""The scale-down guard: which of the set's zones a scale-down drops, or may drop. Pure.

Kubernetes removes the highest ordinals first, so a scale-down from ``old`` to ``new`` keeps
``[start, start + new)`` and removes the rest. Each ordinal is located by
:mod:`webhook.rules.locate` (facts first; a scheduled pod whose zone no fact gives is
*unknown*). The guard protects the set's zones, the ones in ``stszone.io/zones`` (else the
server's list): a listed zone is

- **lost** when a removed ordinal of known zone holds it and no kept ordinal of known zone does;
- **at risk** when no kept ordinal of known zone holds it and some removed ordinal's zone is
  unknown (that ordinal may be its last pod).

A lost zone with an unknown kept ordinal, or a zone at risk, makes the answer depend on an
unknown zone. Removed ordinals in zones outside the list (pods placed before stszone, a zone
taken off the list) are reported, not protected. The lowest safe replica count is the smallest
count the guard itself would allow, unknown zones included.

A pod going away (or on a node that no longer exists) holds no zone (its ordinal is where its
replacement goes): a lost zone where a kept ordinal's dying pod still sits names that pod. A
pod on a node that is not Ready still holds its zone, but a listed zone the removed ordinals
hold that is left only to such pods is reported, so the answer can warn of it. While the pod
template binds its pods to a node that does not exist, an ordinal without a running pod holds
no zone and is not unknown (:mod:`webhook.rules.locate`): only running pods hold zones.

A move of ``ordinals.start`` is a scale-down like any other: ``old`` and ``new`` are the two
ranges, and the removed ordinals are those of ``old`` that ``new`` does not keep.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Final, TypeVar

from webhook.model.setpods import by_residue, by_zone
from webhook.model.store import Store
from webhook.rules import motion
from webhook.rules.locate import Located, Locator
from webhook.rules.ordinals import past_known
from webhook.rules.ordinals import removed as removed_ordinals
from webhook.rules.placement import rule_zone
from webhook.rules.policy import Policy

#: How many ordinals a message names per zone (and unknown ordinals); the rest are counted.
NAMED: Final = 10


@dataclass(frozen=True, slots=True)
class Holders:
    """The ordinals of a range that hold one zone: the first few, and how many in all."""

    #: The first few ordinals, in order.
    ordinals: tuple[int, ...]
    count: int
    #: Locates an ordinal of the set (only called for a message: see :attr:`first`).
    where: Callable[[int], Located] = field(compare=False, repr=False)

    @property
    def first(self) -> tuple[Located, ...]:
        """The first few ordinals with where each is and what says so."""
        return tuple(map(self.where, self.ordinals))


@dataclass(frozen=True, slots=True)
class Unknown:
    """Ordinals whose zone is unknown: the first few (each with its reason), and the count."""

    first: tuple[Located, ...] = ()
    count: int = 0


#: No ordinal of unknown zone.
NO_UNKNOWN: Final = Unknown()

H = TypeVar("H")


def zone_loss(
    zones: tuple[str, ...], before: Mapping[str, H], kept: Container[str | None], *, unknown: bool
) -> tuple[set[str], dict[str, H], tuple[str, ...]]:
    """(listed, lost, at risk): the one rule of the scale-down guards of sets, Advanced
    StatefulSets and pools. A listed zone ``before`` holds (zone -> members to name) is lost
    when ``kept`` (the kept members' known zones) lacks it; while a removed member's zone is
    ``unknown``, any other listed zone ``kept`` lacks is at risk. Listed: ``zones``, else (no
    list) the zones ``before`` holds."""
    listed = set(zones) or set(before)
    lost = {z: h for z, h in before.items() if z in listed and z not in kept}
    at_risk = tuple(z for z in zones if z not in kept and z not in lost) if unknown else ()
    return listed, lost, at_risk


@dataclass(frozen=True, slots=True)
class ScaleDown:
    """What a scale-down does to a StatefulSet's zones."""

    name: str
    old: int
    new: int
    #: The zones the guard protects (the set's list); empty when there is no list at all.
    zones: tuple[str, ...]
    #: Listed zone -> the removed ordinals that hold it (no kept ordinal of known zone does).
    lost: Mapping[str, Holders]
    #: Listed zones no kept ordinal of known zone holds, that an unknown removed one may hold.
    at_risk: tuple[str, ...]
    #: Zone outside the list -> the removed ordinals in it.
    unlisted: Mapping[str, Holders]
    unknown_removed: Unknown
    unknown_kept: Unknown
    #: Smallest replica count the guard allows (None: none up to the old count does; when the
    #: start or the reserved ordinals move, none at all, or it may be above the old count).
    lowest: int | None
    #: Lost zone -> the kept ordinals whose pod, going away, still sits there (the first few).
    leaving: Mapping[str, tuple[Located, ...]] = field(default_factory=dict)
    #: Listed zone the removed ordinals hold -> its kept holders, when all of them are pods on
    #: nodes that are not Ready (the first few).
    unready: Mapping[str, tuple[Located, ...]] = field(default_factory=dict)
    #: ``ordinals.start`` before and after (they differ when the change moves it).
    starts: tuple[int, int] = (0, 0)
    #: What changed, when it is neither the count nor the start alone (an Advanced
    #: StatefulSet's ``reserveOrdinals``): "" lets :attr:`change` say it.
    label: str = ""
    #: The node the pod template binds every pod to, which does not exist ("": none).
    stranded: str = ""

    @property
    def change(self) -> str:
        """``3 -> 2``, or ``ordinals.start 0 -> 1`` (and the replicas, when they change too)."""
        if self.label:
            return self.label
        counts = f"{self.old} -> {self.new}"
        if self.starts[0] == self.starts[1]:
            return counts
        moved = f"ordinals.start {self.starts[0]} -> {self.starts[1]}"
        return moved if self.old == self.new else f"{moved}, replicas {counts}"

    @property
    def depends_on_unknown(self) -> bool:
        """Whether the answer turns on a zone no fact gives."""
        if self.at_risk or (self.lost and self.unknown_kept.count):
            return True
        return not self.zones and self.unknown_removed.count > 0

    @property
    def refused(self) -> bool:
        """Whether the guard refuses it (before ``allow-zone-loss`` is considered)."""
        return bool(self.lost) or self.depends_on_unknown


class _Ranges:
    """Zones of the ordinals of a set, without visiting every ordinal.

    Only ordinals that have a pod, a claim, a pre-bound volume or a labelled node (the
    *known* ones, located one by one) can differ from the rule; all the others follow
    ``zones[(i - start) mod k]`` (or are unknown when there is no rule, or hold no zone when
    the template binds their pods to a missing node), so each question
    about a range is answered by stepping through one residue class and skipping known
    ordinals: bounded by the objects in the view, not by ``replicas`` (which may be 2**31-1).

    Known ordinals are reduced to their zones (:meth:`Locator.zones`); the full
    :class:`Located` (source, node, reason) is only built for the few a message names.
    """

    def __init__(
        self, span: range, *, namespace: str, policy: Policy, store: Store, past: bool = False
    ) -> None:
        self.policy = policy
        known = store.known_ordinals(namespace, policy.statefulset, templates=policy.templates)
        if policy.declared.mode == "node-ordinal":
            label = policy.declared.node_label or ""
            known |= {int(v) for v in store.label_values(label) if v.isascii() and v.isdigit()}
        self.where = Locator(namespace=namespace, policy=policy, store=store)
        self._located: dict[int, Located] = {}
        #: held() of each range asked (a scale-down asks the old range twice).
        self._held: dict[range, dict[str, tuple[list[int], int]]] = {}
        stranded = bool(self.where.stranded)  # members without a running pod hold no zone
        self.ruled = bool(policy.zones) and policy.declared.mode != "node-ordinal" and not stranded
        #: An ordinal the view knows nothing of has a known answer: the rule's zone, or none.
        self.settled = self.ruled or stranded
        self.k = k = len(policy.zones) or 1
        if past:
            span = range(span.start, past_known(span.stop, known, k))
        #: The ordinals asked about (with ``past``, k more than every known one).
        self.span = span
        #: Known ordinal of the span -> its zone (None: unknown), in order.
        self.known: Mapping[int, str | None]
        #: Sorted ordinals per zone, and per place in the rule's cycle (residue mod k): a
        #: range's share of each is two bisections, whatever the range.
        self.by_zone: Mapping[str, list[int]]
        residues: list[list[int]]
        #: Known ordinals of the span whose zone is unknown, sorted.
        self.unknowns: list[int] = []
        running = store.pod_zones(namespace, policy.statefulset, policy.declared.topology_key)
        #: Ordinal -> its node, for the set's pods on nodes that are not Ready, or gone.
        self.unready, self.gone = running.unready, running.gone
        if known == running.zones.keys() and (
            not known or (min(known) in span and max(known) in span)
        ):
            # The usual set: every known ordinal is a running pod on a labelled node, so its
            # zones are the ones Store.pod_zones read off the pods' nodes.
            self.known, self.by_zone, residues = (
                running.zones,
                running.by_zone,
                running.residues(k),
            )
        else:
            inside = sorted(o for o in known if o in span)
            self.known = dict(self.where.zones(inside, running=running.zones))
            self.by_zone, residues = by_zone(self.known), by_residue(self.known, k)
            self.unknowns = [o for o, zone in self.known.items() if zone is None]
        #: The rule's cycle, when there is one: (zone, its residue mod k, the known ordinals
        #: of that residue) for each listed zone.
        self.cycle: list[tuple[str, int, list[int]]] = []
        if self.ruled:
            for index, zone in enumerate(policy.zones):
                residue = (index + policy.start) % k
                self.cycle.append((zone, residue, residues[residue]))

    def located(self, ordinal: int) -> Located:
        """Where ``ordinal`` is, with what says so (built once per ordinal)."""
        item = self._located.get(ordinal)
        if item is None:
            if self.ruled and ordinal not in self.known:  # nothing in the view: the rule's
                policy = self.policy
                zone = rule_zone(ordinal, zones=policy.zones, start=policy.start)
                item = Located(ordinal, zone, "rule")
            else:
                item = self.where(ordinal)
            self._located[ordinal] = item
        return item

    def _rule_ordinals(self, r: range, residue: int) -> Iterator[int]:
        """Ordinals of ``r`` that are not known and that the rule puts in the zone of
        ``residue`` (mod k): taken from the cycle, as looking the zone up in a list of
        thousands, for each of them, costs their square."""
        k = self.k
        first = r.start + (residue - r.start) % k
        return (o for o in range(first, r.stop, k) if o not in self.known)

    def holders(self, r: range) -> dict[str, Holders]:
        """Zone -> the ordinals of ``r`` holding it (first few in order, and the count)."""
        where = self.located
        return {z: Holders(tuple(first), n, where) for z, (first, n) in self.held(r).items()}

    def held(self, r: range) -> dict[str, tuple[list[int], int]]:
        """:meth:`holders` as (first few ordinals, count) pairs, by zone in order (kept per
        range: callers read it, never change it)."""
        kept = self._held.get(r)
        if kept is not None:
            return kept
        found: dict[str, list[int]] = {}
        counts: dict[str, int] = {}
        for zone, ordinals in self.by_zone.items():
            lo = bisect_left(ordinals, r.start)
            hi = bisect_left(ordinals, r.stop, lo)
            if hi > lo:
                found[zone] = ordinals[lo : min(hi, lo + NAMED)]
                counts[zone] = hi - lo
        k = self.k
        for zone, residue, same in self.cycle:
            in_r = len(range(r.start + (residue - r.start) % k, r.stop, k))
            known_there = bisect_left(same, r.stop) - bisect_left(same, r.start)
            if in_r - known_there <= 0:
                continue
            ruled = islice(self._rule_ordinals(r, residue), NAMED)
            found[zone] = sorted([*found.get(zone, ()), *ruled])
            counts[zone] = counts.get(zone, 0) + in_r - known_there
        kept = self._held[r] = {z: (found[z][:NAMED], counts[z]) for z in sorted(found)}
        return kept

    def _unknown_ordinals(self, r: range) -> Iterator[int]:
        """The ordinals of ``r`` whose zone is unknown, in order (lazily: r may be huge)."""
        lo, hi = bisect_left(self.unknowns, r.start), bisect_left(self.unknowns, r.stop)
        if self.settled:
            return iter(self.unknowns[lo:hi])
        # No rule: every ordinal that is not known to have a zone is unknown.
        return (o for o in r if self.known.get(o) is None)

    def unknown(self, r: range) -> Unknown:
        """The ordinals of ``r`` whose zone is unknown, with reasons for the first few."""
        lo, hi = bisect_left(self.unknowns, r.start), bisect_left(self.unknowns, r.stop)
        count = hi - lo
        if self.settled and not count:
            return NO_UNKNOWN
        if not self.settled:
            located = sum(1 for o, zone in self.known.items() if o in r and zone is not None)
            count = len(r) - located
        first = tuple(self.located(o) for o in islice(self._unknown_ordinals(r), NAMED))
        return Unknown(first, count)

    def first_unknown(self, r: range) -> int | None:
        """The lowest ordinal of ``r`` whose zone is unknown (None when there is none)."""
        return next(self._unknown_ordinals(r), None)

    def last_unknown(self, r: range) -> int | None:
        """The highest ordinal of ``r`` whose zone is unknown (None when there is none)."""
        if self.settled:
            lo, hi = bisect_left(self.unknowns, r.start), bisect_left(self.unknowns, r.stop)
            return self.unknowns[hi - 1] if hi > lo else None
        backwards = range(r.stop - 1, r.start - 1, -1)
        return next((o for o in backwards if self.known.get(o) is None), None)


def _merged(
    parts: Iterable[dict[str, tuple[list[int], int]]], where: Callable[[int], Located]
) -> dict[str, Holders]:
    merged: dict[str, tuple[list[int], int]] = {}
    for part in parts:
        for zone, (first, count) in part.items():
            if zone in merged:
                earlier, before = merged[zone]
                first, count = sorted([*earlier, *first])[:NAMED], before + count
            merged[zone] = (first, count)
    return {z: Holders(tuple(first), n, where) for z, (first, n) in sorted(merged.items())}


def _joined(parts: list[Unknown]) -> Unknown:
    first = sorted((i for u in parts for i in u.first), key=lambda i: i.ordinal)
    return Unknown(tuple(first[:NAMED]), sum(u.count for u in parts))


def scale_down(
    name: str, *, old: range, new: range, namespace: str, policy: Policy, store: Store
) -> ScaleDown:
    """Compare the zones of the ``old`` ordinals with those of the ``new`` (kept) ordinals."""
    widest = range(new.start, new.start + max(len(old), len(new)))
    span = range(min(old.start, new.start), max(old.stop, new.stop, widest.stop))
    # A move of the start re-deals every zone, so the count that keeps them all may be above
    # the old one (0..2 on a, b, c moved to 1..3 keeps a only with ordinal 4): look past it.
    moved = old.start != new.start
    ranges = _Ranges(span, namespace=namespace, policy=policy, store=store, past=moved)
    if moved:
        widest = range(new.start, ranges.span.stop)
    before, kept = ranges.holders(old), ranges.held(new)
    removed = removed_ordinals(old, new)
    gone = _merged((ranges.held(r) for r in removed), ranges.located)
    unknown_removed = _joined([ranges.unknown(r) for r in removed])
    unknown = bool(unknown_removed.count)
    listed, lost, at_risk = zone_loss(policy.zones, before, kept, unknown=unknown)
    relied = {z for z in gone if z in listed and z in kept}
    return ScaleDown(
        name=name,
        old=len(old),
        new=len(new),
        zones=policy.zones,
        lost=lost,
        at_risk=at_risk,
        unlisted={z: h for z, h in gone.items() if z not in listed},
        unknown_removed=unknown_removed,
        unknown_kept=ranges.unknown(new),
        lowest=_lowest(ranges, old=old, widest=widest, held=set(before) & listed, policy=policy),
        leaving=motion.leaving(
            ranges.where, ranges.located, new=new, lost=set(lost), named=NAMED, gone=ranges.gone
        ),
        unready=motion.unready(
            ranges.unready,
            ranges.known,
            ranges.located,
            new=new,
            zones=relied,
            kept=kept,
            named=NAMED,
        ),
        starts=(old.start, new.start),
        stranded=ranges.where.stranded,
    )


def _lowest(
    ranges: _Ranges, *, old: range, widest: range, held: set[str], policy: Policy
) -> int | None:
    """The smallest ``n`` such that keeping ``widest[:n]`` is allowed.

    Allowed means: every listed zone the old ordinals hold is held by a kept ordinal of known
    zone (``n >= needed``), and either every listed zone is (``n >= full``) or no removed
    ordinal has an unknown zone (``n >= clear``). Each condition only gets easier as ``n``
    grows, so the answer is ``max(needed, min(full, clear))``.
    """
    first_at = {z: first[0] for z, (first, _) in ranges.held(widest).items()}

    def reach(zones: Iterable[str]) -> int | None:
        zones = list(zones)
        if not all(z in first_at for z in zones):
            return None
        return max((first_at[z] - widest.start + 1 for z in zones), default=0)

    needed = reach(held)
    full = reach(policy.zones) if policy.zones else None
    last = ranges.last_unknown(old)
    clear: int | None = 0
    if last is not None:
        below = ranges.first_unknown(range(old.start, min(old.stop, widest.start)))
        clear = None if below is not None or last >= widest.stop else last - widest.start + 1
    options = [n for n in (full, clear) if n is not None]
    if needed is None or not options:
        return None
    return max(needed, min(options))
