"""A KafkaNodePool is told what a StatefulSet is told of its shape on CREATE and UPDATE: fewer
replicas than zones leave a zone without a broker, and a listed zone with no node makes its
brokers wait there (warnings, never refusals: a node pool at zero). A set is told only of a
zone its ordinals go to; a pool, of every listed one (its brokers may be in any).

The cluster: two nodes in each of zone-a, zone-b, zone-c; none in zone-d.
"""

from __future__ import annotations

import copy

import pytest

from tests import builders as b
from tests import poolsim as sim
from tests.test_validate import validate

THIN = (
    "{name}: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone"
)
NO_NODE = (
    "{name}: no node in zone(s) zone-d (topology.kubernetes.io/zone) yet; its pods there wait "
    "for one"
)


def _set(replicas: int, zones: str, *, operation: str) -> tuple[str, ...]:
    view = sim.store()
    new = b.statefulset(replicas=replicas, annotations={"stszone.io/zones": zones})
    if operation == "CREATE":
        return validate(new, view).warnings
    old = copy.deepcopy(new)
    new["metadata"].setdefault("labels", {})["team"] = "payments"
    return validate(new, view, operation="UPDATE", old=old).warnings


def _pool(replicas: int, zones: str, *, operation: str) -> tuple[str, ...]:
    view = sim.store()
    annotations = {"stszone.io/zones": zones}
    new = sim.pool_object("pool", replicas=replicas, annotations=annotations)
    if operation == "CREATE":
        answer = sim.admit(view, new, endpoint="validate")
    else:
        old = copy.deepcopy(new)
        new["metadata"]["labels"]["team"] = "payments"
        answer = sim.admit(view, new, old=old, operation="UPDATE", endpoint="validate")
    assert answer.allowed, answer.message
    return answer.warnings


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize(
    ("replicas", "zones", "said"),
    [
        (2, "zone-a,zone-b,zone-c", (THIN,)),
        (4, "zone-a,zone-b,zone-d", (NO_NODE,)),
        (6, "zone-a,zone-b,zone-c", ()),
    ],
)
def test_a_pool_is_warned_of_its_shape_as_a_set_is(
    operation: str, replicas: int, zones: str, said: tuple[str, ...]
) -> None:
    """The set's CREATE (and an UPDATE adding a label) is warned, and the pool's alike."""
    assert _set(replicas, zones, operation=operation) == tuple(s.format(name="db") for s in said)
    assert _pool(replicas, zones, operation=operation) == tuple(s.format(name="pool") for s in said)


def test_a_pool_is_warned_of_every_listed_zone_without_a_node() -> None:
    """A set of 2 over zone-a,zone-b,zone-d fills zone-a and zone-b by ordinal, so zone-d is not
    named. A pool's brokers stay where they are: after a scale-down by remove-node-ids its two
    brokers may be in zone-b and zone-d, so a pool of 2 is still told of zone-d."""
    zones = "zone-a,zone-b,zone-d"
    thin = THIN.format(name="pool")
    assert _set(2, zones, operation="CREATE") == (THIN.format(name="db"),)
    assert _pool(2, zones, operation="CREATE") == (thin, NO_NODE.format(name="pool"))
