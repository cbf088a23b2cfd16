"""A KafkaNodePool scaled to zero, by an UPDATE or by ``/scale``, is allowed with a warning
as a StatefulSet scaled to zero is: every broker of the pool goes, in every zone, while the
Kafka cluster runs on in its other pools.

pool: three brokers placed by stszone over zone-a, zone-b, zone-c.
"""

from __future__ import annotations

import copy

import pytest

from tests import poolsim as sim
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store
from webhook.rules.decision import CUT
from webhook.wire.review import Answer

SAID = "pool: 3 -> 0 removes every broker of the pool, in every zone"


def _placed() -> tuple[Store, sim.JSON]:
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 3)
    cluster.reconcile()
    assert sorted(cluster.zones("pool").values()) == ["zone-a", "zone-b", "zone-c"]
    info = view.nodepool("kafka", "pool")
    assert info is not None
    return view, sim.pool_object("pool", replicas=3, node_ids=list(info.node_ids or ()))


def _update_to_zero(old: sim.JSON) -> sim.JSON:
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 0
    return new


def _scaled_to_zero(by: str) -> Answer:
    """/validate of the placed pool scaled from 3 to 0 by an UPDATE of it or by its /scale."""
    view, old = _placed()
    if by == "update":
        return sim.admit(view, _update_to_zero(old), old=old, operation="UPDATE")
    new, before = sim.scale("pool", old=3, new=0)
    return sim.admit(view, new, old=before, operation="UPDATE")


@pytest.mark.parametrize("by", ["update", "scale"])
def test_a_pool_scaled_to_zero_is_warned_that_every_broker_goes(by: str) -> None:
    """Allowed with a warning, as the same change of a StatefulSet is."""
    answer = _scaled_to_zero(by)
    assert answer.allowed, answer.message
    said = [w for w in answer.warnings if w.startswith(SAID)]
    assert len(said) == 1, answer.warnings
    assert "other pools" in said[0] and "stops the set" not in said[0]
    told = " ".join(answer.warnings)
    assert "skip-broker-scaledown-check" in told
    assert "scaled up again, each broker goes to its data, else where the pool has fewest" in told


@pytest.mark.parametrize("by", ["update", "scale"])
def test_the_warnings_of_a_pool_scaled_to_zero_reach_the_user_whole(by: str) -> None:
    """Each warning fits in what stszone sends whole: none ends in the mark of a cut (one
    warning saying it all would be cut to "... is set); scaling  [...]", losing where brokers
    go when the pool is scaled up again)."""
    answer = _scaled_to_zero(by)
    assert answer.allowed, answer.message
    assert answer.warnings and not any(w.endswith(CUT) for w in answer.warnings), answer.warnings


def test_a_pool_being_deleted_or_skipped_is_not_warned() -> None:
    """A pool being torn down, and the /scale of one labelled stszone.io/skip=true, are
    judged by nothing, as elsewhere."""
    view, old = _placed()
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    answer = sim.admit(view, _update_to_zero(old), old=old, operation="UPDATE")
    assert answer.allowed and not any(w.startswith(SAID) for w in answer.warnings)
    view, old = _placed()
    old["metadata"]["labels"] = {**old["metadata"].get("labels", {}), "stszone.io/skip": "true"}
    view.put("nodepools", nodepool_info(old))
    new, before = sim.scale("pool", old=3, new=0)
    answer = sim.admit(view, new, old=before, operation="UPDATE")
    assert answer.allowed and not answer.warnings, answer.warnings
