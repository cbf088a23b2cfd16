"""Zones of a set's ordinal ranges, answered without visiting every ordinal. Pure.

The scale-down guard (:mod:`webhook.rules.guard`) compares two ranges of a set's ordinals:
which ordinals of each hold each zone (:class:`Holders`) and which have a zone no fact gives
(:class:`Unknown`). :class:`Ranges` answers both from the few ordinals the view knows of and
the rule's cycle for the rest, so a set of 2**31-1 replicas costs what its objects cost.
Answers name the first :data:`NAMED` ordinals and count the rest.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Final

from webhook.model.setpods import by_residue, by_zone
from webhook.model.store import Store
from webhook.rules.locate import Located, Locator
from webhook.rules.ordinals import past_known
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


class Ranges:
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
