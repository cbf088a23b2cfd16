"""Facts in motion that explain a scale-down's answer: pods going away, pods on nodes that are
not Ready. Pure.

The guard counts the ordinal of a pod going away (Terminating, Failed, Succeeded) where its
replacement goes (:mod:`webhook.rules.locate`), and a pod on a node that is not Ready where the
node is. Two findings say what that means to the person scaling:

- **leaving**: a zone the scale-down loses in which a kept ordinal's dying pod (or a pod on a
  node that no longer exists) still sits (the
  zone looks held, and is not: "db-0 is Terminating on node n1 in zone-c; its replacement goes
  to zone-a");
- **unready**: a listed zone that the removed ordinals hold and whose kept holders are all pods
  on nodes that are not Ready: the scale-down relies on those nodes coming back.

Both are bounded by the set's pods in the view, never by the ranges (which may hold two
billion ordinals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from webhook.rules.locate import Located, Locator


def leaving(
    where: Locator,
    located: Callable[[int], Located],
    *,
    new: range,
    lost: set[str],
    named: int,
    gone: Mapping[int, str] | None = None,
) -> dict[str, tuple[Located, ...]]:
    """Lost zone -> the kept ordinals whose pod is going away from it (the first ``named``);
    ``gone``: ordinal -> node, for the pods on nodes that no longer exist (going away too)."""
    found: dict[str, list[Located]] = {}
    if lost:
        pods = where.pods
        for ordinal in sorted({*where.going, *(gone or {})}):
            pod = pods[ordinal]
            if ordinal in new and (sits := where.sits(pod)) in lost:
                assert sits is not None  # in lost, which holds zones only
                found.setdefault(sits, []).append(located(ordinal))
    return {z: tuple(items[:named]) for z, items in sorted(found.items())}


def unready(
    on_unready: Mapping[int, str],
    zone_of: Mapping[int, str | None],
    located: Callable[[int], Located],
    *,
    new: range,
    zones: set[str],
    kept: Mapping[str, tuple[list[int], int]],
    named: int,
) -> dict[str, tuple[Located, ...]]:
    """Zone of ``zones`` -> its kept holders (the first ``named``), when every one of them is a
    pod on a node that is not Ready. ``on_unready``: ordinal -> node of such pods; ``zone_of``:
    the known ordinals' zones; ``kept``: the kept ordinals' holdings, zone -> (first, count)."""
    on: dict[str, list[int]] = {}
    for ordinal in sorted(on_unready):
        zone = zone_of.get(ordinal)
        if zone in zones and ordinal in new:
            assert zone is not None  # in zones, which holds zones only
            on.setdefault(zone, []).append(ordinal)
    return {
        z: tuple([located(o) for o in ordinals[:named]])
        for z, ordinals in sorted(on.items())
        if kept[z][1] == len(ordinals)
    }
