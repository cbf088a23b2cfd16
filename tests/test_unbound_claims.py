"""A claim not bound yet of a set with a storage-class template: its class makes its volume only
in the zone recorded on it (``stszone.io/zone``), so its pod goes there (placement), and the
guard, ``audit``, ``explain`` and ``rebalance`` count it there too.

ns/db, zones a, b, c, template ``ssd-{zone}``, replicas 4: pods 0, 1 and 3 run in a, b and c;
ordinal 2 has no pod, and its claim data-db-2, made by a replica whose zone list differed, is
recorded in zone a and not bound yet. Its pod goes to a, not to its rule zone c.
"""

from __future__ import annotations

from typing import Any

from tests import builders as b
from tests import rebalancing as r
from webhook.cluster.clusterfile import store_from_objects
from webhook.cluster.snapshot import from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.audit import audit_set
from webhook.rules.explain import explain_workload
from webhook.rules.placement import place
from webhook.rules.policy import resolve_policy
from webhook.rules.rebalance import chosen, plan
from webhook.wire import review

JSON = dict[str, Any]
TEMPLATE = {"stszone.io/zones": "a,b,c", "stszone.io/storage-class-template": "ssd-{zone}"}


def _claim(name: str, zone: str) -> JSON:
    claim = b.pvc(name)
    claim["metadata"]["annotations"] = {"stszone.io/zone": zone}
    claim["spec"]["storageClassName"] = f"ssd-{zone}"
    return claim


def _store(
    annotations: dict[str, str] = TEMPLATE,
    *,
    extra: list[JSON] | None = None,
    pods: tuple[int, ...] = (0, 1, 3),
) -> Store:
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    return store_from_objects(
        [
            *nodes,
            b.statefulset(annotations=annotations, replicas=4),
            *[b.sts_pod(ordinal=o, node={0: "na", 1: "nb", 3: "nc"}[o]) for o in pods],
            _claim("data-db-2", "a"),
            *(extra or []),
        ]
    )


def _scale(store: Store, old: int, new: int) -> review.Answer:
    body = b.review(b.scale(replicas=new), operation="UPDATE", old=b.scale(replicas=old))
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


def test_the_guard_counts_an_unbound_claim_where_its_pod_will_go() -> None:
    """Keeping 0-2 keeps a, b and, by the rule, c -- but db-2's pod goes to a with its claim:
    4 -> 3 empties zone c, and the refusal names the claim that holds db-2 elsewhere."""
    store = _store()
    policy = resolve_policy("ns", "db", store=store)
    assert place(2, namespace="ns", policy=policy, store=store).zone == "a"
    answer = _scale(store, 4, 3)
    assert not answer.allowed
    assert answer.message.startswith(
        "scale-down of db from 4 to 3 would drop zone c (ordinal 3 is its only pod)"
    )


def test_a_refusal_names_the_claim_that_holds_a_zone() -> None:
    """Ordinal 3 has no pod either, its claim recorded in c (its rule zone is a): 4 -> 2 drops
    c, which only the claim holds, and the refusal says so."""
    store = _store(extra=[_claim("data-db-3", "c")], pods=(0, 1))
    answer = _scale(store, 4, 2)
    assert not answer.allowed
    assert (
        "would drop zone c (ordinal 3 is the only one there; ordinal 3 is not running but its "
        "claim data-db-3, not bound yet, gets its volume there)"
    ) in answer.message


def test_without_a_template_the_claims_zone_holds_nothing() -> None:
    """Without a template the volume is made where the pod goes: the rule's c is kept."""
    store = _store({"stszone.io/zones": "a,b,c"})
    policy = resolve_policy("ns", "db", store=store)
    assert place(2, namespace="ns", policy=policy, store=store).zone == "c"
    assert _scale(store, 4, 3).allowed


def test_audit_and_explain_expect_the_unbound_claim_in_its_recorded_zone() -> None:
    store = _store()
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    member = explained.members[2]
    assert (member.row.expected_zone, member.row.expected_by) == ("a", "claim data-db-2")
    assert member.guard.zone == "a"
    assert "claim data-db-2" in member.guard.why
    assert [(a.replicas, a.allowed) for a in explained.sizes][:1] == [(3, False)]
    sts = store.statefulset("ns", "db")
    assert sts is not None
    row = audit_set(sts, store=store).rows[2]
    assert (row.expected_zone, row.expected_by) == ("a", "claim data-db-2")


def test_rebalance_does_not_evict_a_pod_its_claim_brings_back() -> None:
    """db-1 runs in zone-a, its rule zone zone-b, its claim (not bound yet) recorded in zone-a:
    evicted, its pod would be placed in zone-a again with its claim. It is pinned by that claim,
    as by a volume: moved only with --move-data, which deletes the claim."""
    template = {"stszone.io/storage-class-template": "ssd-{zone}"}
    sts = r.statefulset(3, templates=("data",), annotations=template)
    claim = _claim("data-db-1", "zone-a")
    claim["metadata"]["namespace"] = r.NAMESPACE
    snap = from_objects(r.cluster({0: "a1", 1: "a2", 2: "c1"}, sts=sts, extra=[claim]))
    sets = chosen(snap.store, excluded={"kube-system"})
    (result,) = plan(snap.store, snap.state, sets=sets, move_data=False).sets
    row = result.rows[1]
    assert (row.zone, row.target, row.kind) == ("zone-a", "zone-b", "pinned by data")
    assert row.notes[0] == "its claim data-db-1 (not bound yet) is in zone-a"
    assert not result.steps
