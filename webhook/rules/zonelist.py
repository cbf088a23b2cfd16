"""Which zone list a StatefulSet or KafkaNodePool keeps, as its messages name it. Pure.

A workload's own ``stszone.io/zones`` decides, else the server's list stands in
(:meth:`webhook.model.store.Store.server_zones`): ``--zones``, else the zones its nodes carry.
"""

from __future__ import annotations

from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY, ZONES, Declared
from webhook.model.store import Store
from webhook.rules.text import some


def zone_list(declared: Declared, *, store: Store) -> tuple[str, ...]:
    """The zones a set or pool keeps: its ``stszone.io/zones``, else the server's
    (:meth:`Store.server_zones`, for its topology key)."""
    return declared.zones or store.server_zones(declared.topology_key)


def zones_origin(declared: Declared, *, store: Store) -> str:
    """Where a set's or pool's zone list comes from: its ``stszone.io/zones``, else the
    server's (:meth:`Store.server_zones`). Only the zones of that list are protected, so a
    message about them says which list it is: one the workload lacks (or whose annotation is
    malformed) is not its own ``stszone.io/zones``."""
    if declared.zones:
        return ZONES
    if store.zones_override and declared.topology_key == DEFAULT_TOPOLOGY_KEY:
        return "the server's zones (--zones)"
    return f"the nodes' zones ({declared.topology_key})"


def zones_fix(declared: Declared, *, owner: str) -> str:
    """How a user changes the zone list of ``owner`` (``the StatefulSet``, ``the pool``): its
    ``stszone.io/zones``, else, while the server's list stands in (:func:`zones_origin`), one
    of its own -- ``--zones`` and the nodes' labels are every workload's."""
    if declared.zones:
        return f"change its {ZONES}"
    return f"give {owner} {ZONES}"


def spread_warnings(
    name: str,
    replicas: int,
    declared: Declared,
    zones: tuple[str, ...],
    *,
    store: Store,
    ranked: bool,
) -> tuple[str, ...]:
    """The warnings of a set or pool of ``replicas`` members over ``zones``: fewer members than
    zones leave one empty; a listed zone no node is in now makes its members there wait (never
    a denial: a node pool at zero). None of a workload of no member, created so or scaled
    there: it holds no zone, so it empties none, and no pod of it waits for a node.

    ``ranked``: the rule places member ``r`` (counted from the start; an Advanced StatefulSet
    counts its live ordinals only) in ``zones[r mod k]``, so only the first ``min(replicas,
    k)`` zones get a member and only those are named. A pool's brokers go where its pool has
    fewest and stay with their data: which zones its brokers are in depends on the brokers it
    has, so every listed zone without a node is named."""
    if not zones or replicas <= 0:
        return ()
    k = len(zones)
    said: tuple[str, ...] = ()
    if replicas < k:
        said = (
            f"{name}: {replicas} replica(s) for {k} zones leaves a zone empty; "
            f"{k} or more survive the loss of any zone",
        )
    if "nodes" not in store.loaded or not store.nodes:
        return said  # --zones alone, or a saved cluster without Node objects: nothing to judge by
    key = declared.topology_key
    present = set(store.discovered_zones(key))
    placed = zones[:replicas] if ranked else zones
    empty = [z for z in placed if z not in present]
    if not empty:
        return said
    shown = some(empty, len(empty), shown=2)
    return (*said, f"{name}: no node in zone(s) {shown} ({key}) yet; its pods there wait for one")
