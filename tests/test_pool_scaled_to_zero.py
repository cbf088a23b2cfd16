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


@pytest.mark.parametrize("by", ["update", "scale"])
def test_a_pool_scaled_to_zero_is_warned_that_every_broker_goes(by: str) -> None:
    """It was allowed without a word, where the same change of a StatefulSet is warned."""
    view, old = _placed()
    if by == "update":
        answer = sim.admit(view, _update_to_zero(old), old=old, operation="UPDATE")
    else:
        new, before = sim.scale("pool", old=3, new=0)
        answer = sim.admit(view, new, old=before, operation="UPDATE")
    assert answer.allowed, answer.message
    said = [w for w in answer.warnings if w.startswith(SAID)]
    assert len(said) == 1, answer.warnings
    warning = said[0]
    assert "other pools" in warning and "skip-broker-scaledown-check" in warning
    assert "stops the set" not in warning


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
