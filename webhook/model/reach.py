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

from collections.abc import Iterable

from webhook.model import pinning
from webhook.model.annotations import DEFAULT_TOPOLOGY_KEY
from webhook.model.pinning import Nodes, Pinning, Reach


class Reaches:
    """The reach of each distinct volume affinity the view's volumes hold.

    Which affinities are held is the Store's index of volumes by affinity: it is built as a
    list's pages are folded (where the loop yields), so swapping 100,000 volumes in never
    hashes each of them again in one stop of the loop.
    """

    def __init__(self, held: Iterable[Pinning] = ()) -> None:
        self._reach: dict[Pinning, Reach] = dict.fromkeys(held, pinning.EVERYWHERE)

    def add(self, held: Pinning, *, view: Nodes) -> None:
        """A volume holds ``held``: work out its reach if it is new."""
        if not held.anywhere and held not in self._reach:
            self._reach[held] = pinning.reach(held, DEFAULT_TOPOLOGY_KEY, view=view)

    def remove(self, held: Pinning) -> None:
        """The last volume holding ``held`` went: forget it."""
        self._reach.pop(held, None)

    def refresh(self, view: Nodes) -> None:
        """Work every reach out again (the nodes' labels changed, or a new list came)."""
        self._reach = {
            held: pinning.reach(held, DEFAULT_TOPOLOGY_KEY, view=view) for held in self._reach
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
