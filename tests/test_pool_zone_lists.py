"""Which zone list a KafkaNodePool's scale-down refusal names: the pool's own
``stszone.io/zones``, else the server's (``--zones``, else the zones nodes carry), which is
the list the guard then protects.

pool: six brokers placed by stszone over zone-a, zone-b, zone-c; 6 -> 2 keeps 0 and 1 only.
"""

from __future__ import annotations

import pytest

from tests import poolsim as sim
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store


def _cluster(**annotations: str) -> Store:
    """The pool, reconciled to six brokers, then stored with ``annotations`` in place of its
    ``stszone.io/*`` ones."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    assert set(cluster.zones("pool").values()) == set(sim.ZONES)
    info = view.nodepool("kafka", "pool")
    assert info is not None
    made = sim.pool_object("pool", replicas=6, node_ids=list(info.node_ids or ()))
    made["metadata"]["annotations"] = annotations
    view.put("nodepools", nodepool_info(made))
    return view


def _refusals(view: Store) -> list[str]:
    """The messages refusing 6 -> 2 by kubectl scale and by an update of spec.replicas."""
    new, old = sim.scale("pool", old=6, new=2)
    info = view.nodepool("kafka", "pool")
    assert info is not None
    before = sim.pool_object("pool", replicas=6, node_ids=list(info.node_ids or ()))
    before["metadata"]["annotations"] = dict(info.annotations)
    after = sim.pool_object("pool", replicas=2, node_ids=list(info.node_ids or ()))
    after["metadata"]["annotations"] = dict(info.annotations)
    said = []
    for answered in (
        sim.admit(view, new, old=old, operation="UPDATE"),
        sim.admit(view, after, old=before, operation="UPDATE", endpoint="validate"),
    ):
        assert (answered.allowed, answered.reason) == (False, "ZoneLoss"), answered.message
        said.append(answered.message)
    return said


@pytest.mark.parametrize(
    ("annotations", "override", "named"),
    [
        ({"stszone.io/zones": "zone-a,zone-b,zone-c"}, False, "of stszone.io/zones;"),
        ({}, False, "of the nodes' zones (topology.kubernetes.io/zone);"),
        ({}, True, "of the server's zones (--zones);"),
        # Malformed: the guard reads none of them, the server's zones stand in.
        ({"stszone.io/zones": "zone-a,,zone-c"}, False, "of the nodes' zones"),
    ],
)
def test_a_refusal_names_the_zone_list_it_protects(
    annotations: dict[str, str], override: bool, named: str
) -> None:
    view = _cluster(**annotations)
    if override:
        view.zones_override = sim.ZONES
    for message in _refusals(view):
        assert named in message, message
        if "stszone.io/zones" not in named:
            assert "of stszone.io/zones" not in message, message
