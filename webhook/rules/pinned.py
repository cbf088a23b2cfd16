"""What the volumes of an ordinal's claims say of its zone, for the :class:`Locator
<webhook.rules.locate.Locator>`, node removal and rebalance planning. Pure.

A volume bound to one of its claims pins the ordinal to the zones the volume can attach in (one
pinned to nodes, by hostname or a driver's node key, to those nodes' zones); a claim not bound
yet whose class makes its volume in a recorded zone pins it there too
(:func:`webhook.rules.placement.claim_data`). Several claims intersect: the pod must reach all
of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from webhook.model.store import Store
from webhook.rules.placement import claim_data
from webhook.rules.policy import Policy


class Pinned(NamedTuple):
    """What the volumes bound to an ordinal's claims (and its claims not bound yet, recorded in
    a zone) say of its zone."""

    #: Their names (none when none pins it).
    names: tuple[str, ...]
    #: The zones all of them allow (several claims intersect); empty when none pins it.
    zones: frozenset[str]
    #: Why one of them can attach to no node of a known zone ("" when none is so).
    nowhere: str = ""
    #: Claims with no volume yet whose recorded zone pins it (:func:`claim_data`).
    claims: tuple[str, ...] = ()

    @property
    def volumes(self) -> str:
        """Their names, joined ("" when none pins it)."""
        return ", ".join(self.names)

    @property
    def what(self) -> str:
        """What pins it, in words: "volume pv-1", "volumes pv-1, pv-2", "claim data-db-2 (not
        bound yet)", or both ("" when nothing does)."""
        said = []
        if self.names:
            said.append(f"volume{'s' if len(self.names) > 1 else ''} {self.volumes}")
        if self.claims:
            claims = f"claim{'s' if len(self.claims) > 1 else ''} {', '.join(self.claims)}"
            said.append(f"{claims} (not bound yet)")
        return " and ".join(said)


def volume_zones(
    claims: Sequence[str],
    *,
    namespace: str,
    policy: Policy,
    store: Store,
    recorded: bool = True,
) -> Pinned:
    """What the volumes bound to ``claims`` (an ordinal's) say of where it can run, and with
    ``recorded``, the zones recorded on those not bound yet whose class makes their volume
    there (:func:`claim_data`, as placement reads them).

    Several claims intersect (the pod must reach all of them); a volume pinned to nodes counts
    as their zones, and one that can attach to none makes the ordinal's zone unknown
    (``Store.volume_zones``), as do volumes in zones that do not meet (placement refuses the pod).
    """
    key = policy.declared.topology_key
    names: list[str] = []
    unbound: list[str] = []
    said: list[str] = []
    allowed: frozenset[str] | None = None
    for claim in claims:
        volume, zones, by_record = claim_data(
            claim, namespace=namespace, policy=policy, store=store
        )
        if zones is None:
            return Pinned((volume,), frozenset(), store.volume_nowhere(volume, key))
        if by_record and not recorded:
            continue
        what = f"claim {claim} (not bound yet)" if by_record else f"volume {volume}"
        if zones and allowed is not None and not allowed & zones:
            apart = f"{', '.join(sorted(allowed))} vs {', '.join(sorted(zones))}"
            both = (
                f"volumes {names[-1]} and {volume}"
                if volume and said[-1].startswith("volume ")
                else f"{said[-1]} and {what}"
            )
            why = f"{both} are in different zones ({apart})"
            held = (*names, volume) if volume else tuple(names)
            return Pinned(held, frozenset(), f"{why}; no node can mount both", tuple(unbound))
        if zones:
            (unbound if by_record else names).append(claim if by_record else volume)
            said.append(what)
            allowed = zones if allowed is None else allowed & zones
    return Pinned(tuple(names), allowed or frozenset(), claims=tuple(unbound))
