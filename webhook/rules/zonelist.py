"""Which zone list a StatefulSet or KafkaNodePool keeps, as its messages name it. Pure.

A workload's own ``stszone.io/zones`` decides, else the server's list stands in
(:meth:`webhook.model.store.Store.server_zones`): ``--zones``, else the zones its nodes carry.
"""

from __future__ import annotations

from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY, ZONES, Declared
from webhook.model.store import Store


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
