"""OpenKruise Advanced StatefulSets (``apps.kruise.io`` StatefulSet): which ordinals are live. Pure.

An Advanced StatefulSet is an ordinal workload like an ``apps/v1`` StatefulSet (pods
``<set>-<ordinal>``, claims ``<template>-<set>-<ordinal>``), with one difference that matters
here: ``spec.reserveOrdinals``. Its live ordinals are the first ``replicas`` integers at or above
the start that are not reserved, so they can have gaps, and reserving a live ordinal deletes its
pod (the controller then adds the next free ordinal above the top).

- ``reserveOrdinals`` holds integers and ``"a-b"`` strings (both ends included, ``a <= b``, each
  end read as Go's ``strconv.Atoi`` reads it). One entry the controller cannot read makes it
  ignore the whole list: then nothing is reserved.
- The start is ``spec.ordinals.start`` only when kruise-manager runs with its
  ``StatefulSetStartOrdinal`` feature gate (off by default); stszone reads it only when told to
  (``--kruise-start-ordinal``), else the start is 0.

Placement works on a member's **rank**: how many unreserved integers lie between the start and
its ordinal. The rank does not depend on ``replicas``, so scaling up or down never moves a
member; a scale-down removes the highest live ordinals, which are the highest ranks, so ranks
``0..n-1`` stay, exactly as ordinals ``0..n-1`` of an ``apps/v1`` set do.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Final

GROUP: Final = "apps.kruise.io"
KIND: Final = "StatefulSet"
VERSIONS: Final = ("v1beta1", "v1alpha1")
#: The version stszone lists and watches (v1alpha1 has no ``reserveOrdinals`` in its schema).
WATCHED_VERSION: Final = "v1beta1"

#: Go's ``int`` on the 64-bit platforms kruise-manager ships for: ``strconv.Atoi``'s bounds.
_GO_INT_MIN: Final = -(2**63)
_GO_INT_MAX: Final = 2**63 - 1

Intervals = tuple[tuple[int, int], ...]


def _atoi(text: str) -> int | None:
    """An optional sign and ASCII digits within Go's ``int`` (``strconv.Atoi``), else None."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not (body.isascii() and body.isdigit()):
        return None
    value = int(text)
    return value if _GO_INT_MIN <= value <= _GO_INT_MAX else None


def _range(text: str) -> tuple[int, int] | None:
    parts = text.split("-")
    if len(parts) != 2:
        return None
    lo, hi = _atoi(parts[0]), _atoi(parts[1])
    if lo is None or hi is None or lo > hi:
        return None
    return lo, hi


def parse_reserve(entries: object) -> tuple[Intervals, bool]:
    """``spec.reserveOrdinals`` as sorted, merged closed intervals, and whether it was readable.

    Unreadable (one entry neither an integer nor an ``"a-b"`` string the controller reads):
    ``((), False)``, nothing reserved, as the controller does. Absent: ``((), True)``.
    """
    if entries is None:
        return (), True
    if not isinstance(entries, list):
        return (), False
    spans: list[tuple[int, int]] = []
    for entry in entries:
        if isinstance(entry, int) and not isinstance(entry, bool):
            spans.append((entry, entry))
            continue
        parsed = _range(entry) if isinstance(entry, str) else None
        if parsed is None:
            return (), False
        spans.append(parsed)
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged), True


class Live:
    """The live ordinals of an Advanced StatefulSet, and each ordinal's rank."""

    __slots__ = ("_before", "_highs", "_lows", "replicas", "reserved", "start")

    def __init__(self, *, replicas: int, start: int = 0, reserved: Intervals = ()) -> None:
        self.replicas = max(replicas, 0)
        self.start = start
        # Only the reserved ordinals at or above the start shift ranks.
        self.reserved: Intervals = tuple((max(lo, start), hi) for lo, hi in reserved if hi >= start)
        self._lows = [lo for lo, _ in self.reserved]
        self._highs = [hi for _, hi in self.reserved]
        #: Reserved ordinals below each interval (prefix sums).
        before, total = [], 0
        for lo, hi in self.reserved:
            before.append(total)
            total += hi - lo + 1
        self._before = before

    def resized(self, replicas: int) -> Live:
        """The same set at another ``replicas`` (its start and reserved ordinals kept)."""
        return Live(replicas=replicas, start=self.start, reserved=self.reserved)

    def is_reserved(self, ordinal: int) -> bool:
        index = bisect_right(self._lows, ordinal) - 1
        return index >= 0 and ordinal <= self._highs[index]

    def rank(self, ordinal: int) -> int:
        """How many unreserved integers lie in ``[start, ordinal)`` (negative below the start).

        A reserved ordinal has the rank of the next unreserved one (a pod there is going away).
        """
        if ordinal <= self.start:
            return ordinal - self.start
        index = bisect_left(self._lows, ordinal) - 1  # the last interval starting below it
        below = 0
        if index >= 0:
            lo, hi = self.reserved[index]
            below = self._before[index] + min(hi, ordinal - 1) - lo + 1
        return ordinal - self.start - below

    def at(self, rank: int) -> int:
        """The unreserved ordinal of ``rank`` (``rank >= 0``)."""
        ordinal = self.start + rank
        for lo, hi in self.reserved:
            if lo > ordinal:
                break
            ordinal += hi - lo + 1
        return ordinal

    def __len__(self) -> int:
        return self.replicas

    def __iter__(self) -> Iterator[int]:
        """The live ordinals, ascending."""
        ordinal, left = self.start, self.replicas
        for lo, hi in self.reserved:
            if not left:
                return
            if lo > ordinal:
                take = min(left, lo - ordinal)
                yield from range(ordinal, ordinal + take)
                left -= take
            ordinal = max(ordinal, hi + 1)
        yield from range(ordinal, ordinal + left)

    def __contains__(self, ordinal: object) -> bool:
        if not isinstance(ordinal, int) or ordinal < self.start or self.is_reserved(ordinal):
            return False
        return self.rank(ordinal) < self.replicas

    def end(self) -> int:
        """One above the highest live ordinal (the start when there is none)."""
        return self.at(self.replicas - 1) + 1 if self.replicas else self.start


def rank_zone(ordinal: int, *, zones: Sequence[str], live: Live) -> str:
    """``zones[rank mod k]``; ``zones`` must not be empty."""
    return zones[live.rank(ordinal) % len(zones)]
