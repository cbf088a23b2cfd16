"""The smallest safe count of an Advanced StatefulSet scale-down that removes a member of unknown
zone (node-ordinal mode, no node labelled with its ordinal): every such member is kept, or every
listed zone is held by a kept member of known zone."""

from __future__ import annotations

import pytest

from tests.test_kruise import ANNOTATED, NODE_ORDINAL, _annotated, _request, _store
from webhook.config import Defaults
from webhook.rules.admission import validate


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
    request = _request("011")
    new = _annotated(request.object, {**ANNOTATED, **NODE_ORDINAL})
    new["spec"].update(replicas=1, reserveOrdinals=[])
    before = _annotated(request.old_object, {**ANNOTATED, **NODE_ORDINAL})
    before["spec"].update(replicas=old, reserveOrdinals=[])
    refused = validate(
        request._replace(object=new, old_object=before),
        store=_store(pins=pins),
        defaults=Defaults(),
    )
    assert not refused.allowed
    assert f"; the smallest replica count that keeps every zone is {lowest}; " in refused.message
