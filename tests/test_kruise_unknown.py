"""The smallest safe count of an Advanced StatefulSet scale-down that removes a member of unknown
zone (node-ordinal mode, no node labelled with its ordinal): every such member is kept, or every
listed zone is held by a kept member of known zone. The ordinals of unknown zone the search for
it passes are not looked up one by one."""

from __future__ import annotations

import pytest

from tests.kruiseobjects import ANNOTATED, NODE_ORDINAL, annotated, kruise_store, recorded_request
from tests.work import CountingStore
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.admission import validate
from webhook.rules.decision import Decision


@pytest.mark.parametrize(
    ("pins", "old", "lowest"),
    [
        ({0: "a", 1: "b"}, 3, 3),  # zone c is held by none known: keep ordinal 2 (unknown)
        ({0: "a", 1: "b", 2: "c"}, 4, 3),  # 0-2 hold every zone: ordinal 3 may go
    ],
)
def test_a_scale_down_past_a_member_of_unknown_zone_names_the_smallest_safe_count(
    pins: dict[int, str], old: int, lowest: int
) -> None:
    request = recorded_request("011")
    new = annotated(request.object, {**ANNOTATED, **NODE_ORDINAL})
    new["spec"].update(replicas=1, reserveOrdinals=[])
    before = annotated(request.old_object, {**ANNOTATED, **NODE_ORDINAL})
    before["spec"].update(replicas=old, reserveOrdinals=[])
    refused = validate(
        request._replace(object=new, old_object=before),
        store=kruise_store(pins=pins),
        defaults=Defaults(),
    )
    assert not refused.allowed
    assert f"; the smallest replica count that keeps every zone is {lowest}; " in refused.message


def _reserve_one(
    pins: dict[int, str], *, old: int, new: int, store: Store | None = None
) -> Decision:
    """web (node-ordinal, zones a, b, c) from ``old`` replicas, none reserved, to ``new`` with
    ordinal 1 reserved, on nodes ``k<ordinal>`` labelled with the ``pins`` ordinals."""
    request = recorded_request("011")
    after = annotated(request.object, {**ANNOTATED, **NODE_ORDINAL})
    after["spec"].update(replicas=new, reserveOrdinals=[1])
    before = annotated(request.old_object, {**ANNOTATED, **NODE_ORDINAL})
    before["spec"].update(replicas=old, reserveOrdinals=[])
    return validate(
        request._replace(object=after, old_object=before),
        store=kruise_store(pins=pins) if store is None else store,
        defaults=Defaults(),
    )


@pytest.mark.parametrize(
    ("pins", "old", "lowest"),
    [
        # Ordinal 1 (unknown) goes at every count: zone c must be held, by 4 (live 0, 2, 3, 4).
        ({0: "a", 2: "b", 4: "c"}, 3, 4),
        # 1 and 3 unknown: keeping 3 (count 3) still loses 1, so c must be held, by 5.
        ({0: "a", 2: "b", 5: "c"}, 4, 5),
    ],
)
def test_reserving_a_member_of_unknown_zone_names_a_count_that_holds_every_zone(
    pins: dict[int, str], old: int, lowest: int
) -> None:
    """A reserved member is never kept again, so no count keeps every member of unknown zone:
    the count offered is the smallest whose members hold every listed zone, and an update to it
    is allowed while one to a count below it is refused."""
    refused = _reserve_one(pins, old=old, new=2)
    assert (refused.allowed, refused.reason) == (False, "ZoneUnknown"), refused.message
    assert f"; the smallest replica count that keeps every zone is {lowest}: " in refused.message
    assert _reserve_one(pins, old=old, new=lowest).allowed
    assert not _reserve_one(pins, old=old, new=lowest - 1).allowed


def test_a_count_past_a_far_labelled_node_locates_none_of_the_ordinals_between() -> None:
    """Zone b's only member, ordinal 1, is reserved; the next node of b is labelled 3000. The
    offered count is 3000, found without looking up the nodes and claims of the ordinals 3-2999,
    which nothing in the view makes known: the lookups are bounded by the objects in the view."""
    pins = {0: "a", 1: "b", 2: "c", 3000: "b"}
    store = CountingStore(kruise_store(pins=pins))
    refused = _reserve_one(pins, old=3, new=2, store=store)
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
    assert "; the smallest replica count that keeps every zone is 3000: " in refused.message
    assert store.lookups <= store.objects()
