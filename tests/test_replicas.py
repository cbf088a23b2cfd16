"""Replicas whose views differ only in how far their watches have got.

The API server sends a claim's create to one replica, its pod's ``/mutate`` to another and the
pod's ``/validate`` to a third (:mod:`tests.replicas`). Whatever each has seen, what they admit
together must hold: a pod pinned where its claim's volume will be, never a zone recorded on a
claim that its pod contradicts.
"""

from __future__ import annotations

from tests import builders as b
from tests.replicas import JSON, Event, admitted, send, three_zones, view

CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"
TEMPLATE = {"stszone.io/storage-class-template": "ssd-{zone}"}


def _db(zones: str, replicas: int, *, template: bool = True) -> JSON:
    annotations = {"stszone.io/zones": zones, **(TEMPLATE if template else {})}
    return b.statefulset(annotations=annotations, replicas=replicas)


def _cluster() -> list[JSON]:
    """db, zones a,b,c, its three pods and bound volumes in their rule zones."""
    objects = [*three_zones(), _db("a,b,c", 3)]
    for ordinal, zone in enumerate("abc"):
        objects.append(b.sts_pod(ordinal=ordinal, node=f"n{zone}"))
        objects.append(b.pvc(f"data-db-{ordinal}", volume=f"pv{ordinal}"))
        objects.append(b.pv(f"pv{ordinal}", zone))
    return objects


def _claim_review(name: str) -> JSON:
    claim = b.pvc(name)
    claim["spec"]["storageClassName"] = "standard"
    body = b.review(claim)
    body["request"]["userInfo"]["username"] = CONTROLLER
    return body


def _zone(answer_object: JSON) -> str | None:
    zone: str | None = answer_object["metadata"].get("annotations", {}).get("stszone.io/zone")
    return zone


def test_pod_goes_where_a_lagging_replica_sent_its_claims_class() -> None:
    """db's zones go from a,b,c to c,a,b with a scale to 6. Ordinal 3's claim reaches a replica
    that has not seen the change yet: zone a, class ssd-a, for good (its volume is provisioned
    in a). Its pod then reaches replicas that have seen both: pinned to c by the new list, it
    would wait forever for a node that can mount a volume in a. It follows its claim's zone."""
    cluster = _cluster()
    events: list[Event] = [("MODIFIED", _db("c,a,b", 6))]
    claim = send("mutate", _claim_review("data-db-3"), view(cluster, []))
    assert claim.allowed and _zone(claim.edited) == "a"
    assert claim.edited["spec"]["storageClassName"] == "ssd-a"
    events.append(("ADDED", claim.edited))
    current = view(cluster, events)
    mutated, validated = admitted(
        b.review(b.sts_pod(ordinal=3)), mutating=current, validating=current
    )
    assert mutated.allowed and validated is not None and validated.allowed
    assert _zone(mutated.edited) == "a"
    terms = mutated.edited["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
            ]
        }
    ]


def test_without_a_template_an_unbound_claims_zone_does_not_hold_its_pod() -> None:
    """Without a storage-class template the claim's class names no zone: its volume is made
    where the pod goes, so the pod goes by the zone list the view has (here zone a's nodes are
    gone with a change of zones: following the claim's old zone would leave it Pending)."""
    cluster = [*three_zones(), _db("a,b,c", 3, template=False)]
    claim = send("mutate", _claim_review("data-db-3"), view(cluster, []))
    assert claim.allowed and _zone(claim.edited) == "a"
    events: list[Event] = [
        ("MODIFIED", _db("c,b", 6, template=False)),
        ("ADDED", claim.edited),
        ("DELETED", b.node("na", "a")),
    ]
    mutated, validated = admitted(
        b.review(b.sts_pod(ordinal=3)),
        mutating=view(cluster, events),
        validating=view(cluster, events),
    )
    assert mutated.allowed and validated is not None and validated.allowed
    assert _zone(mutated.edited) == "b"


def test_validation_by_a_replica_with_another_zone_list_says_so() -> None:
    """db-3's /mutate reaches a replica that has not seen db's new zone list (it pins the pod to
    a), its /validate one that has (c). The refusal is right (one view is behind) and the
    StatefulSet controller retries it; its message, on the controller's FailedCreate Event, must
    not send the user to check a MutatingWebhookConfiguration that did its job."""
    cluster = _cluster()
    events: list[Event] = [("MODIFIED", _db("c,a,b", 6))]
    mutated, validated = admitted(
        b.review(b.sts_pod(ordinal=3)), mutating=view(cluster, []), validating=view(cluster, events)
    )
    assert mutated.allowed and _zone(mutated.edited) == "a"
    assert validated is not None and not validated.allowed
    assert "MutatingWebhookConfiguration" not in validated.message
    assert "pinned to a" in validated.message and "in c" in validated.message
    assert "retr" in validated.message
