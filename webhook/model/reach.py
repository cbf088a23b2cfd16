"""Where each distinct volume affinity of the view reaches, kept by the view. Pure.

Reading one volume's affinity against the nodes visits every node an ``In`` names (a zonal
volume: every node of its zone), far more than the rest of a request. Volumes share few
affinities (100,000 zonal volumes over three zones hold three; a local volume shares its
node's), so the view keeps the reach of each distinct one on the default topology key, worked
out when a volume with a new affinity arrives and again whenever the nodes' labels change
(:class:`webhook.model.store.Store` calls :meth:`Reaches.add`, :meth:`Reaches.remove` and
:meth:`Reaches.refresh`). A request only reads it; a set on another topology key has its
volumes read against the nodes when it asks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from webhook.model import pinning
from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY
from webhook.model.pinning import Nodes, Pinning, Reach


class Reaches:
    """The reach of each distinct volume affinity the view's volumes hold."""

    def __init__(self, pinnings: Iterable[Pinning] = ()) -> None:
        #: How many of the view's volumes hold each affinity (only those that pin something).
        self._holders: Counter[Pinning] = Counter(p for p in pinnings if not p.anywhere)
        self._reach: dict[Pinning, Reach] = {}

    def add(self, held: Pinning, *, view: Nodes) -> None:
        """One more volume holds ``held``: work out its reach if it is new."""
        if held.anywhere:
            return
        self._holders[held] += 1
        if held not in self._reach:
            self._reach[held] = pinning.reach(held, DEFAULT_TOPOLOGY_KEY, view=view)

    def remove(self, held: Pinning) -> None:
        """One volume less holds ``held``: forget it with the last one."""
        if held.anywhere or held not in self._holders:
            return
        self._holders[held] -= 1
        if self._holders[held] <= 0:
            del self._holders[held]
            self._reach.pop(held, None)

    def refresh(self, view: Nodes) -> None:
        """Work every reach out again (the nodes' labels changed)."""
        self._reach = {
            held: pinning.reach(held, DEFAULT_TOPOLOGY_KEY, view=view) for held in self._holders
        }

    def get(self, held: Pinning, topology_key: str, *, view: Nodes) -> Reach:
        """Where a volume holding ``held`` can attach, on ``topology_key``."""
        if held.anywhere:
            return pinning.EVERYWHERE
        if topology_key == DEFAULT_TOPOLOGY_KEY:
            found = self._reach.get(held)
            if found is not None:
                return found
        return pinning.reach(held, topology_key, view=view)
