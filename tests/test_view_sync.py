"""Before the live view has synced: no guessing from an empty view.

Until every watch has listed its resource, an object missing from the view proves nothing: pods,
claims and scale-downs are refused with a retryable ``ViewNotSynced`` (the StatefulSet controller
sends its pods and claims again, an HPA its scale), the way a set not seen yet is. ``/readyz``
keeps Service traffic away, but URL-registered webhooks and requests racing a restart reach the
server before it. Offline views (``--zones``, ``--cluster FILE``) are complete by definition.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.fakeapi import FakeApi, Fault, eventually
from tests.test_live_admission import live_app, mutate, pinned_zone
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.model.tables import TABLES, Table
from webhook.rules.admission import Endpoint
from webhook.wire import review
from webhook.wire.review import Answer

DEFAULTS = Defaults()


def partly_listed(objects: list[Any], tables: Iterable[Table], **kw: Any) -> Store:
    """A live view whose watches have listed only ``tables`` (the others still loading)."""
    full = store_from_objects(objects)
    live = Store(live=True, **kw)
    # The Kafka node pool tables are listed: these tests are about the StatefulSet view.
    for table in ("nodepools", "poolpods", *tables):
        live.replace(table, full.table(table).values())
    return live


def send(endpoint: str, body: dict[str, Any], store: Store) -> Answer:
    request = review.from_dict(body)
    which: Endpoint = "mutate" if endpoint == "mutate" else "validate"
    return review.answer(which, request, store=store, defaults=DEFAULTS)


def retryable(outcome: Answer) -> bool:
    return (
        not outcome.allowed
        and (outcome.code, outcome.reason) == (403, "ViewNotSynced")
        and "still loading" in outcome.message
        and "retry in a moment" in outcome.message
    )


def test_pod_is_refused_until_volumes_are_listed_then_follows_its_volume() -> None:
    """Recorded db-0 (review 003): its claim is bound to a zone-c volume; the rule says zone-a.
    With volumes and claims not listed yet, pinning it would put it where its data never is:
    refused by both webhooks, then, once listed, placed in zone-c."""
    view = partly_listed(b.recorded_lists(), ("nodes", "statefulsets", "pods", "namespaces"))
    assert retryable(send("mutate", b.fixture_review("003-Pod-CREATE"), view))
    assert retryable(send("validate", b.fixture_review("004-Pod-CREATE"), view))
    full = store_from_objects(b.recorded_lists())
    for table in ("volumes", "claims"):
        view.replace(table, full.table(table).values())
    outcome = send("mutate", b.fixture_review("003-Pod-CREATE"), view)
    assert outcome.allowed and outcome.edited is not None
    assert outcome.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-c"


def test_controller_claim_is_refused_until_statefulsets_and_volumes_are_listed() -> None:
    """Recorded data-db-0 (review 001, from the StatefulSet controller): without the sets its
    owner is unknown; without the volumes its zone is. A user's claim no set produces passes
    once the sets are listed (before, whose it is cannot be told)."""
    claim = b.fixture_review("001-PersistentVolumeClaim-CREATE")
    assert retryable(send("mutate", claim, partly_listed(b.recorded_lists(), ("nodes",))))
    sets_only = partly_listed(b.recorded_lists(), ("nodes", "statefulsets", "pods", "namespaces"))
    assert retryable(send("mutate", claim, sets_only))
    other = copy.deepcopy(claim)  # a user's own claim, no set's
    other["request"]["object"]["metadata"]["name"] = "scratch"
    other["request"]["userInfo"]["username"] = "lab-admin"
    assert retryable(send("mutate", other, partly_listed(b.recorded_lists(), ("nodes",))))
    assert send("mutate", other, sets_only).allowed


def test_scale_down_is_refused_until_pods_are_listed() -> None:
    """db's pods sit in a, a, b, c: 4 -> 3 drops c. Without the pods the rule (a, b, c, a) would
    keep every zone; refused for retry instead. Scale-ups, updates that keep the count (an image
    bump) and scaling to 0 need no view."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "na", "nb", "nc"])]
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, replicas=4)
    objects = [*nodes, sts, *pods]
    loading = partly_listed(objects, ("nodes", "statefulsets", "volumes", "claims", "namespaces"))
    assert retryable(
        send("validate", b.recorded_scale("db", namespace="ns", old=4, new=3), loading)
    )
    update = b.review(b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, replicas=3),
                      operation="UPDATE", old=sts)  # fmt: skip
    assert retryable(send("validate", update, loading))
    assert send("validate", b.recorded_scale("db", namespace="ns", old=4, new=6), loading).allowed
    assert send("validate", b.recorded_scale("db", namespace="ns", old=4, new=0), loading).allowed
    bump = copy.deepcopy(sts)
    bump["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    assert send("validate", b.review(bump, operation="UPDATE", old=sts), loading).allowed
    listed = store_from_objects(objects)  # a saved cluster: complete, answered at once
    denied = send("validate", b.recorded_scale("db", namespace="ns", old=4, new=3), listed)
    assert (denied.allowed, denied.reason) == (False, "ZoneLoss")


def test_statefulset_zone_list_waits_for_the_nodes_unless_zones_are_given() -> None:
    """A new set gets its zone list from the nodes: not from an empty node view. With --zones
    for the default key, no node is needed."""
    sts = b.review(b.statefulset(annotations={}))
    assert retryable(send("mutate", sts, partly_listed([], ("statefulsets",))))
    given = send("mutate", sts, partly_listed([], ("statefulsets",), zones=("a", "b")))
    assert given.edited is not None
    assert given.edited["metadata"]["annotations"]["stszone.io/zones"] == "a,b"


OPERATOR_REVIEWS = Path(__file__).parent / "fixtures"
CONTROLLER = "(the StatefulSet controller retries its creates by itself)"
KRUISE = "(kruise-manager retries its creates by itself)"
STRIMZI = "(the Strimzi operator retries its creates by itself)"
HPA = "(an HPA retries its scale by itself)"


def test_a_refusal_for_retry_names_who_sends_that_request_again() -> None:
    """Each request refused while the view loads names the one that sends it again: a pod's and
    a claim's create, the StatefulSet controller (which creates them); a /scale, an HPA (which
    scales the set through that subresource, and never sends a pod); an UPDATE of the set and a
    new set, nobody (a person or a tool sent them: the HPA never writes the set itself)."""
    pods = partly_listed(b.recorded_lists(), ("nodes", "statefulsets", "pods", "namespaces"))
    claims = partly_listed(b.recorded_lists(), ("nodes",))
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, replicas=4)
    scales = partly_listed([sts], ("nodes", "statefulsets", "volumes", "claims", "namespaces"))
    smaller = b.statefulset(annotations={"stszone.io/zones": "a,b,c"}, replicas=3)
    endings = {
        "pod, mutating": send("mutate", b.fixture_review("003-Pod-CREATE"), pods),
        "pod, validating": send("validate", b.fixture_review("004-Pod-CREATE"), pods),
        "claim": send("mutate", b.fixture_review("001-PersistentVolumeClaim-CREATE"), claims),
        "scale": send("validate", b.recorded_scale("db", namespace="ns", old=4, new=3), scales),
        "update": send("validate", b.review(smaller, operation="UPDATE", old=sts), scales),
        "new set": send("mutate", b.review(b.statefulset(annotations={})), partly_listed([], ())),
    }
    assert all(retryable(outcome) for outcome in endings.values()), endings
    assert {what: o.message.rsplit("retry in a moment", 1)[1] for what, o in endings.items()} == {
        "pod, mutating": f" {CONTROLLER}",
        "pod, validating": f" {CONTROLLER}",
        "claim": f" {CONTROLLER}",
        "scale": f" {HPA}",
        "update": "",
        "new set": "",
    }


@pytest.mark.parametrize(
    ("review", "retrier"),
    [
        ("kruise/admission/001-all-StatefulSet-CREATE-web.json", ""),
        ("kruise/admission/004-all-Pod-CREATE-web-0.json", f" {KRUISE}"),
        ("kruise/admission/003-all-PersistentVolumeClaim-CREATE-data-web-0.json", f" {KRUISE}"),
        ("kruise/admission/009-all-Scale-UPDATE-web.json", f" {HPA}"),
        ("kruise/admission/011-all-StatefulSet-UPDATE-web.json", ""),
        ("kruise/admission/013-all-StatefulSet-UPDATE-web.json", ""),
        ("strimzi/admission/002-all-KafkaNodePool-CREATE-broker.json", ""),
        ("strimzi/admission/023-all-Pod-CREATE-my-cluster-broker-0.json", f" {STRIMZI}"),
        (
            "strimzi/admission/006-all-PersistentVolumeClaim-CREATE-data-0-my-cluster-broker-0.json",
            f" {STRIMZI}",
        ),
        ("strimzi/admission/032-all-Scale-UPDATE-broker.json", f" {HPA}"),
    ],
)
def test_a_refusal_for_retry_names_who_retries_that_kind(review: str, retrier: str) -> None:
    """Recorded requests of an Advanced StatefulSet and a KafkaNodePool reaching a view that has
    listed nothing yet: a pod's or a claim's create names kruise-manager, or the Strimzi
    operator, as the one that retries, not the StatefulSet controller, which never sends them;
    a /scale names an HPA; a new workload, and an UPDATE of one (lab-admin's change of
    reserveOrdinals, then of replicas: the HPA writes only /scale), nobody."""
    body = json.loads((OPERATOR_REVIEWS / review).read_text())
    endpoint = "validate" if "-UPDATE-" in review else "mutate"
    outcome = send(endpoint, body, Store(live=True))
    assert retryable(outcome), outcome
    assert outcome.message.rsplit("retry in a moment", 1)[1] == retrier, outcome.message


def listed_without_workloads() -> Store:
    """A live view whose watches have all listed, but not delivered the new workload yet."""
    store = Store(zones=("a", "b", "c"), live=True)
    for table in TABLES:
        store.replace(table, [])
    return store


@pytest.mark.parametrize(
    ("review", "endpoint", "retrier"),
    [
        ("kruise/admission/004-all-Pod-CREATE-web-0.json", "mutate", "kruise-manager"),
        (
            "kruise/admission/003-all-PersistentVolumeClaim-CREATE-data-web-0.json",
            "mutate",
            "kruise-manager",
        ),
        ("kruise/admission/009-all-Scale-UPDATE-web.json", "validate", "an HPA"),
    ],
)
def test_an_advanced_statefulset_not_seen_yet_names_who_retries(
    review: str, endpoint: str, retrier: str
) -> None:
    """Recorded requests of an Advanced StatefulSet's pod, claim and scale-down reaching a view
    that has listed everything but not the set yet: refused for retry, saying kruise-manager
    for the pod and the claim (which it sends again), an HPA for the scale, never the
    StatefulSet controller, which sends none of them."""
    body = json.loads((OPERATOR_REVIEWS / review).read_text())
    outcome = send(endpoint, body, listed_without_workloads())
    assert (outcome.allowed, outcome.reason) == (False, "StatefulSetNotYetSeen"), outcome
    message = outcome.message
    assert retrier in message and "StatefulSet controller" not in message, message
    assert ("HPA" in message) == (retrier == "an HPA"), message
    assert "Advanced StatefulSet" in message, message


def test_a_users_claim_refused_while_loading_names_no_controller() -> None:
    """A claim a user creates while the view has not listed the sets is refused for retry
    (whose claim it is cannot be told yet): no controller will send it again, so none is
    named as the one that retries."""
    claim = b.fixture_review("001-PersistentVolumeClaim-CREATE")
    claim["request"]["userInfo"]["username"] = "lab-admin"
    outcome = send("mutate", claim, partly_listed(b.recorded_lists(), ("nodes",)))
    assert retryable(outcome), outcome
    assert "controller" not in outcome.message and "HPA" not in outcome.message, outcome.message
    assert outcome.message.endswith("retry in a moment"), outcome.message


def test_a_users_claim_of_a_set_refused_while_loading_names_no_controller() -> None:
    """A user pre-creating a set's claim (data-db-0 of cap/db, to restore data into it) once the
    sets are listed but not the volumes: refused for retry (its zone is not known yet), naming no
    controller, as nobody but the user sends it again; the controller's own claim, the same
    request from its account, names the StatefulSet controller."""
    sets_only = partly_listed(b.recorded_lists(), ("nodes", "statefulsets", "pods", "namespaces"))
    controllers = b.fixture_review("001-PersistentVolumeClaim-CREATE")
    users = copy.deepcopy(controllers)
    users["request"]["userInfo"]["username"] = "lab-admin"
    endings = {
        "controller": send("mutate", controllers, sets_only),
        "user": send("mutate", users, sets_only),
    }
    assert all(retryable(outcome) for outcome in endings.values()), endings
    assert {who: o.message.rsplit("retry in a moment", 1)[1] for who, o in endings.items()} == {
        "controller": f" {CONTROLLER}",
        "user": "",
    }


async def test_extender_reports_the_loading_view_as_its_error(serve: ServeFactory) -> None:
    """kube-scheduler shows the filter's Error on the pod and retries it."""
    pods = [b.sts_pod(ordinal=0, node="na")]
    view = partly_listed([b.node("na", "a"), *pods], ("nodes",), zones=("a", "b", "c"))
    served = await serve(store=view)
    args = {"Pod": b.sts_pod(ordinal=1), "Nodes": None, "NodeNames": ["na"]}
    status, result = await served.post_json("/extender/filter", args)
    assert status == 200 and "still loading" in result["Error"] and result["NodeNames"] == []


async def test_a_request_racing_the_first_list_is_refused_then_answered(
    serve: ServeFactory, api: FakeApi, kubeconfig: Path
) -> None:
    """The real server, its view fed by the fake API server whose volume list keeps failing: a
    pod reaching /mutate before /readyz is refused for retry, not pinned to the rule's zone-a;
    once the volumes list, db-0 follows its volume to zone-c."""
    api.inject("persistentvolumes", "list", *[Fault.status(500)] * 1000)
    served, view = await live_app(serve, kubeconfig)
    await eventually(lambda: {"nodes", "statefulsets", "claims"} <= view.store.loaded)
    status, body = await served.post_json("/mutate", b.review(b.sts_pod("db", 0, namespace="cap")))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False and response["status"]["reason"] == "ViewNotSynced"
    assert "persistentvolumes" not in response["status"]["message"]  # the table name, not the path
    assert "volumes" in response["status"]["message"]
    api.clear("persistentvolumes", "list")
    await eventually(lambda: view.ready()[0])
    placed, _ = await mutate(served, b.sts_pod("db", 0, namespace="cap"))
    assert pinned_zone(placed) == "zone-c"
