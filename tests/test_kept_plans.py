"""The plan ``/mutate`` keeps for the ``/validate`` call that follows it.

The API server asks the validating webhook about the pod the mutating one has just answered, so
``/mutate`` keeps the pod's plan in the view's derived space and ``/validate`` takes it instead
of computing it again. Taking it must never change an answer: these tests change, between the
two calls, each thing a plan comes from -- the view, the pod's stszone annotations, its claims,
its ordinal -- and require ``/validate`` to judge by the plan the view and the pod give now.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.annotations import ZONES
from webhook.model.records import claim_info, node_info, volume_info
from webhook.model.store import Store
from webhook.rules import admission
from webhook.rules.plan import KEPT_PLANS
from webhook.wire import review
from webhook.wire.patches import apply

NODES = [b.node("na", "zone-a"), b.node("nb", "zone-b"), b.node("nc", "zone-c")]


def view(*objects: dict[str, Any]) -> Store:
    return store_from_objects(
        [b.statefulset(annotations={ZONES: "zone-a,zone-b,zone-c"}), *NODES, *objects]
    )


def mutated(pod: dict[str, Any], store: Store) -> dict[str, Any]:
    """The pod as ``/mutate`` leaves it (which keeps its plan)."""
    request = review.from_dict(b.review(pod))
    outcome = admission.mutate(request, store=store, defaults=Defaults())
    assert outcome.allowed and outcome.patch, outcome
    return apply(pod, outcome.patch)


def validated(pod: dict[str, Any], store: Store) -> review.Outcome:
    request = review.from_dict(b.review(pod))
    return admission.validate(request, store=store, defaults=Defaults())


def pinned_zone(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["annotations"]["stszone.io/zone"])


def test_validate_takes_the_plan_mutate_kept_once() -> None:
    store = view()
    pod = mutated(b.sts_pod("db", 1), store)
    assert pinned_zone(pod) == "zone-b"
    assert len(store.derived()) == 1
    assert validated(pod, store).allowed
    assert store.derived() == {}  # taken: the next pod's validation computes its own
    assert validated(pod, store).allowed  # and a second validation computes it again


def test_a_plan_taken_is_the_plan_computed() -> None:
    """The same answers with and without a kept plan, over every ordinal's pod."""
    for ordinal in range(6):
        store = view()
        pod = mutated(b.sts_pod("db", ordinal), store)
        kept = validated(pod, store)
        assert store.derived() == {}
        assert validated(pod, store) == kept


def test_a_change_to_the_view_between_the_calls_is_judged() -> None:
    """Between the calls, the claim of ordinal 1 binds to a volume in zone-c: the pod pinned to
    zone-b by the rule can never run there, and validation must say so."""
    store = view()
    pod = mutated(b.sts_pod("db", 1), store)
    assert pinned_zone(pod) == "zone-b"
    store.put("volumes", volume_info(b.pv("pv-1", "zone-c")))
    store.put("claims", claim_info(b.pvc("data-db-1", volume="pv-1")))
    assert store.derived() == {}
    outcome = validated(pod, store)
    assert not outcome.allowed and outcome.reason == "ZoneRequirementMissing"
    assert "zone-c" in outcome.message


def test_every_change_of_the_view_empties_the_kept_plans() -> None:
    """A record put, a record deleted, a table re-listed."""
    store = view()
    mutated(b.sts_pod("db", 1), store)
    store.put("nodes", node_info(b.node("nd", "zone-d")))
    assert store.derived() == {}
    mutated(b.sts_pod("db", 2), store)
    store.delete("nodes", "nd")
    assert store.derived() == {}
    mutated(b.sts_pod("db", 3), store)
    store.replace("volumes", [volume_info(b.pv("pv-3", "zone-a"))])
    assert store.derived() == {}


def test_a_record_put_unchanged_keeps_them() -> None:
    """A watch event that changes nothing a record holds (a node heartbeat) is no change."""
    store = view()
    mutated(b.sts_pod("db", 1), store)
    store.put("nodes", node_info(b.node("na", "zone-a")))
    assert len(store.derived()) == 1


def test_pod_annotations_changed_between_the_calls_are_judged() -> None:
    """A set stszone's view does not hold takes its zones from the pod's own annotation; another
    mutating webhook reorders them after stszone's: ordinal 0 now belongs in zone-b."""
    store = view()
    pod = b.sts_pod("other", 0, annotations={ZONES: "zone-a,zone-b"})
    done = mutated(pod, store)
    assert pinned_zone(done) == "zone-a"
    changed = copy.deepcopy(done)
    changed["metadata"]["annotations"][ZONES] = "zone-b,zone-a"
    outcome = validated(changed, store)
    assert not outcome.allowed and outcome.reason == "ZoneRequirementMissing"
    assert "zone-b" in outcome.message


def test_pod_claims_changed_between_the_calls_are_judged() -> None:
    """Without its set in the view, a pod's claims name its templates; a claim renamed between
    the calls now names one whose volume is in zone-c."""
    store = view(b.pv("pv-x", "zone-c"), b.pvc("logs-other-1", volume="pv-x"))
    pod = b.sts_pod("other", 1, annotations={ZONES: "zone-a,zone-b,zone-c"})
    done = mutated(pod, store)
    assert pinned_zone(done) == "zone-b"
    changed = copy.deepcopy(done)
    changed["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "logs-other-1"
    outcome = validated(changed, store)
    assert not outcome.allowed and "zone-c" in outcome.message


def test_another_ordinal_is_planned_for_itself() -> None:
    store = view()
    done = mutated(b.sts_pod("db", 1), store)
    renamed = json.loads(json.dumps(done).replace("db-1", "db-2"))
    renamed["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "2"
    outcome = validated(renamed, store)
    assert not outcome.allowed and "zone-c" in outcome.message
    assert len(store.derived()) == 1  # db-1's plan is still waiting for db-1


def test_kept_plans_are_bounded() -> None:
    """Pods whose validation never comes here (denied by another webhook, or validated by
    another replica) leave at most KEPT_PLANS plans behind, the oldest going first."""
    store = view()
    for ordinal in range(KEPT_PLANS + 40):
        mutated(b.sts_pod("db", ordinal), store)
    kept = store.derived()
    assert len(kept) == KEPT_PLANS
    assert {key[3] for key in kept} == set(range(40, KEPT_PLANS + 40))
