"""The claims a scale-down deletes, under ``persistentVolumeClaimRetentionPolicy.whenScaled:
Delete``. Pure.

With that policy the StatefulSet controller deletes the claims of the ordinals a scale-down
removes (a move of ``spec.ordinals.start`` removes ordinals too) once their pods are gone, and
a volume whose reclaim policy is Delete goes with its claim, data and all. A scale-down the
guard allows says so: which claims go (a count past a few), and whether their data goes too.
Only claims the view holds are named: an ordinal without one has nothing to delete.

kruise-manager does the same for an Advanced StatefulSet, to every member that leaves its live
ordinals: those above the new count and those newly reserved (``podInOrdinalRange`` in its
``stateful_set_utils.go``), so its changes are said alike, from the live sets before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from webhook.model import notices
from webhook.model.kruise import Live
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules.decision import Decision
from webhook.rules.ordinals import removed as removed_ordinals
from webhook.rules.placement import claim_name
from webhook.rules.text import some

#: The field, as a user finds it in the StatefulSet.
POLICY = "persistentVolumeClaimRetentionPolicy.whenScaled: Delete"


class Found(NamedTuple):
    """The claims a change deletes, in ordinal order, and how many of them have a volume whose
    reclaim policy is Delete and how many have no volume bound at all (still Pending)."""

    claims: list[str]
    with_data: int
    unbound: int


class Deleted(NamedTuple):
    """What an allowed change says of the claims it deletes."""

    warnings: tuple[str, ...] = ()
    namespace: str = ""
    #: The one claim that goes, when exactly one does: the Event's ``related`` object.
    claim: str = ""

    def told(self, outcome: Decision, regarding: notices.ObjectRef) -> Decision:
        """``outcome`` with each warning, and its ``ClaimsDeleted`` Event on the set
        ``regarding``."""
        related = notices.claim(self.namespace, self.claim) if self.claim else None
        told = (notices.claims_deleted(regarding, note=t, claim=related) for t in self.warnings)
        return outcome.with_warnings(self.warnings).with_notices(*told)


def deleted_claims(sts: StatefulSetInfo, *, old: range, new: range, store: Store) -> Found:
    """The claims the view holds of the ordinals of ``old`` that ``new`` removes; bounded by the
    set's objects in the view, not by the ranges (which may hold two billion ordinals)."""
    gone = removed_ordinals(old, new)
    return _claims_of(sts, lambda ordinal: any(ordinal in r for r in gone), store=store)


def _claims_of(sts: StatefulSetInfo, gone: Callable[[int], bool], *, store: Store) -> Found:
    known = store.known_ordinals(sts.namespace, sts.name, templates=sts.templates, group=sts.group)
    claims: list[str] = []
    with_data = unbound = 0
    for ordinal in sorted(known):
        if not gone(ordinal):
            continue
        for template in sts.templates:
            name = claim_name(template, sts.name, ordinal)
            claim = store.claims.get((sts.namespace, name))
            if claim is None:
                continue
            claims.append(name)
            unbound += not claim.volume
            volume = store.volume(claim.volume)  # an unbound claim's "" names no volume
            if volume is not None and volume.reclaim_delete:
                with_data += 1
    return Found(claims, with_data, unbound)


def warning(sts: StatefulSetInfo, *, old: range, new: range, store: Store) -> Deleted:
    """The warning of an allowed change from ``old`` to ``new`` ordinals of a set whose claims
    go with its pods (none without that policy, or when the view holds no claim that goes)."""
    if not sts.deletes_claims:
        return Deleted()
    return _said(sts, _change(old, new), deleted_claims(sts, old=old, new=new, store=store))


def live_warning(
    sts: StatefulSetInfo, *, before: Live, after: Live, store: Store, label: str = ""
) -> Deleted:
    """The same warning for an Advanced StatefulSet going from the live ordinals ``before`` to
    ``after``; ``label`` names the change (the counts when empty)."""
    if not sts.deletes_claims:
        return Deleted()
    found = _claims_of(sts, lambda o: o in before and o not in after, store=store)
    counts = f"{before.replicas} -> {after.replicas}"
    return _said(sts, label if label and after.replicas else counts, found)


def _said(sts: StatefulSetInfo, change: str, found: Found) -> Deleted:
    claims, with_data, unbound = found
    if not claims:
        return Deleted()
    plural = len(claims) > 1
    head = (
        f"{sts.name}: {change} deletes claim{'s' if plural else ''} "
        f"{some(claims, len(claims))} with {'their pods' if plural else 'its pod'} ({POLICY})"
    )
    if with_data == len(claims):
        tail = "their volumes' reclaim policy is Delete: the data goes with them"
        if not plural:
            tail = "its volume's reclaim policy is Delete: the data goes with it"
    elif with_data:
        tail = f"the data of {with_data} of them goes too (volume reclaim policy Delete)"
    elif unbound == len(claims):
        # A Pending claim has no volume: nothing is kept, nothing is lost.
        tail = f"no volume is bound to {'them' if plural else 'it'} yet"
    elif unbound:
        tail = (
            f"{unbound} of them {'has' if unbound == 1 else 'have'} no volume yet, the others' "
            "volumes are kept (reclaim policy not Delete)"
        )
    else:
        tail = "their volumes are kept (reclaim policy not Delete)"
        if not plural:
            tail = "its volume is kept (reclaim policy not Delete)"
    return Deleted((f"{head}; {tail}",), sts.namespace, "" if plural else claims[0])


def _change(old: range, new: range) -> str:
    """``4 -> 3``, or ``ordinals.start 0 -> 1`` (and the replicas, when they change too): a move
    of the start deletes claims whatever the count does. Scaling to zero is the count alone."""
    counts = f"{len(old)} -> {len(new)}"
    if not new or old.start == new.start:
        return counts
    moved = f"ordinals.start {old.start} -> {new.start}"
    return moved if len(old) == len(new) else f"{moved}, replicas {counts}"
