"""A KafkaNodePool whose ``stszone.io/*`` annotations are malformed: a ``/scale`` cannot change
them, so its scale-downs are judged on the defaults (the server's zones) with a warning, as an
UPDATE that leaves them as they were is, and as a StatefulSet's are.

pool: six brokers placed 0a 1a 2b 3b 4c 5c. Keeping 0-3 keeps every zone; keeping 0-2 loses
zone-c.
"""

from __future__ import annotations

import copy

from tests import builders as b
from tests import poolsim as sim
from webhook.cli.explain_pools_text import pool_json, pool_text
from webhook.model.extract import volume_info
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store
from webhook.rules.explain_pools import Verdict, explain_pool

BAD = {"stszone.io/zones": "zone-a,,zone-b"}
SAID = "KafkaNodePool pool: stszone.io/zones has an empty entry"


def _cluster() -> Store:
    view = sim.store()
    for node_id, zone in ((1, "zone-a"), (3, "zone-b")):  # data that holds them there
        claim = ("kafka", f"data-my-cluster-pool-{node_id}")
        view.put("volumes", volume_info(b.pv(f"pv-{node_id}", zone, claim=claim)))
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 6)
    cluster.reconcile()
    assert set(cluster.zones("pool").items()) == {
        (0, "zone-a"), (1, "zone-a"), (2, "zone-b"), (3, "zone-b"), (4, "zone-c"), (5, "zone-c"),
    }  # fmt: skip
    view.put("nodepools", nodepool_info(_pool(view, **BAD)))
    return view


def _pool(view: Store, **annotations: str) -> sim.JSON:
    info = view.nodepool("kafka", "pool")
    assert info is not None
    made = sim.pool_object("pool", replicas=info.replicas, node_ids=list(info.node_ids or ()))
    made["metadata"]["annotations"] = {**info.annotations, **annotations}
    return made


def test_a_scale_of_a_malformed_pool_is_judged_on_the_defaults_with_a_warning() -> None:
    """kubectl scale 6 -> 4 removes brokers 5 and 4, zone-c's only ones: refused as a zone
    loss, not as Invalid; with remove-node-ids [5, 3] (an annotation the pool may take while
    its stszone ones are malformed) the same scale keeps every zone and is allowed, warned
    that the annotations are malformed."""
    view = _cluster()
    new, old = sim.scale("pool", old=6, new=4)
    refused = sim.admit(view, new, old=old, operation="UPDATE")
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
    assert any(w.startswith(SAID) for w in refused.warnings), refused.warnings
    annotated = _pool(view, **{"strimzi.io/remove-node-ids": "[5, 3]"})
    assert sim.admit(view, annotated, old=_pool(view), operation="UPDATE").allowed
    view.put("nodepools", nodepool_info(annotated))
    allowed = sim.admit(view, new, old=old, operation="UPDATE")
    assert allowed.allowed, allowed.message
    assert [w for w in allowed.warnings if w.startswith(SAID)] == [
        f"{SAID} (unchanged by this scale; fix it)"
    ]


def test_a_malformed_pools_way_out_names_what_to_fix_with_allow_zone_loss() -> None:
    """allow-zone-loss added alone changes the malformed annotations and is refused: the
    refusal of 6 -> 3 (by /scale, or by an update that keeps them) says to fix them in the
    same update, and that update is allowed."""
    view = _cluster()
    new, old = sim.scale("pool", old=6, new=3)
    kept = _pool(view)
    kept["spec"]["replicas"] = 3
    kept["metadata"]["annotations"]["strimzi.io/remove-node-ids"] = "[5, 4, 3]"
    for refused in (
        sim.admit(view, new, old=old, operation="UPDATE"),
        sim.admit(view, kept, old=_pool(view), operation="UPDATE"),
    ):
        assert (refused.allowed, refused.reason) == (False, "ZoneLoss"), refused.message
        assert "fix KafkaNodePool pool's malformed annotations (stszone.io/zones" in (
            refused.message
        )
        assert "in the same update that sets stszone.io/allow-zone-loss" in refused.message
    added = copy.deepcopy(kept)
    added["metadata"]["annotations"]["stszone.io/allow-zone-loss"] = "true"
    assert sim.admit(view, added, old=_pool(view), operation="UPDATE").reason == "Invalid"
    fixed = copy.deepcopy(added)
    del fixed["metadata"]["annotations"]["stszone.io/zones"]
    taken = sim.admit(view, fixed, old=_pool(view), operation="UPDATE")
    assert taken.allowed, taken.message
    assert any("allowed by stszone.io/allow-zone-loss" in w for w in taken.warnings)


def test_explain_gives_each_size_the_guards_answer_after_the_problem() -> None:
    """explain knp/pool: the PROBLEM line (its new brokers are refused), then each smaller
    size's answer, the guard's answer to that Scale, with the zones the guard counts each
    removed broker in; no broker table is drawn from annotations that do not read."""
    view = _cluster()
    explained = explain_pool(view, "kafka", "pool")
    assert explained is not None
    assert "malformed stszone annotations" in explained.problem
    assert explained.brokers == ()
    sizes = [(s.replicas, s.scale) for s in explained.sizes]
    guard = []
    for n in range(5, -1, -1):
        new, old = sim.scale("pool", old=6, new=n)
        said = sim.admit(view, new, old=old, operation="UPDATE").decision
        guard.append((n, Verdict(said.allowed, said.reason, said.message, tuple(said.warnings))))
    assert sizes == guard
    assert [(n, v.allowed) for n, v in sizes] == [
        (5, True), (4, False), (3, False), (2, False), (1, False), (0, True),
    ]  # fmt: skip
    text = pool_text(explained).splitlines()
    (problem,) = [i for i, line in enumerate(text) if line.startswith("  PROBLEM: ")]
    after = "\n".join(text[problem + 1 :])
    assert "    6 -> 5: removes 5 (zone-c): allowed" in after, after
    assert "    6 -> 4: removes 5 (zone-c) and 4 (zone-c): refused (ZoneLoss)" in after, after
    assert [s["replicas"] for s in pool_json(explained)["sizes"]] == [5, 4, 3, 2, 1, 0]
