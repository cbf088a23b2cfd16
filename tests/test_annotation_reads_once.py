"""One request reads a workload's ``stszone.io/*`` annotations once: every check of a
KafkaNodePool CREATE or UPDATE (the annotations' problems, the guard of what the update
removes, the spread warnings), and the guard of an Advanced StatefulSet UPDATE that removes
members, take the policy the first check read.

Counted as :mod:`tests.test_zone_list_cost` counts: a ``stszone.io/zones`` value that counts
how often it is split into zones, each split being one parse of the annotations.
"""

from __future__ import annotations

import copy
from typing import SupportsIndex

import pytest

from tests import poolsim as sim
from tests.builders import node
from tests.kruiseobjects import annotated, kruise_update, live_pods, recorded_items
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.rules import admission
from webhook.wire.review import from_dict


class Zones(str):
    """A ``stszone.io/zones`` value that counts the times it is split into zones."""

    __slots__ = ()
    parsed = 0

    def split(self, sep: str | None = None, maxsplit: SupportsIndex = -1) -> list[str]:
        Zones.parsed += 1
        return str.split(self, sep, maxsplit)


def _counted(obj: sim.JSON) -> sim.JSON:
    made = copy.deepcopy(obj)
    annotations = made["metadata"]["annotations"]
    annotations["stszone.io/zones"] = Zones(annotations["stszone.io/zones"])
    return made


@pytest.mark.parametrize(
    ("operation", "replicas"),
    [("CREATE", 6), ("UPDATE", 6), ("UPDATE", 5), ("UPDATE", 2)],
    ids=["create", "update", "scale-down-kept", "scale-down-refused"],
)
def test_a_pool_request_is_judged_on_one_read_of_its_annotations(
    operation: str, replicas: int
) -> None:
    """Validated, a pool's CREATE and UPDATE parse its annotations once, whether the update
    lowers replicas (its guard runs, 6 -> 2 refused for zone-c) or not."""
    view, stored = sim.stored_pool()
    new = copy.deepcopy(stored)
    new["spec"]["replicas"] = replicas
    old = stored if operation == "UPDATE" else None
    parsed = from_dict(sim.body(new, old=old, operation=operation)).request
    request = parsed._replace(object=_counted(new))
    Zones.parsed = 0
    decided = admission.validate(request, store=view, defaults=sim.DEFAULTS)
    assert decided.allowed == (replicas != 2), decided.message
    assert Zones.parsed == 1


def _kruise_parses(replicas: int) -> int:
    """The parses of the zone list that validating a forced 3 -> ``replicas`` of an Advanced
    StatefulSet (one pod in each zone) makes."""
    zones = ("a", "b", "c")
    base = annotated(
        recorded_items("statefulsets.v1beta1.json")[0],
        {"stszone.io/zones": "a,b,c", "stszone.io/allow-zone-loss": "true"},
    )
    base["spec"]["replicas"], base["spec"]["reserveOrdinals"] = 3, []
    objects = [node(f"n-{z}", z) for z in zones] + live_pods([0, 1, 2], lambda o: f"n-{zones[o]}")
    view = store_from_objects([*objects, base])
    new = _counted(base)
    new["spec"]["replicas"] = replicas
    Zones.parsed = 0
    decided = admission.validate(kruise_update(new, old=base), store=view, defaults=Defaults())
    assert decided.allowed, decided.message
    dropped = any("3 -> 2 drops c;" in w for w in decided.warnings)
    assert dropped == (replicas == 2), decided.warnings
    return Zones.parsed


def test_an_advanced_statefulsets_guard_reads_no_annotation_the_base_check_read() -> None:
    """An UPDATE removing a member (3 -> 2, its guard runs and warns of zone c, forced) parses
    the set's annotations no more often than one removing none (3 -> 3, no guard): the guard
    judges on the policy the base check read. (The set's records parse them too, as every
    record of a set does, the same in both.)"""
    assert _kruise_parses(2) == _kruise_parses(3)
