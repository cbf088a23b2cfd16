"""The OpenKruise Advanced StatefulSet's live ordinals, written again from its Go for property tests.

Read from openkruise/kruise v1.8.4 (``pkg/util/api/asts.go``, ``pkg/controller/statefulset/
stateful_set_utils.go`` and ``stateful_set_control.go``), not from stszone's code, and imports
nothing of ``webhook``:

- ``spec.reserveOrdinals`` holds integers and ``"a-b"`` strings (both ends included, ``a <= b``;
  Go's ``strconv.Atoi`` reads each end, so ``"+1-3"`` and ``"0003-005"`` are ranges). One entry
  the controller cannot read (``"5"``, ``"3-1"``, ``"1-2-3"``, ``" 1-3"``) makes it drop the
  whole list: no ordinal is reserved then. Negative integers are kept, and reserve nothing live.
- The live ordinals are the first ``replicas`` integers at or above the start that are not
  reserved. The start is ``spec.ordinals.start`` only when kruise-manager runs with the
  ``StatefulSetStartOrdinal`` feature gate (off by default in v1.8.4); else it is 0.
- A change keeps the pods whose ordinals stay live, creates the new live ordinals, and deletes
  every other pod, highest ordinal first (``descendingOrdinal``). Reserving a live ordinal
  deletes that pod and, at the same replicas, adds the next free ordinal above the top.
- A live ordinal whose pod is gone (evicted, deleted) is one :func:`change` creates: the
  controller makes it again under the same name ``<set>-<ordinal>``, with the same claims
  ``<template>-<set>-<ordinal>``, as the ``apps/v1`` controller does. It creates the claims
  first and makes no pod while one of them is being deleted (``createPersistentVolumeClaims``
  in ``stateful_pod_control.go``: "pvc ... is to be deleted"); once that claim is gone it
  creates a fresh one, then the pod.

Reserved ordinals are kept as merged intervals, so a range such as ``"0-4000000000"`` costs
nothing to read (the controller itself would loop over it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Go's ``int`` on the 64-bit platforms kruise-manager ships for: ``strconv.Atoi``'s bounds.
GO_INT_MIN = -(2**63)
GO_INT_MAX = 2**63 - 1


def _atoi(text: str) -> int | None:
    """``strconv.Atoi``: an optional sign and ASCII digits within Go's ``int``, else None."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all("0" <= ch <= "9" for ch in digits):
        return None
    value = int(text)
    return value if GO_INT_MIN <= value <= GO_INT_MAX else None


def parse_range(text: str) -> tuple[int, int] | None:
    """``api.ParseRange``: ``(start, end)`` of ``"start-end"``, or None where it returns an error."""
    parts = text.split("-")
    if len(parts) != 2:
        return None
    start, end = _atoi(parts[0]), _atoi(parts[1])
    if start is None or end is None or start > end:
        return None
    return start, end


@dataclass(frozen=True, slots=True)
class Reserved:
    """The reserved ordinals as sorted, disjoint, non-adjacent closed intervals."""

    intervals: tuple[tuple[int, int], ...] = ()

    def __contains__(self, ordinal: object) -> bool:
        return isinstance(ordinal, int) and any(lo <= ordinal <= hi for lo, hi in self.intervals)


def _merged(intervals: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def reserved(entries: Sequence[int | str]) -> Reserved | None:
    """``api.GetReserveOrdinalIntSet``; None (the controller's nil set) when one entry is malformed."""
    intervals: list[tuple[int, int]] = []
    for entry in entries:
        if isinstance(entry, int):
            intervals.append((entry, entry))
            continue
        parsed = parse_range(entry)
        if parsed is None:
            return None
        intervals.append(parsed)
    return Reserved(_merged(intervals))


def live_ordinals(
    replicas: int, *, start: int = 0, reserve: Sequence[int | str] = ()
) -> tuple[int, ...]:
    """The ordinals that have pods once the controller settles, ascending.

    ``start`` is the effective start (see the module docstring); a malformed ``reserve`` reserves
    nothing, as in the controller.
    """
    reservation = reserved(reserve) or Reserved()
    live: list[int] = []
    ordinal = start
    for lo, hi in reservation.intervals:
        if hi < ordinal:
            continue
        if lo > ordinal:
            take = min(replicas - len(live), lo - ordinal)
            live.extend(range(ordinal, ordinal + take))
            if len(live) >= replicas:
                return tuple(live)
        ordinal = hi + 1
    live.extend(range(ordinal, ordinal + replicas - len(live)))
    return tuple(live)


def end_ordinal(replicas: int, *, start: int = 0, reserve: Sequence[int | str] = ()) -> int:
    """``getStatefulSetReplicasRange``'s exclusive end: one above the highest live ordinal."""
    live = live_ordinals(replicas, start=start, reserve=reserve)
    return live[-1] + 1 if live else start


@dataclass(frozen=True, slots=True)
class Change:
    """What the controller does to the pods for a change of ``replicas``/``reserveOrdinals``/start."""

    #: Pods deleted, in the order the controller deletes them (highest ordinal first).
    deleted: tuple[int, ...]
    #: Ordinals that get a new pod, lowest first (the order the controller creates them).
    created: tuple[int, ...]
    #: Pods that stay.
    kept: tuple[int, ...]


def change(existing: Iterable[int], live_after: Iterable[int]) -> Change:
    """The controller's answer to ``live_after`` given the ordinals that have pods now."""
    have = set(existing)
    want = set(live_after)
    return Change(
        deleted=tuple(sorted(have - want, reverse=True)),
        created=tuple(sorted(want - have)),
        kept=tuple(sorted(have & want)),
    )
