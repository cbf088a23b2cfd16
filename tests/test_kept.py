"""What is kept for a set while its part of the view holds (``webhook.model.kept``).

``/mutate`` keeps the pod's plan for the ``/validate`` call that follows it, and every
scale-down reads where the set's pods run, kept too. Keeping must never change an answer: these
tests change, between two calls, each thing a kept answer comes from -- the view (a volume bound,
a pod moved, a node relabelled), the pod's ordinal and claims -- and require the second call to
judge by what the view and the request give now.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable
from typing import Any

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.annotations import ZONES
from webhook.model.kept import Kept
from webhook.model.records import claim_info, node_info, pod_info, volume_info
from webhook.model.store import Store
from webhook.rules import admission
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
    assert len(store.kept) == 1
    assert validated(pod, store).allowed
    assert len(store.kept) == 0  # taken: the next pod's validation works out its own
    assert validated(pod, store).allowed  # and a second validation works it out again


def test_a_plan_taken_is_the_plan_worked_out() -> None:
    """The same answers with and without a kept plan, over every ordinal's pod."""
    for ordinal in range(6):
        store = view()
        pod = mutated(b.sts_pod("db", ordinal), store)
        kept = validated(pod, store)
        assert len(store.kept) == 0
        assert validated(pod, store) == kept


def test_a_change_to_the_view_between_the_calls_is_judged() -> None:
    """Between the calls, the claim of ordinal 1 binds to a volume in zone-c: the pod pinned to
    zone-b by the rule can never run there, and validation must say so."""
    store = view()
    pod = mutated(b.sts_pod("db", 1), store)
    assert pinned_zone(pod) == "zone-b"
    store.put("volumes", volume_info(b.pv("pv-1", "zone-c")))
    store.put("claims", claim_info(b.pvc("data-db-1", volume="pv-1")))
    outcome = validated(pod, store)
    assert not outcome.allowed and outcome.reason == "ZoneRequirementMissing"
    assert "zone-c" in outcome.message


def test_every_change_the_plan_reads_makes_it_stale() -> None:
    """A node put or deleted, a table re-listed, a claim of the namespace, a pod of the set:
    the plan kept before is never given out after."""
    changes: list[Callable[[Store], None]] = [
        lambda s: s.put("nodes", node_info(b.node("nd", "zone-d"))),
        lambda s: s.delete("nodes", "nc"),
        lambda s: s.replace("volumes", [volume_info(b.pv("pv-3", "zone-a"))]),
        lambda s: s.put("claims", claim_info(b.pvc("data-db-4"))),
        lambda s: s.put("pods", pod_info(b.sts_pod("db", 0, node="na"))),
    ]
    for change in changes:
        store = view()
        pod = b.sts_pod("db", 1)
        request = review.from_dict(b.review(pod))
        mutated(pod, store)
        what = next(iter(store.kept._entries))[2]
        assert store.kept.get("ns", "db", what) is not None
        change(store)
        assert store.kept.get("ns", "db", what) is None
        assert admission.validate(request, store=store, defaults=Defaults()).allowed is False


def test_a_record_put_unchanged_keeps_it() -> None:
    """A watch event that changes nothing a record holds (a node heartbeat) is no change."""
    store = view()
    pod = mutated(b.sts_pod("db", 1), store)
    store.put("nodes", node_info(b.node("na", "zone-a")))
    assert len(store.kept) == 1
    assert validated(pod, store).allowed
    assert len(store.kept) == 0


def test_a_set_the_view_lacks_keeps_nothing() -> None:
    """Its revision does not follow its pods: its plans are worked out each time."""
    store = view()
    mutated(b.sts_pod("other", 0, annotations={ZONES: "zone-a,zone-b"}), store)
    assert len(store.kept) == 0


def test_pod_claims_changed_between_the_calls_are_judged() -> None:
    """A claim renamed between the calls names one whose volume is in zone-c."""
    store = view(b.pv("pv-x", "zone-c"), b.pvc("logs-db-1", volume="pv-x"))
    done = mutated(b.sts_pod("db", 1), store)
    assert pinned_zone(done) == "zone-b"
    changed = copy.deepcopy(done)
    changed["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "logs-db-1"
    outcome = validated(changed, store)
    assert not outcome.allowed and "zone-c" in outcome.message


def test_another_ordinal_is_planned_for_itself() -> None:
    store = view()
    done = mutated(b.sts_pod("db", 1), store)
    renamed = json.loads(json.dumps(done).replace("db-1", "db-2"))
    renamed["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "2"
    outcome = validated(renamed, store)
    assert not outcome.allowed and "zone-c" in outcome.message
    assert len(store.kept) == 1  # db-1's plan is still waiting for db-1


def test_kept_answers_are_bounded_the_oldest_going_first() -> None:
    """Pods whose validation never comes here (denied by another webhook, or validated by
    another replica) leave at most ``limit`` answers behind."""
    store = view()
    store.kept = Kept(store, limit=50)
    for ordinal in range(90):
        mutated(b.sts_pod("db", ordinal), store)
    assert len(store.kept) == 50
    assert {plan_ordinal(key[2]) for key in store.kept._entries} == set(range(40, 90))


def plan_ordinal(what: Hashable) -> int:
    """The ordinal in what a kept plan is filed under (``("plan", ordinal, ...)``)."""
    assert isinstance(what, tuple) and what[0] == "plan"
    ordinal: int = what[1]
    return ordinal


def scale(store: Store, new: int) -> review.Outcome:
    body = b.recorded_scale("db", namespace="ns", old=6, new=new)
    return admission.validate(review.from_dict(body), store=store, defaults=Defaults())


def six_pods() -> Store:
    """db (6 replicas) with ordinals 0-5 running in zones a, b, c, a, b, c."""
    nodes = ["na", "nb", "nc"]
    pods = [b.sts_pod("db", i, node=nodes[i % 3], phase="Running") for i in range(6)]
    sts = b.statefulset(replicas=6, annotations={ZONES: "zone-a,zone-b,zone-c"})
    return store_from_objects([sts, *NODES, *pods])


def test_where_the_pods_run_is_read_again_once_a_pod_moves() -> None:
    """Scale 6 -> 2 drops zone-c while ordinal 2 is there; once it is re-created in zone-a
    and ordinal 1 in zone-c, the same scale-down keeps every zone but zone-b."""
    store = six_pods()
    first = scale(store, 2)
    assert not first.allowed and "zone-c" in first.message
    assert scale(store, 3).allowed  # kept zones read from the same kept pod zones
    store.put("pods", pod_info(b.sts_pod("db", 1, node="nc", phase="Running")))
    second = scale(store, 2)
    assert not second.allowed and "zone-b" in second.message and "zone-c" not in second.message


def test_where_the_pods_run_is_read_again_once_a_node_is_relabelled() -> None:
    """Once node nc is in zone-b, ordinals 2 and 5 hold no zone the kept ones do not."""
    store = six_pods()
    assert not scale(store, 2).allowed
    store.put("nodes", node_info(b.node("nc", "zone-b")))
    assert scale(store, 2).allowed


class Revisions:
    """A view of one set, ns/db, whose revision the test moves by hand."""

    def __init__(self) -> None:
        self.statefulsets = {("ns", "db"): object()}
        self.revision = 7

    def revision_of(self, namespace: str, statefulset: str) -> int:
        return self.revision


def test_an_answer_is_taken_once_and_got_while_its_revision_holds() -> None:
    revisions = Revisions()
    kept = Kept(revisions)
    answer = ["worked", "out"]
    kept.put("ns", "db", "what", answer)
    assert kept.get("ns", "db", "what") is answer
    assert kept.get("ns", "db", "what") is answer  # get leaves it
    assert kept.get("ns", "db", "other") is None
    assert kept.take("ns", "db", "what") is answer
    assert kept.take("ns", "db", "what") is None  # taken
    kept.put("ns", "db", "what", answer)
    revisions.revision = 8
    assert kept.get("ns", "db", "what") is None
    assert kept.take("ns", "db", "what") is None
    assert len(kept) == 0  # a stale answer taken is gone too


def test_where_the_pods_run_follows_each_change_and_key() -> None:
    store = six_pods()
    first = store.pod_zones("ns", "db", "topology.kubernetes.io/zone")
    by_host = store.pod_zones("ns", "db", "kubernetes.io/hostname")
    assert by_host.zones == {i: ["na", "nb", "nc"][i % 3] for i in range(6)}
    assert first.residues(3) is first.residues(3)
    store.put("pods", pod_info(b.sts_pod("db", 1, node="nc", phase="Running")))
    again = store.pod_zones("ns", "db", "topology.kubernetes.io/zone")
    assert again != first and again.zones[1] == "zone-c"
