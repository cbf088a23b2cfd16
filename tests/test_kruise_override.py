"""A refused change of an OpenKruise Advanced StatefulSet says how to force it on the kind the
user edits: ``kubectl annotate statefulset web`` reaches the ``apps/v1`` StatefulSet of that
name (NotFound, or another set's guard disarmed), so "on the StatefulSet" sends the user to the
wrong object.

The set: ``web``, live members 0, 2, 3 in zones a, b, c (1 reserved); each change below
removes the only member of a zone.
"""

from __future__ import annotations

from tests.kruiseobjects import annotated_update, kruise_store, recorded_request
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import validate

FORCE = 'set stszone.io/allow-zone-loss: "true" on the Advanced StatefulSet to force it'


def _web() -> Store:
    return kruise_store(zones_of={"web-0": "a", "web-2": "b", "web-3": "c"})


def test_a_refused_scale_of_an_advanced_statefulset_names_it_in_the_override() -> None:
    """``kubectl scale`` 3 -> 2 (the /scale subresource) removes web-3, zone c's only member."""
    decision = validate(recorded_request("009"), store=_web(), defaults=Defaults())
    assert (decision.allowed, decision.reason) == (False, "ZoneLoss"), decision.message
    assert decision.message.endswith(f"; {FORCE}"), decision.message


def test_a_refused_reserve_change_names_the_advanced_statefulset_in_the_override() -> None:
    """Reserving 0-1 at replicas 3 makes the live members 2, 3, 4: zone a is lost."""
    request = annotated_update(recorded_request("011"), replicas=3, reserveOrdinals=["0-1"])
    request.old_object["spec"]["replicas"] = 3
    decision = validate(request, store=_web(), defaults=Defaults())
    assert (decision.allowed, decision.reason) == (False, "ZoneLoss"), decision.message
    assert decision.message.endswith(f"; {FORCE}"), decision.message
