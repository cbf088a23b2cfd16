"""Visiting ordinals one by one: the one cap, stated once.

``spec.replicas`` is an int32 that a typo can set to two billion; no real StatefulSet has that
many pods. So every check that visits ordinals one by one -- the audit's rows, node removal, the
zone-risk gauges, and on StatefulSet validation the node-ordinal template check and the
zone-change warning -- visits the first :data:`WALK_LIMIT` ordinals of the set and says so in
its output when it stopped short. 1,000 keeps a StatefulSet UPDATE's checks in the
milliseconds on the admission path. A KafkaNodePool's ``spec.replicas`` is an int32 too: the
new node IDs its next pass adds are counted up to the same cap (:mod:`webhook.rules.poolplan`).

The scale-down guard never walks: it answers for any range, ``replicas: 2147483647`` included,
from the ordinals that have a pod, a claim, a pre-bound volume or a labelled node (bounded by
the objects in the view) and the placement rule's arithmetic; property tests compare it with a
brute-force walk (:func:`past_known` bounds how far it looks for a count that keeps every
zone).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

#: Ordinals per StatefulSet any check visits one by one.
WALK_LIMIT: Final = 1_000


def walked(start: int, replicas: int) -> range:
    """The ordinals a check visits one by one: ``[start, start + replicas)``, at most
    :data:`WALK_LIMIT` of them."""
    return range(start, start + min(max(replicas, 0), WALK_LIMIT))


def removed(old: range, new: range) -> list[range]:
    """The ordinals of ``old`` that ``new`` does not keep: those above the new count and, when
    ``ordinals.start`` moved up, those below the new start (two runs)."""
    runs = [range(old.start, min(old.stop, new.start)), range(max(old.start, new.stop), old.stop)]
    return [r for r in runs if len(r)]


def past_known(stop: int, known: Iterable[int], k: int) -> int:
    """One past the first ``k`` places at or above ``stop`` and above every ``known`` one.

    Past every known ordinal a member follows the rule alone, and ``k`` in a row hold every
    zone; with no rule (node-ordinal mode, where the labelled nodes are known ordinals, or no
    zone list) it holds none. Either way a count that keeps every zone, when one does, is found
    below this bound.
    """
    return max(stop, max(known, default=stop) + 1) + k
