"""Which decisions become Events: each kind of decision and its notice, and none for dry runs.

A notice's note is the warning or denial users already get from ``kubectl``; its ``regarding``
is the StatefulSet by name and uid (``kubectl describe`` finds Events by uid), its ``related``
the pod it places. A second invocation with nothing left to patch says nothing new, and the
server posts nothing of a dry run.
"""

from __future__ import annotations

import copy
from typing import Any

from tests import builders as b
from tests.conftest import ServeFactory
from tests.test_guard import NODES
from tests.test_guard_motion import claimed, cluster, placed
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model import notices
from webhook.model.store import Store
from webhook.rules.admission import Endpoint
from webhook.server.runtime import Runtime
from webhook.wire import review
from webhook.wire.patch import apply

JSON = dict[str, Any]
ABC = {"stszone.io/zones": "a,b,c"}
SET_UID = "5f3c0c6e-0d2b-4c43-9b7a-2f7f1b1a0c11"


def answer(endpoint: Endpoint, body: JSON, store: Store) -> review.Answer:
    return review.answer(endpoint, review.from_dict(body), store=store, defaults=Defaults())


def owned_pod(ordinal: int) -> JSON:
    pod = b.sts_pod(ordinal=ordinal)
    pod["metadata"]["ownerReferences"][0]["uid"] = SET_UID
    return pod


def set_ref() -> notices.ObjectRef:
    return notices.statefulset("ns", "db", uid=SET_UID)


def test_a_pod_following_its_volume_is_told_once() -> None:
    """db-0's claim is bound to a volume in c (the rule says a): PlacedWithData on the set,
    related to the pod, with the warning as its note; the reinvocation tells nothing more."""
    store = store_from_objects(
        [
            *NODES,
            b.statefulset(annotations=ABC),
            b.pvc("data-db-0", volume="pv-0"),
            b.pv("pv-0", "c"),
        ]
    )
    pod = owned_pod(0)
    first = answer("mutate", b.review(pod), store)
    assert first.patch and first.notices == (
        notices.placed_with_data(set_ref(), pod=notices.pod("ns", "db-0"), note=first.warnings[0]),
    )
    again = answer("mutate", b.review(apply(pod, first.patch)), store)
    assert again.warnings == first.warnings and again.notices == ()


def test_a_pod_whose_volume_can_attach_nowhere_is_a_warning_event() -> None:
    """db-0's volume is pinned by hostname to a node that is gone: NowhereToRun, a Warning."""
    local = b.pv("pv-0", "unused")
    local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gone"]}
            ]
        }
    ]
    store = store_from_objects(
        [*NODES, b.statefulset(annotations=ABC), b.pvc("data-db-0", volume="pv-0"), local]
    )
    answered = answer("mutate", b.review(owned_pod(0)), store)
    (told,) = answered.notices
    assert (told.reason, told.type, told.related) == (
        "NowhereToRun",
        "Warning",
        notices.pod("ns", "db-0"),
    )
    assert told.note == answered.warnings[0] and told.regarding == set_ref()


def test_a_pod_in_its_rule_zone_is_not_told() -> None:
    store = store_from_objects([*NODES, b.statefulset(annotations=ABC)])
    assert answer("mutate", b.review(owned_pod(1)), store).notices == ()


def scale_body(old: int, new: int) -> JSON:
    body = b.review(b.scale(replicas=new), operation="UPDATE", old=b.scale(replicas=old))
    for obj in (body["request"]["object"], body["request"]["oldObject"]):
        obj["metadata"]["uid"] = SET_UID
    return body


def test_a_refused_scale_down_is_a_warning_event_on_the_set() -> None:
    """4 -> 3 would drop c (db-3 is its only pod): ScaleDownRefused, the denial as its note."""
    store = cluster(placed("na", "nb", "na", "nc"))
    refused = answer("validate", scale_body(4, 3), store)
    assert not refused.allowed
    assert refused.notices == (notices.scale_down_refused(set_ref(), note=refused.message),)


def test_a_refused_scale_down_in_an_update_of_the_set_is_told_on_it_by_uid() -> None:
    """replicas 4 -> 3 written into the StatefulSet itself (kubectl apply, not /scale): the
    Event names the set by its uid too, or ``kubectl describe statefulset db`` (which asks
    for the Events of that uid) would not show why its apply was refused."""
    store = cluster(placed("na", "nb", "na", "nc"))
    before, after = (b.statefulset(annotations=ABC, replicas=n) for n in (4, 3))
    for obj in (before, after):
        obj["metadata"]["uid"] = SET_UID
    refused = answer("validate", b.review(after, operation="UPDATE", old=before), store)
    assert not refused.allowed
    assert refused.notices == (notices.scale_down_refused(set_ref(), note=refused.message),)


def test_a_forced_zone_loss_is_a_warning_event() -> None:
    store = cluster(
        placed("na", "nb", "na", "nc"),
        annotations={**ABC, "stszone.io/allow-zone-loss": "true"},
    )
    forced = answer("validate", scale_body(4, 3), store)
    assert forced.allowed
    assert forced.notices == (notices.zone_loss_allowed(set_ref(), note=forced.warnings[-1]),)


def test_a_zone_left_to_a_node_not_ready_is_a_warning_event() -> None:
    nodes = [*NODES, b.node("nc2", "c", ready="False")]
    store = cluster(placed("na", "nb", "nc2", "nc"), nodes=nodes)
    allowed = answer("validate", scale_body(4, 3), store)
    assert allowed.allowed
    assert allowed.notices == (notices.zone_on_not_ready_node(set_ref(), note=allowed.warnings[0]),)


def test_claims_a_scale_down_deletes_are_told() -> None:
    store = cluster(
        placed(*["na", "nb", "nc"] * 2), extra=claimed(6, reclaim="Delete"), when_scaled="Delete"
    )
    allowed = answer("validate", scale_body(6, 3), store)
    assert allowed.allowed
    (told,) = allowed.notices
    assert (told.reason, told.type, told.note) == ("ClaimsDeleted", "Normal", allowed.warnings[0])


def test_a_new_zone_list_that_moves_members_is_told() -> None:
    """a,b,c -> c,b,a moves ordinals 0 and 2 when re-created: MembersMoved, with that warning."""
    store = cluster(placed("na", "nb", "nc"))
    before = b.statefulset(annotations=ABC, replicas=3)
    after = copy.deepcopy(before)
    after["metadata"]["annotations"]["stszone.io/zones"] = "c,b,a"
    for obj in (before, after):
        obj["metadata"]["uid"] = SET_UID
    answered = answer("validate", b.review(after, operation="UPDATE", old=before), store)
    moved = [w for w in answered.warnings if "moves" in w]
    assert answered.allowed and answered.notices == (
        notices.members_moved(set_ref(), note=moved[0]),
    )


async def test_the_server_posts_a_decisions_notices_and_never_a_dry_runs(
    serve: ServeFactory,
) -> None:
    """Through the real handler: a refused scale-down queues its notice; the same request as a
    dry run is answered alike and queues nothing."""
    store = cluster(placed("na", "nb", "na", "nc"))
    runtime = Runtime(store=store, defaults=Defaults())
    served = await serve(runtime=runtime)
    dry = scale_body(4, 3)
    dry["request"]["dryRun"] = True
    status, dry_answer = await served.post_json("/validate", dry)
    assert status == 200 and not dry_answer["response"]["allowed"]
    assert len(runtime.outbox) == 0 and runtime.outbox.dry_runs == 1
    status, real = await served.post_json("/validate", scale_body(4, 3))
    assert real["response"]["status"] == dry_answer["response"]["status"]
    (queued,) = runtime.outbox.drain()
    assert (
        queued.reason == "ScaleDownRefused" and queued.note == real["response"]["status"]["message"]
    )
