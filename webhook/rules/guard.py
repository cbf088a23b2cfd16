"""The scale-down guard: which of the set's zones a scale-down drops, or may drop. Pure.

Kubernetes removes the highest ordinals first, so a scale-down from ``old`` to ``new`` keeps
``[start, start + new)`` and removes the rest. Each ordinal is located by
:mod:`webhook.rules.locate` (facts first; a scheduled pod whose zone no fact gives is
*unknown*), and a range's zones are read without visiting every ordinal
(:mod:`webhook.rules.ranges`). The guard protects the set's zones, the ones in
``stszone.io/zones`` (else the server's list): a listed zone is

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

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from webhook.model.store import Store
from webhook.rules import motion
from webhook.rules.locate import Located
from webhook.rules.ordinals import removed as removed_ordinals
from webhook.rules.policy import Policy
from webhook.rules.ranges import NAMED, Holders, Ranges, Unknown

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
    ranges = Ranges(span, namespace=namespace, policy=policy, store=store, past=moved)
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
    ranges: Ranges, *, old: range, widest: range, held: set[str], policy: Policy
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
