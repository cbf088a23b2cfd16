"""An Advanced StatefulSet whose ``stszone.io/*`` annotations are malformed and left as they
were by an UPDATE that removes members: guarded on the defaults, as an ``apps/v1`` set's UPDATE
is (docs/guard.md: the guard reads none of the set's annotations while they are malformed), so
``allow-zone-loss`` beside them does not wave a zone loss through on one kind and not the other.
Malformed here: a misspelt key, and a storage-class template that gives no valid StorageClass
name for one of the server's zones (the set lists none), which an Advanced StatefulSet's
volumeClaimTemplates meet as an ``apps/v1`` set's do.

Both sets: three members, one pod in each zone; 3 -> 2 removes the only member of the last.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import builders as b
from tests.builders import node
from tests.kruiseobjects import annotated, answer_to_change, live_pods, recorded_items
from tests.test_validate import validate
from webhook.cluster.clusterfile import store_from_objects
from webhook.rules.decision import Decision
from webhook.wire.review import Answer

FORCED = {"stszone.io/allow-zone-loss": "true"}
CASES = [
    (("a", "b", "c"), {"stszone.io/zones": "a,b,c", "stszone.io/zone": "a"}),
    (("a", "b", "c_1"), {"stszone.io/storage-class-template": "ssd-{zone}"}),
]


def _kruise(zones: tuple[str, ...], annotations: dict[str, str]) -> Decision:
    nodes = [node(f"n-{z}", z) for z in zones]
    base = annotated(recorded_items("statefulsets.v1beta1.json")[0], {**annotations, **FORCED})
    base["metadata"]["annotations"].pop("stszone.io/zones", None)
    base["metadata"]["annotations"].update(annotations)
    pods = live_pods([0, 1, 2], lambda o: f"n-{zones[o]}")
    return answer_to_change(base, (3, []), (2, []), [*nodes, *pods])


def _apps(zones: tuple[str, ...], annotations: dict[str, str]) -> Answer:
    old = b.statefulset(replicas=3, annotations={**annotations, **FORCED})
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    objects: list[Any] = [b.node(f"n-{z}", z) for z in zones]
    objects += [b.sts_pod("db", o, node=f"n-{z}") for o, z in enumerate(zones)]
    store = store_from_objects([*objects, old])
    return validate(new, store, operation="UPDATE", old=old)


@pytest.mark.parametrize(("zones", "annotations"), CASES)
def test_a_malformed_sets_scale_down_is_guarded_on_the_defaults_on_either_kind(
    zones: tuple[str, ...], annotations: dict[str, str]
) -> None:
    """The apps/v1 set's 3 -> 2 is refused, and so is the Advanced StatefulSet's: neither
    reads allow-zone-loss beside the malformed annotations."""
    apps = _apps(zones, annotations)
    assert (apps.allowed, apps.reason) == (False, "ZoneLoss"), apps.message
    kruise = _kruise(zones, annotations)
    assert (kruise.allowed, kruise.reason) == (False, "ZoneLoss"), kruise.message
    for message, kind in ((apps.message, "StatefulSet"), (kruise.message, "Advanced StatefulSet")):
        assert f"would drop zone {zones[2]} (ordinal 2 is its only pod)" in message, message
        assert f"fix the {kind}'s malformed annotations (" in message, message
