"""A Terminating pod whose claims go with it: its replacement gets new claims, placed by the rule.

With ``persistentVolumeClaimRetentionPolicy.whenScaled: Delete`` a scale-down gives the removed
ordinals' claims to their pods (an owner reference), and the garbage collector deletes them once
the pods are gone. Scaled back up while such a pod is still Terminating, the StatefulSet
controller creates the ordinal again only after the pod is gone, with a new claim, and
stszone places the new pod by the rule: the old volume's zone is not where it goes. A claim
being deleted (``metadata.deletionTimestamp``) is replaced the same way.

The cluster: zones a, b, c; ``db`` back at 4 replicas.
  0  on na (a)
  1  Terminating on nc (c): it had followed its volume pv-1 (zone c), its claim owned by it
  2  on nb (b)
  3  on nc (c)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.extract import claim_info
from webhook.model.store import Store
from webhook.rules.explain import explain_workload
from webhook.wire import review

ABC = {"stszone.io/zones": "a,b,c"}
NODES = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]


def _going_claim(how: str) -> dict[str, Any]:
    """data-db-1, bound to pv-1, going away as ``how`` says (or not, for "kept")."""
    claim = b.pvc("data-db-1", volume="pv-1")
    meta = claim["metadata"]
    if how == "owned by its pod":
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "db-1", "uid": "u1", "controller": True}
        ]
    elif how == "being deleted":
        meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
        meta["finalizers"] = ["kubernetes.io/pvc-protection"]
    return claim


def _store(how: str) -> Store:
    return store_from_objects(
        [
            *NODES,
            b.statefulset(replicas=4, annotations=ABC, when_scaled="Delete"),
            b.sts_pod(ordinal=0, node="na"),
            b.sts_pod(ordinal=1, node="nc", deleting=True),
            b.sts_pod(ordinal=2, node="nb"),
            b.sts_pod(ordinal=3, node="nc"),
            _going_claim(how),
            b.pv("pv-1", "c", claim=("ns", "data-db-1")),
        ]
    )


def _scale(store: Store, old: int, new: int) -> review.Answer:
    body = b.review(b.scale(replicas=new), operation="UPDATE", old=b.scale(replicas=old))
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


@pytest.mark.parametrize("how", ["owned by its pod", "being deleted"])
def test_a_scale_down_counting_on_a_claim_that_goes_is_refused(how: str) -> None:
    """4 -> 3 keeps 0 (a), 1 and 2 (b). db-1's replacement gets a new claim and goes to its
    rule zone b, so zone c, held by ordinal 3 alone, would be lost."""
    answer = _scale(_store(how), 4, 3)
    assert not answer.allowed
    assert answer.message.startswith("scale-down of db from 4 to 3 would drop zone c (")
    assert "its replacement goes to b" in answer.message


def test_a_claim_that_stays_still_holds_the_replacement() -> None:
    """The same cluster with db-1's claim neither owned by the pod nor being deleted: the
    replacement mounts pv-1 in zone c, which it keeps."""
    assert _scale(_store("kept"), 4, 3).allowed


def test_explain_says_where_the_replacement_goes_and_why() -> None:
    explained = explain_workload(_store("owned by its pod"), "ns", "db")
    assert explained is not None
    one = explained.members[1].guard
    assert one.counts == "b"
    assert one.why == (
        "holds no zone: db-1 is Terminating on node nc in c; its replacement goes to b; claim "
        "data-db-1 is deleted with db-1, and a new one made; the guard counts it there"
    )


@pytest.mark.parametrize(
    ("how", "going"),
    [("owned by its pod", True), ("being deleted", True), ("kept", False)],
)
def test_the_claim_record_says_whether_it_goes(how: str, going: bool) -> None:
    assert claim_info(_going_claim(how)).going is going


def test_a_claim_owned_by_another_kind_stays() -> None:
    """A StatefulSet owns its claims under whenDeleted: Delete; they go only with the set."""
    claim = b.pvc("data-db-1", volume="pv-1")
    claim["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s1"}
    ]
    assert claim_info(claim).going is False
