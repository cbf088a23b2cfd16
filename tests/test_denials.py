"""Every refusal as ``kubectl`` shows it: the Status code and reason per cause, the field a
malformed object got wrong, and the pod named as the request names it.

``kubectl`` prints ``admission webhook "..." denied the request: <message>``, and clients that
read the Status (``kubectl ... -o json``, controllers, GitOps tools) branch on its ``reason``:
the reasons are part of the interface, so each cause is pinned here, in the AdmissionReview
response the API server receives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.model.tables import TABLES
from webhook.rules.admission import Endpoint
from webhook.wire import review

ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = {"stszone.io/zones": "a,b,c"}
NODE_ORDINAL = {
    **ZONES,
    "stszone.io/mode": "node-ordinal",
    "stszone.io/node-label": "example.io/node",
}
SCHEDULER = {**ZONES, "stszone.io/mode": "scheduler", "stszone.io/scheduler-name": "zoned"}
NODES = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]


def answer(endpoint: Endpoint, body: dict[str, Any], store: Store) -> review.ResponseWire:
    """The AdmissionReview response the API server gets from ``/mutate`` or ``/validate``."""
    request = review.from_dict(body)
    answered = review.answer(endpoint, request, store=store, defaults=Defaults())
    return review.response(request, answered)["response"]


def with_set(annotations: dict[str, str], *objects: dict[str, Any]) -> Store:
    return store_from_objects([b.statefulset(annotations=annotations), *NODES, *objects])


def loading() -> Store:
    """A live view whose pods and volumes are not listed yet (the server just started)."""
    store = Store(zones=("a", "b", "c"), live=True)
    store.replace("statefulsets", [])
    return store


def synced_without_sets() -> Store:
    """A live view that has listed everything, but not yet seen the set a pod belongs to."""
    store = Store(zones=("a", "b", "c"), live=True)
    for table in TABLES:
        store.replace(table, [])
    return store


def unnumbered_pod() -> dict[str, Any]:
    pod = b.sts_pod(index_label=False)
    pod["metadata"]["name"] = "db-primary"
    return pod


def malformed_pod() -> dict[str, Any]:
    pod = b.sts_pod()
    pod["spec"]["affinity"] = "zone-a"
    return pod


def on_node(node: str) -> dict[str, Any]:
    pod = b.sts_pod(ordinal=0)
    pod["spec"]["nodeName"] = node
    return pod


def two_claims() -> Store:
    return store_from_objects(
        [
            b.statefulset(templates=("data", "logs"), annotations=ZONES),
            b.pvc("data-db-0", volume="pv-a"),
            b.pv("pv-a", "a"),
            b.pvc("logs-db-0", volume="pv-b"),
            b.pv("pv-b", "b"),
        ]
    )


def scaled(old: int, new: int, *objects: dict[str, Any]) -> tuple[dict[str, Any], Store]:
    body = b.recorded_scale("db", namespace="ns", old=old, new=new)
    return body, store_from_objects([b.statefulset(replicas=old, annotations=ZONES), *objects])


def unlabelled_pod_removed() -> tuple[dict[str, Any], Store]:
    """db-2, the only pod that could hold zone c, runs on a node without a zone label."""
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in ((0, "na"), (1, "nb"), (2, "nx"))]
    return scaled(3, 2, *NODES, b.node("nx", None), *pods)


CASES: list[tuple[str, Endpoint, Callable[[], tuple[dict[str, Any], Store]], int, str]] = [
    # (cause, endpoint, the review and the view, Status code, Status reason)
    ("a pod with no ordinal", "mutate", lambda: (b.review(unnumbered_pod()), with_set(ZONES)), 403, "NoOrdinal"),
    ("no zone known at all", "mutate", lambda: (b.review(b.sts_pod()), store_from_objects([])), 403, "NoZones"),
    ("the pod rules out its zone", "mutate", lambda: (b.review(b.sts_pod(node_selector={ZONE_KEY: "b"})), with_set(ZONES)), 403, "ZoneConflict"),
    ("the pod rules out its node", "mutate", lambda: (b.review(b.sts_pod(node_selector={"example.io/node": "7"})), with_set(NODE_ORDINAL)), 403, "NodeConflict"),
    ("spec.nodeName in another zone", "mutate", lambda: (b.review(on_node("nb")), with_set(ZONES)), 403, "NodeNameConflict"),
    ("volumes in two zones", "mutate", lambda: (b.review(b.sts_pod(claims=("data", "logs"))), two_claims()), 403, "VolumeZoneConflict"),
    ("its set's annotations are malformed", "mutate", lambda: (b.review(b.sts_pod()), with_set({"stszone.io/zones": "a,,a"})), 403, "Invalid"),
    ("its set is not in the view yet", "mutate", lambda: (b.review(b.sts_pod()), synced_without_sets()), 403, "StatefulSetNotYetSeen"),
    ("the view is still loading", "mutate", lambda: (b.review(b.sts_pod()), loading()), 403, "ViewNotSynced"),
    ("a malformed object", "mutate", lambda: (b.review(malformed_pod()), with_set(ZONES)), 400, "BadRequest"),
    ("malformed annotations on the set", "validate", lambda: (b.review(b.statefulset(annotations={"stszone.io/mode": "x"})), with_set(ZONES)), 422, "Invalid"),
    ("a template that rules out a zone", "validate", lambda: (b.review(b.statefulset(annotations=ZONES, node_selector={ZONE_KEY: "a"})), with_set(ZONES)), 403, "ZoneConflict"),
    ("a pod without its zone", "validate", lambda: (b.review(b.sts_pod()), with_set(ZONES)), 403, "ZoneRequirementMissing"),
    ("a pod without its node pin", "validate", lambda: (b.review(b.sts_pod()), with_set(NODE_ORDINAL)), 403, "NodeRequirementMissing"),
    ("a pod without its scheduler", "validate", lambda: (b.review(b.sts_pod()), with_set(SCHEDULER)), 403, "SchedulerRequirementMissing"),
    ("a scale-down dropping a zone", "validate", lambda: scaled(3, 2), 403, "ZoneLoss"),
    ("a scale-down that may drop a zone", "validate", unlabelled_pod_removed, 403, "ZoneUnknown"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "make", "code", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_each_refusal_carries_its_status_code_and_reason(
    endpoint: Endpoint, make: Callable[[], tuple[dict[str, Any], Store]], code: int, reason: str
) -> None:
    """allowed: false with a Failure Status whose code and reason say which rule refused."""
    body, store = make()
    response = answer(endpoint, body, store)
    assert response["allowed"] is False and "patch" not in response
    status = response["status"]
    assert (status["code"], status["reason"], status["status"]) == (code, reason, "Failure")
    assert status["message"]


def broken(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with the field at ``path`` (dots, ``[i]`` for list items) set."""
    obj = copy.deepcopy(obj)
    *parents, last = path.split(".")
    here = obj
    for part in parents:
        name, _, index = part.partition("[")
        here = here.setdefault(name, {})
        if index:
            here = here[int(index.rstrip("]"))]
    here[last] = value
    return obj


AFFINITY = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
POD_WITH_A_TERM = b.sts_pod(affinity=b.zone_affinity([("disk", "In", ["ssd"])]))

MALFORMED: list[tuple[Endpoint, str, dict[str, Any], Store, str]] = [
    # (endpoint, kind, object, view, what the message says after "malformed <kind>: ")
    ("mutate", "Pod", broken(b.sts_pod(), "spec", []), with_set(ZONES), "spec must be an object, got list"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.affinity", "zone-a"), with_set(ZONES), "spec.affinity must be an object, got str"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.affinity.nodeAffinity", []), with_set(ZONES), "spec.affinity.nodeAffinity must be an object, got list"),
    ("mutate", "Pod", broken(b.sts_pod(), AFFINITY, "x"), with_set(ZONES), f"{AFFINITY} must be an object, got str"),
    ("mutate", "Pod", broken(b.sts_pod(), f"{AFFINITY}.nodeSelectorTerms", {}), with_set(ZONES), f"{AFFINITY}.nodeSelectorTerms must be a list, got dict"),
    ("mutate", "Pod", broken(POD_WITH_A_TERM, f"{AFFINITY}.nodeSelectorTerms[0].matchExpressions", "x"), with_set(ZONES), "nodeSelectorTerms[].matchExpressions must be a list, got str"),
    ("mutate", "Pod", broken(POD_WITH_A_TERM, f"{AFFINITY}.nodeSelectorTerms[0].matchFields", "x"), with_set(ZONES), "nodeSelectorTerms[].matchFields must be a list, got str"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.nodeSelector", ["a"]), with_set(ZONES), "spec.nodeSelector must be an object, got list"),
    ("validate", "Pod", broken(b.sts_pod(), "spec.nodeSelector", ["a"]), with_set(ZONES), "spec.nodeSelector must be an object, got list"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.volumes", "data"), with_set(ZONES), "spec.volumes must be a list, got str"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.nodeName", 5), with_set(ZONES), "spec.nodeName must be a string, got int"),
    ("mutate", "Pod", broken(b.sts_pod(), "metadata.labels", {"stszone.io/skip": True}), with_set(ZONES), "metadata.labels.stszone.io/skip must be a string, got bool"),
    ("mutate", "Pod", broken(b.sts_pod(), "metadata.annotations", {"team": 7}), with_set(ZONES), "metadata.annotations.team must be a string, got int"),
    ("mutate", "Pod", broken(b.sts_pod(), "spec.schedulerName", 5), with_set(SCHEDULER), "spec.schedulerName must be a string, got int"),
    ("validate", "Pod", broken(b.sts_pod(), "spec.schedulerName", 5), with_set(SCHEDULER), "spec.schedulerName must be a string, got int"),
    ("mutate", "PersistentVolumeClaim", broken(b.pvc("data-db-0"), "spec.volumeName", 5), with_set(ZONES), "spec.volumeName must be a string, got int"),
    ("mutate", "PersistentVolumeClaim", broken(b.pvc("data-db-0"), "metadata.labels", {"app": 1}), with_set(ZONES), "metadata.labels.app must be a string, got int"),
    ("mutate", "PersistentVolumeClaim", broken(b.pvc("data-db-0"), "metadata.annotations", {"team": 7}), with_set(ZONES), "metadata.annotations.team must be a string, got int"),
    ("validate", "Scale", broken(b.scale(replicas=2), "spec.replicas", "2"), with_set(ZONES), "spec.replicas must be an integer, got str"),
    ("mutate", "StatefulSet", broken(b.statefulset(), "metadata.annotations", {"team": 7}), with_set(ZONES), "metadata.annotations.team must be a string, got int"),
    ("validate", "StatefulSet", broken(b.statefulset(), "metadata.annotations", {"team": 7}), with_set(ZONES), "metadata.annotations.team must be a string, got int"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "kind", "obj", "store", "says"),
    [pytest.param(*case, id=f"{case[0]}-{case[4].split(' must')[0]}") for case in MALFORMED],
)
def test_a_malformed_object_is_refused_naming_the_field(
    endpoint: Endpoint, kind: str, obj: dict[str, Any], store: Store, says: str
) -> None:
    """A hand-written object of the wrong shape gets a 400 naming the field's full path and
    what it must be, never a crash and never another field's name."""
    old = b.scale(replicas=3) if kind == "Scale" else None
    body = b.review(obj, operation="UPDATE" if old else "CREATE", old=old)
    status = answer(endpoint, body, store)["status"]
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == f"malformed {kind}: {says}"


def test_the_old_object_of_an_update_is_named_as_such() -> None:
    """An UPDATE whose oldObject is malformed: the message says oldObject, not the new one."""
    old = broken(b.statefulset(), "metadata.annotations", ["x"])
    new = b.statefulset(annotations={"stszone.io/zones": "a,,a"})
    status = answer("validate", b.review(new, operation="UPDATE", old=old), with_set(ZONES))
    assert status["status"]["message"] == (
        "malformed StatefulSet: oldObject.metadata.annotations must be an object, got list"
    )


def test_a_malformed_uid_of_a_statefulset_update_is_named_in_full() -> None:
    """A hand-written UPDATE whose metadata.uid is a number: a 400 naming metadata.uid (what
    the Events about the set would carry), as every other malformed field is named."""
    old = b.statefulset(annotations={"stszone.io/zones": "a,b,c"})
    new = broken(old, "metadata.uid", 5)
    status = answer("validate", b.review(new, operation="UPDATE", old=old), with_set(ZONES))
    assert (status["status"]["code"], status["status"]["message"]) == (
        400,
        "malformed StatefulSet: metadata.uid must be a string, got int",
    )


def renamed(pod: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A pod of ordinal 5 (its pod-index label) named ``name``, or unnamed (generateName)."""
    pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "5"
    if name is None:
        del pod["metadata"]["name"]
    else:
        pod["metadata"]["name"] = name
    return pod


@pytest.mark.parametrize(
    ("endpoint", "pod", "says"),
    [
        ("mutate", b.sts_pod(node_selector={ZONE_KEY: "a"}), "pod {} has nodeSelector"),
        ("mutate", on_node("na"), "pod {} names spec.nodeName na"),
        ("validate", b.sts_pod(), "pod {} reached validation without"),
    ],
    ids=["own-constraint", "node-name", "validation"],
)
@pytest.mark.parametrize(
    ("name", "called"), [("db-4", "db-4"), (None, None)], ids=["named", "generate-name"]
)
def test_a_refused_pod_is_named_as_the_request_names_it(
    endpoint: Endpoint, pod: dict[str, Any], says: str, name: str | None, called: str | None
) -> None:
    """The pod's own name, even when it disagrees with its pod-index label (a hand-written
    pod); without a name yet, its set and ordinal (mutation) or its ordinal (the rest)."""
    fallback = "db-5" if "has nodeSelector" in says else "ordinal 5"
    message = answer(endpoint, b.review(renamed(copy.deepcopy(pod), name)), with_set(ZONES))[
        "status"
    ]["message"]
    assert message.startswith(says.format(called or fallback)), message


@pytest.mark.parametrize(("name", "called"), [("db-primary", "db-primary"), ("", "(unnamed)")])
def test_a_pod_without_an_ordinal_is_told_where_one_comes_from(name: str, called: str) -> None:
    pod = unnumbered_pod()
    pod["metadata"]["name"] = name
    status = answer("mutate", b.review(pod), with_set(ZONES))["status"]
    assert status["message"] == (
        f"pod {called} of StatefulSet db has no ordinal (no apps.kubernetes.io/pod-index "
        "label, no -N name suffix)"
    )
