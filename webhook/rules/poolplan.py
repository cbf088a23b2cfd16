"""Which node IDs a pool's next pass adds, and the zones of its brokers taken together. Pure.

The operator creates the claims of a scale-up's new brokers together (PVC-first), so the
webhook may see none of their siblings when it places one: placing each by the zone counts
the view holds at that moment would put them all in the same zone. Instead the zones of all
the pool's brokers are worked out together and the same way whatever the order the requests
come in: the brokers whose zone is known (their pod, their data) count as they are, and the
others, the new IDs the operator is adding included, take the zone with the fewest one at a
time, lowest ID first. Brokers created one after another, lowest first (as the operator
creates them), get exactly the zones they would get one by one. So do brokers whose pods are
created anew (drained off a node, the StrimziPodSet controller re-creates each missing pod
in the order of its node IDs): :class:`Balance` places them with the others.

The new IDs are those the operator's node-ID assignor hands out in its next pass: the pools
of the cluster in name order (the order the API lists them); a pool short of
``spec.replicas`` takes the unused IDs of its ``strimzi.io/next-node-ids`` first, then the
lowest ID no pool uses. A pool short of more than :data:`~webhook.rules.ordinals.WALK_LIMIT`
brokers (``spec.replicas`` is an int32 a typo can set to two billion) has its first
``WALK_LIMIT`` new IDs counted, as every check visits that many members at most: placing one
broker never walks two billion IDs, and no real pass adds thousands.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping

from webhook.model.nodepools import NEXT_NODE_IDS, KafkaNodePoolInfo, parse_node_ids
from webhook.model.store import Store
from webhook.rules.ordinals import WALK_LIMIT


def _candidates(annotation: str | None) -> Iterator[int]:
    """The IDs of ``next-node-ids`` in order (nothing when absent or unreadable)."""
    items = parse_node_ids(annotation) if annotation is not None else None
    for first, last in items or ():
        step = 1 if last >= first else -1
        yield from range(first, last + step, step)


def _take(count: int, in_use: set[int], annotation: str | None) -> list[int]:
    added: list[int] = []
    wanted = _candidates(annotation)
    lowest = 0
    while len(added) < count:
        # Each candidate is looked at once; a candidate in use is skipped, so this ends after
        # at most count + len(in_use) candidates of a (possibly huge) range.
        chosen = next((i for i in wanted if i not in in_use), None)
        if chosen is None:
            while lowest in in_use:
                lowest += 1
            chosen = lowest
        in_use.add(chosen)
        added.append(chosen)
    return added


def cluster_pools(namespace: str, cluster: str, *, store: Store) -> list[KafkaNodePoolInfo]:
    """The KafkaNodePools of Kafka cluster ``cluster`` in ``namespace``, in name order (the
    order the API lists them, in which the operator's node-ID assignor takes them)."""
    return sorted(
        (p for p in store.nodepools.values() if p.namespace == namespace and p.cluster == cluster),
        key=lambda p: p.name,
    )


def new_ids(pool: KafkaNodePoolInfo, *, store: Store) -> tuple[int, ...]:
    """The IDs the operator's next pass adds to ``pool`` (none when it is not short)."""
    pools = cluster_pools(pool.namespace, pool.cluster, store=store)
    in_use = {i for p in pools for i in p.node_ids or ()}
    for each in pools:
        short = min(each.replicas - len(each.node_ids or ()), WALK_LIMIT)
        added = _take(short, in_use, each.annotations.get(NEXT_NODE_IDS)) if short > 0 else []
        if each.name == pool.name:
            return tuple(added)
    return ()


class Balance:
    """A pool's brokers as the fewest counts them: each listed zone's brokers of known zone,
    and the IDs with none (the new IDs the operator is adding among them), worked out once and
    asked for any brokers whose pods are created anew."""

    __slots__ = ("_counts", "_known", "_order", "_unplaced", "zones")

    def __init__(
        self, zones: tuple[str, ...], known: Mapping[int, str | None], ids: Iterable[int]
    ) -> None:
        """``known``: the counted IDs and their zone where known; ``ids``: every ID to place."""
        self.zones = zones
        self._known = {i: z for i, z in known.items() if z is not None}
        self._counts = dict.fromkeys(zones, 0)
        for zone in self._known.values():
            if zone in self._counts:
                self._counts[zone] += 1
        self._unplaced = {*ids, *known} - self._known.keys()
        self._order = sorted(self._unplaced)

    def fewest(self, node_id: int) -> str:
        """``place({node_id: None})[node_id]``: the zone of one broker whose pod is created
        anew with no data to follow, without placing every other ID (the audit asks it of
        each broker of a pool). ``zones`` must not be empty.

        Placing IDs in turn, each to a zone with the fewest (ties: the first listed), hands
        out each zone's places at its count, then one above, and so on: all the places in the
        order (count, the zone's place in the list). The broker gets the place whose rank is
        the number of IDs with no zone below its own, counted from the pool's counts without
        the zone it held before."""
        counts = dict(self._counts)
        old = self._known.get(node_id)
        if old in counts:
            counts[old] -= 1
        rank = bisect_left(self._order, node_id)

        def below(level: int) -> int:
            """How many places lie under ``level``."""
            return sum(max(level - count, 0) for count in counts.values())

        # below(low) <= rank < below(high): the zone with the fewest has rank + 1 places under
        # its count + rank + 1.
        low = min(counts.values())
        high = low + rank + 1
        while high - low > 1:
            middle = (low + high) // 2
            if below(middle) <= rank:
                low = middle
            else:
                high = middle
        at_low = [zone for zone, count in counts.items() if count <= low]
        return at_low[rank - below(low)]

    def place(self, created: Mapping[int, str | None]) -> dict[int, str]:
        """The zones of the brokers ``created`` (each with its data's zone, or None for the
        fewest) once their pods are created anew, and of every ID with no zone: a data's zone
        as it is, the others to the listed zone with the fewest, lowest ID first, each counted
        before the next (ties: the first listed). The zone a created broker held before no
        longer counts: its pod is gone."""
        counts = dict(self._counts)
        placed = {i: z for i, z in created.items() if z is not None}
        for node_id, zone in created.items():
            old = self._known.get(node_id)
            if old in counts:
                counts[old] -= 1
            if zone in counts:
                counts[zone] += 1
        for node_id in sorted((self._unplaced | created.keys()) - placed.keys()):
            zone = min(self.zones, key=lambda z: counts[z])
            placed[node_id] = zone
            counts[zone] += 1
        return placed
