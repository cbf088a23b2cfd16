"""An UPDATE of a KafkaNodePool meets its ``stszone.io/*`` annotations as an UPDATE of a
StatefulSet does: one that changes any ``stszone.io/`` key into a malformed set (a misspelt key
added, say) is refused.

pool: six brokers placed by stszone over zone-a, zone-b, zone-c; db: the same StatefulSet.
"""

from __future__ import annotations

import copy

from tests import builders as b
from tests import poolsim as sim
from tests.test_validate import validate
from webhook.model.nodepools import nodepool_info
from webhook.wire.review import Answer

ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}
MISSPELT = {"stszone.io/allow-zoneloss": "true"}


def _pool_update(before: dict[str, str], after: dict[str, str], *, replicas: int = 6) -> Answer:
    """/validate of an UPDATE of the pool (stored with ``before``) to ``after`` with a new
    label and ``replicas``."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    info = view.nodepool("kafka", "pool")
    assert info is not None
    old = sim.pool_object("pool", replicas=6, node_ids=list(info.node_ids or ()))
    old["metadata"]["annotations"] = {**ZONES, **before}
    view.put("nodepools", nodepool_info(old))
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {**ZONES, **after}
    new["metadata"].setdefault("labels", {})["team"] = "payments"
    new["spec"]["replicas"] = replicas
    return sim.admit(view, new, old=old, operation="UPDATE")


def _set_update(before: dict[str, str], after: dict[str, str]) -> Answer:
    old = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **before})
    new = b.statefulset(annotations={"stszone.io/zones": "a,b,c", **after})
    new["metadata"].setdefault("labels", {})["team"] = "payments"
    return validate(new, operation="UPDATE", old=old)


def test_an_update_adding_a_misspelt_key_is_refused_as_for_a_set() -> None:
    """allow-zoneloss for allow-zone-loss: the set's update is refused naming the key, and so
    is the pool's, which was allowed without a word while the guard stayed armed."""
    assert not _set_update({}, MISSPELT).allowed
    for replicas in (6, 5):
        answer = _pool_update({}, MISSPELT, replicas=replicas)
        assert (answer.allowed, answer.code, answer.reason) == (False, 422, "Invalid")
        assert answer.message.startswith(
            "KafkaNodePool pool: unknown annotation(s) stszone.io/allow-zoneloss; known: "
        ), answer.message
