"""Pieces of the messages users read: lists that stay short whatever their length. Pure.

Admission warnings should stay under 120 characters (the API server cuts them beyond 256), and a
StatefulSet can have two billion ordinals: every list a message shows is the first few items and
a count of the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

#: Items a warning names before it counts the rest.
SHOWN: Final = 3
#: Live ordinals of an Advanced StatefulSet a heading names (the rest are counted).
LIVE_SHOWN: Final = 5


def joined(items: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def some(items: Sequence[object], count: int, *, shown: int = SHOWN) -> str:
    """``"2, 5 and 7"`` or ``"2, 5, 8 and 41 more"``: the first few of ``count`` items."""
    named = [str(o) for o in items[:shown]]
    if count > len(named):
        named.append(f"{count - len(named)} more")
    return joined(named)


def ordinal_span(first: int, count: int) -> str:
    """``count`` ordinals from ``first``: ``"ordinals 3-5"``, ``"ordinal 3"`` (a range of one
    reads as one ordinal, never ``3-3``), or ``"no members"``."""
    if count <= 0:
        return "no members"
    if count == 1:
        return f"ordinal {first}"
    return f"ordinals {first}-{first + count - 1}"


def live_span(live: Sequence[int], count: int) -> str:
    """The first few of ``count`` live ordinals (an Advanced StatefulSet's, with gaps):
    ``"live ordinals 0, 2 and 4 more"``, ``"live ordinal 2"``, or ``"no members"``."""
    if count <= 0:
        return "no members"
    return f"live ordinal{'s' if count > 1 else ''} {some(live, count, shown=LIVE_SHOWN)}"


def members_span(replicas: int, start: int, live: Sequence[int] | None) -> str:
    """The members a workload's heading names: `` (ordinals 3-5)``, `` (ordinal 3)``, or where
    its ordinals are ``live`` (reserveOrdinals leaves gaps) the first few, `` (live ordinals
    0, 2 and 4 more)``; `` (no members)`` at 0 replicas."""
    return f" ({ordinal_span(start, replicas) if live is None else live_span(live, replicas)})"
