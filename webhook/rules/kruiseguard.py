"""The scale-down guard for Advanced StatefulSets: live ordinal sets before and after. Pure.

An ``apps/v1`` set's ordinals are a range, and :mod:`webhook.rules.guard` answers for any range
by arithmetic. An Advanced StatefulSet's live ordinals have gaps (``reserveOrdinals``), and a
change of ``reserveOrdinals`` both removes members (the ones it reserves, or the top ones when
the count stays and the list shrinks) and adds others. So this guard compares the two live
sets themselves: the removed members are ``before - after``; a listed zone that ``before``
holds and no member of ``after`` holds is lost. Each member is located as the ``apps/v1`` guard
locates an ordinal (:class:`webhook.rules.locate.Locator`: its pod, else its data, else the
rule), members of ``after`` with the placement of ``after`` (their ranks), removed ones with
that of ``before``. The answer is a :class:`webhook.rules.guard.ScaleDown`, so the verdict,
its wording, ``allow-zone-loss`` and the notices are the ``apps/v1`` guard's.

Sets of more than :data:`LIMIT` members are not walked (no real set has that many pods): the
answer is None and the caller allows with a warning.
"""

from __future__ import annotations

from typing import Final

from webhook.model.kruise import Intervals, Live
from webhook.model.store import Store
from webhook.rules.guard import ScaleDown, zone_loss
from webhook.rules.locate import Located, Locator, missing_node
from webhook.rules.ordinals import past_known
from webhook.rules.placement import policy_zone
from webhook.rules.policy import Policy
from webhook.rules.ranges import NAMED, NO_UNKNOWN, Holders, Unknown

#: Members per side the guard walks; above it, it does not judge.
LIMIT: Final = 100_000


def describe_reserve(reserved: Intervals) -> str:
    """``[1, 4-6]``: merged intervals as ``reserveOrdinals`` would list them."""
    return "[" + ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in reserved) + "]"


class _Members:
    """Zones of the members of one live set, under that set's placement."""

    def __init__(
        self,
        *,
        namespace: str,
        policy: Policy,
        store: Store,
        known: frozenset[int],
        stranded: str,
    ):
        self.policy, self.known = policy, known
        self.locator = Locator(namespace=namespace, policy=policy, store=store, stranded=stranded)
        self.running = store.pod_zones(
            namespace, policy.statefulset, policy.declared.topology_key, policy.group
        ).zones
        # Bound to a missing node by the template, a member without a pod holds none (its pod,
        # when made, never runs: the Locator says so of each): only those with a pod are walked.
        self.pods = self.locator.pods if stranded else None
        self.ruled = bool(policy.zones) and policy.declared.mode != "node-ordinal" and not stranded
        self._located: dict[int, Located] = {}

    def located(self, ordinal: int) -> Located:
        item = self._located.get(ordinal)
        if item is None:
            item = self._located[ordinal] = self.locator(ordinal)
        return item

    def zone(self, ordinal: int) -> str | None:
        found = self.running.get(ordinal)
        if found is not None:
            return found
        if self.pods is not None and ordinal not in self.pods:
            return None  # stranded
        if self.ruled and ordinal not in self.known:  # nothing in the view: the rule's
            return policy_zone(ordinal, self.policy)
        return self.located(ordinal).zone

    def unknown(self, ordinal: int) -> bool:
        """Whether the member's zone is unknown (one that holds none, ``stranded``, is not)."""
        if self.pods is not None and ordinal not in self.pods:
            return False
        return self.zone(ordinal) is None and self.located(ordinal).source == "unknown"

    def walked(self, ordinals: list[int]) -> list[int]:
        """The members of ``ordinals`` that may hold a zone or have an unknown one: all of
        them, or, while the template binds pods to a missing node, those with a pod."""
        if self.pods is None:
            return ordinals
        pods = self.pods
        return [o for o in ordinals if o in pods]


def _holders(ordinals: list[int], members: _Members) -> dict[str, Holders]:
    grouped: dict[str, list[int]] = {}
    for ordinal in members.walked(ordinals):
        zone = members.zone(ordinal)
        if zone is not None:
            grouped.setdefault(zone, []).append(ordinal)
    return {
        z: Holders(tuple(found[:NAMED]), len(found), members.located)
        for z, found in sorted(grouped.items())
    }


def _unknown(ordinals: list[int], members: _Members) -> Unknown:
    found = [o for o in members.walked(ordinals) if members.unknown(o)]
    if not found:
        return NO_UNKNOWN
    return Unknown(tuple(members.located(o) for o in found[:NAMED]), len(found))


def compare(
    name: str,
    *,
    before: Live,
    after: Live,
    namespace: str,
    old_policy: Policy,
    new_policy: Policy,
    store: Store,
    label: str = "",
) -> ScaleDown | None:
    """What going from the live set ``before`` to ``after`` does to the set's zones (None:
    a set too large to walk)."""
    if len(before) > LIMIT or len(after) > LIMIT:
        return None
    known = store.known_ordinals(
        namespace, name, templates=new_policy.templates, group=new_policy.group
    )
    if new_policy.declared.mode == "node-ordinal":
        label_key = new_policy.declared.node_label or ""
        known |= {int(v) for v in store.label_values(label_key) if v.isascii() and v.isdigit()}
    # Read once for both placements: the template, and so the node, is the set's in the view.
    stranded = missing_node(namespace, policy=new_policy, store=store)
    old_members, new_members = (
        _Members(namespace=namespace, policy=p, store=store, known=known, stranded=stranded)
        for p in (old_policy, new_policy)
    )
    old_live, new_live = list(before), list(after)
    kept_set = set(new_live)
    removed = [o for o in old_live if o not in kept_set]
    held_before = _holders(old_live, old_members)
    kept = _holders(new_live, new_members)
    zones = new_policy.zones
    gone = _holders(removed, old_members)
    unknown_removed = _unknown(removed, old_members)
    unknown = bool(unknown_removed.count)
    listed, lost, at_risk = zone_loss(zones, held_before, kept, unknown=unknown)
    return ScaleDown(
        name=name,
        old=len(old_live),
        new=len(new_live),
        zones=zones,
        lost=lost,
        at_risk=at_risk,
        unlisted={z: h for z, h in gone.items() if z not in listed},
        unknown_removed=unknown_removed,
        unknown_kept=_unknown(new_live, new_members),
        lowest=_lowest(
            after,
            old_live=old_live,
            members=new_members,
            old_members=old_members,
            needed=set(held_before) & listed,
            zones=zones,
            moved=(before.reserved, before.start) != (after.reserved, after.start),
        ),
        starts=(before.start, after.start),
        label=label,
        stranded=stranded,
    )


def _lowest(
    after: Live,
    *,
    old_live: list[int],
    members: _Members,
    old_members: _Members,
    needed: set[str],
    zones: tuple[str, ...],
    moved: bool,
) -> int | None:
    """The smallest replica count, with ``after``'s reserved ordinals and start, that the
    guard allows: every listed zone the old members hold is held by a kept member, and either
    every listed zone is or no removed member's zone is unknown."""
    top = max(len(old_live), len(after))
    if moved:
        # New reserved ordinals or a new start re-deal the ranks, so the count that keeps
        # every zone may be above the old one: look past every known member (their ranks).
        top = min(past_known(top, map(after.rank, members.known), len(zones)), LIMIT)
    widest = list(after.resized(top))
    position = {o: i for i, o in enumerate(widest)}
    unknown_old = [o for o in old_members.walked(old_live) if old_members.unknown(o)]
    # The count from which every old member of unknown zone is kept (None: never).
    clear: int | None = 0
    if unknown_old:
        spots = [position.get(o) for o in unknown_old]
        clear = (
            None if any(p is None for p in spots) else max(p for p in spots if p is not None) + 1
        )
    covered: set[str] = set()
    for n in range(top + 1):
        if n:
            ordinal = widest[n - 1]
            # Without a rule only a known member has a zone (in node-ordinal mode the labelled
            # nodes' ordinals are known): the many past them are not located one by one.
            zone = members.zone(ordinal) if members.ruled or ordinal in members.known else None
            if zone is not None:
                covered.add(zone)
        if not needed <= covered:
            continue
        if (zones and set(zones) <= covered) or (clear is not None and n >= clear):
            return n
    return None
