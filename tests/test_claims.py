"""Claims and volumes: a claim that names its volume follows it; an explicit class is a choice.

Kubernetes binds a claim naming a volume (``spec.volumeName``, or a PersistentVolume pre-bound
to it by ``claimRef``) only when the classes match ("Cannot bind to requested volume:
storageClassName does not match"): a class rewritten by ``stszone.io/storage-class-template``
would leave it Pending forever. ``storageClassName: ""`` asks for a volume without a class.
The claims are the StatefulSet controller's, as recorded in review 001.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from webhook.cli import main
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.model.tables import TABLES
from webhook.wire import review
from webhook.wire.patch import apply

TEMPLATE = {
    "stszone.io/zones": "zone-a,zone-b,zone-c",
    "stszone.io/storage-class-template": "ssd-{zone}",
}
ZONE_KEY = "topology.kubernetes.io/zone"


def claim_review(name: str = "data-db-0", **spec: Any) -> dict[str, Any]:
    """Recorded review 001 (the controller creating data-db-0 in `cap`), with spec changes."""
    body = copy.deepcopy(b.fixture_review("001-PersistentVolumeClaim-CREATE"))
    claim = body["request"]["object"]
    claim["metadata"]["name"] = body["request"]["name"] = name
    claim["spec"].update(spec)
    for key in [k for k, v in spec.items() if v is None]:
        del claim["spec"][key]
    return body


def cluster(*extra: dict[str, Any]) -> Store:
    """cap/db with a zone list and a storage-class template, and the given volumes/claims."""
    return store_from_objects([b.statefulset(namespace="cap", annotations=TEMPLATE), *extra])


def mutated(body: dict[str, Any], store: Store) -> tuple[dict[str, Any], tuple[str, ...]]:
    outcome = review.answer("mutate", review.from_dict(body), store=store, defaults=Defaults())
    assert outcome.allowed, outcome.message
    return apply(body["request"]["object"], outcome.patch), outcome.warnings


def test_recorded_claim_is_what_the_controller_sends() -> None:
    """Review 001 asks for class `manual` and names no volume: the template applies to it."""
    got, warnings = mutated(claim_review(), cluster())
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert got["spec"]["storageClassName"] == "ssd-zone-a"
    assert warnings == ("claim data-db-0: storageClassName manual -> ssd-zone-a "
                        "(stszone.io/storage-class-template)",)  # fmt: skip


@pytest.mark.parametrize("how", ["volumeName", "claimRef"])
def test_a_claim_that_names_its_volume_takes_its_zone_and_keeps_its_class(how: str) -> None:
    """Ordinal 0 belongs in zone-a by the rule; its claim names pv-b in zone-b (volumeName), or
    pv-b is pre-bound to it (claimRef): zone-b, and class `manual` left as written."""
    volume = b.pv("pv-b", "zone-b", claim=("cap", "data-db-0") if how == "claimRef" else None)
    volume["spec"]["storageClassName"] = "manual"
    body = claim_review(volumeName="pv-b") if how == "volumeName" else claim_review()
    got, warnings = mutated(body, cluster(volume))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-b"
    assert got["spec"]["storageClassName"] == "manual"
    assert warnings == (
        "claim data-db-0 names volume pv-b: storageClassName kept (a named volume binds only if "
        "the classes match)",
    )


def test_its_pod_follows_the_same_volume() -> None:
    """Once the claim naming pv-b is in the view (or pv-b is pre-bound to it), db-0 goes to
    zone-b with its data, not to the rule's zone-a."""
    named = cluster(b.pv("pv-b", "zone-b"), b.pvc("data-db-0", namespace="cap", volume="pv-b"))
    prebound = cluster(b.pv("pv-b", "zone-b", claim=("cap", "data-db-0")))
    for store in (named, prebound):
        pod = b.sts_pod("db", 0, namespace="cap")
        got, warnings = mutated(b.review(pod), store)
        assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-b"
        assert warnings == ("db-0 follows volume pv-b (claim data-db-0) to zone-b; the rule says "
                            "zone-a",)  # fmt: skip


def test_a_volume_usable_anywhere_keeps_the_rule_and_the_class() -> None:
    """pv-nfs pins no zone: the claim gets the rule's zone-a, and its class is still kept."""
    nfs = {"kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": "pv-nfs"},
           "spec": {"capacity": {"storage": "1Gi"}, "storageClassName": "manual"}}  # fmt: skip
    got, _ = mutated(claim_review(volumeName="pv-nfs"), cluster(nfs))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert got["spec"]["storageClassName"] == "manual"


def test_a_named_volume_not_in_the_view_sets_no_zone() -> None:
    """The claim names pv-later, which the view does not hold: no zone is guessed."""
    got, warnings = mutated(claim_review(volumeName="pv-later"), cluster())
    assert "stszone.io/zone" not in got["metadata"].get("annotations", {})
    assert got["spec"]["storageClassName"] == "manual"
    assert warnings == (
        "claim data-db-0 names volume pv-later, not in stszone's view: no zone set",
    )


def test_an_explicit_empty_class_is_a_choice() -> None:
    """storageClassName "" binds only to class-less volumes: never replaced, and warned."""
    got, warnings = mutated(claim_review(storageClassName=""), cluster())
    assert got["spec"]["storageClassName"] == ""
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert warnings == (
        'claim data-db-0 keeps storageClassName "" (volumes without a class); the storage-class '
        "template is not applied",
    )


def test_a_claim_without_a_class_gets_the_template() -> None:
    """No storageClassName at all (the cluster default would apply): the template's class."""
    got, warnings = mutated(claim_review(storageClassName=None), cluster())
    assert got["spec"]["storageClassName"] == "ssd-zone-a" and warnings == ()


def test_stszone_review_shows_the_kept_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through `stszone review --cluster`: the patch sets the zone, not the class."""
    cluster_file = tmp_path / "cluster.json"
    volume = b.pv("pv-b", "zone-b")
    items = [b.statefulset(namespace="cap", annotations=TEMPLATE), volume]
    cluster_file.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    review_file = tmp_path / "claim.json"
    review_file.write_text(json.dumps(claim_review(volumeName="pv-b")))
    argv = ["review", "--cluster", str(cluster_file), "--endpoint", "mutate", str(review_file)]
    assert main(argv) == 0
    response = json.loads(capsys.readouterr().out)["response"]
    patch = json.loads(base64.b64decode(response["patch"]))
    assert [op["path"] for op in patch] == ["/metadata/annotations"]
    assert patch[0]["value"] == {"stszone.io/zone": "zone-b"}
    assert "storageClassName kept" in response["warnings"][0]


def test_a_claim_labelled_skip_is_left_alone() -> None:
    """stszone.io/skip=true on the claim: no zone, no class, no warning (as for pods)."""
    body = claim_review()
    body["request"]["object"]["metadata"].setdefault("labels", {})["stszone.io/skip"] = "true"
    outcome = review.answer("mutate", review.from_dict(body), store=cluster(), defaults=Defaults())
    assert outcome.allowed and outcome.patch == [] and outcome.warnings == ()


@pytest.mark.parametrize(
    ("name", "zone"), [("data-db-1", "zone-b"), ("data-db-2", "zone-c"), ("data-db-0", "zone-b")]
)
def test_a_claim_naming_a_regional_volume_keeps_the_rule_zone_when_it_can(
    name: str, zone: str
) -> None:
    """pv-bc is usable from zone-b and zone-c: ordinals 1 and 2 keep their rule zones; ordinal
    0 (rule zone-a) takes zone-b, the first zone of the list the volume allows."""
    got, _ = mutated(
        claim_review(name, volumeName="pv-bc"), cluster(b.pv("pv-bc", "zone-b", "zone-c"))
    )
    assert got["metadata"]["annotations"]["stszone.io/zone"] == zone


@pytest.mark.parametrize(
    ("annotations", "storage_class"),
    [(TEMPLATE, "ssd-zone-b"), ({"stszone.io/zones": "zone-a,zone-b,zone-c"}, "manual")],
    ids=["class-already-the-templates", "no-template"],
)
def test_a_claim_naming_its_volume_is_warned_only_when_its_class_differs(
    annotations: dict[str, str], storage_class: str
) -> None:
    """The warning about a kept class is for a class the template would have changed: none
    when the claim already has the template's class, or when the set has no template."""
    store = store_from_objects(
        [b.statefulset(namespace="cap", annotations=annotations), b.pv("pv-b", "zone-b")]
    )
    got, warnings = mutated(claim_review(volumeName="pv-b", storageClassName=storage_class), store)
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-b"
    assert got["spec"]["storageClassName"] == storage_class and warnings == ()


@pytest.mark.parametrize(
    ("claim_ref_uid", "zone"),
    [("uid-of-this-claim", "zone-b"), ("", "zone-b"), ("uid-of-a-deleted-claim", "zone-a")],
)
def test_a_volume_pre_bound_to_an_earlier_claim_of_the_same_name_does_not_pin_it(
    claim_ref_uid: str, zone: str
) -> None:
    """pv-b's claimRef names data-db-0. With this claim's uid (or none: pre-bound by name) the
    PV controller binds them, so the claim follows pv-b to zone-b. With another uid it is the
    leftover of a deleted claim of the same name, which the PV controller never binds to the new
    one (``--move-data`` deletes claims and their successors arrive under the same name): the
    claim gets the rule's zone-a and its template class."""
    volume = b.pv("pv-b", "zone-b", claim=("cap", "data-db-0"))
    if claim_ref_uid:
        volume["spec"]["claimRef"]["uid"] = claim_ref_uid
    body = claim_review()
    body["request"]["object"]["metadata"]["uid"] = "uid-of-this-claim"
    got, _ = mutated(body, cluster(volume))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == zone
    assert got["spec"]["storageClassName"] == ("manual" if zone == "zone-b" else "ssd-zone-a")


def test_a_claim_whose_uid_is_not_a_string_is_refused_naming_the_field() -> None:
    """A malformed object is denied with code 400 naming the field, never a crash."""
    body = claim_review()
    body["request"]["object"]["metadata"]["uid"] = 7
    outcome = review.answer("mutate", review.from_dict(body), store=cluster(), defaults=Defaults())
    assert not outcome.allowed and outcome.code == 400
    assert "malformed PersistentVolumeClaim: metadata.uid must be a string" in outcome.message


def test_a_deleted_claim_still_in_the_view_does_not_pin_its_successor() -> None:
    """``rebalance --move-data`` deletes data-db-0; the controller creates a new one at once,
    before the view has seen the deletion. The old claim's record (another uid, bound to pv-b in
    zone-b) says nothing about the new claim, which gets the rule's zone-a and template class."""
    old = b.pvc("data-db-0", namespace="cap", volume="pv-b")
    old["metadata"]["uid"] = "uid-of-a-deleted-claim"
    store = cluster(b.pv("pv-b", "zone-b"), old)
    body = claim_review()
    body["request"]["object"]["metadata"]["uid"] = "uid-of-this-claim"
    got, _ = mutated(body, store)
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert got["spec"]["storageClassName"] == "ssd-zone-a"


def test_the_zone_of_a_deleted_unbound_claim_still_in_the_view_is_not_its_successors() -> None:
    """The earlier data-db-0 never got a volume; stszone gave it zone-b (under another zone
    list, say). The new claim is placed by the rule, not by the zone recorded on the old one."""
    old = b.pvc("data-db-0", namespace="cap")
    old["metadata"].update(uid="uid-of-a-deleted-claim", annotations={"stszone.io/zone": "zone-b"})
    got, _ = mutated(claim_review(), cluster(old))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert got["spec"]["storageClassName"] == "ssd-zone-a"


@pytest.mark.parametrize("order", [("db-main", "main"), ("main", "db-main")])
def test_a_claim_name_two_sets_produce_goes_to_the_same_one_with_a_warning(
    order: tuple[str, str],
) -> None:
    """Template ``data`` of set ``db-main`` and template ``data-db`` of set ``main`` both name
    their ordinal 0's claim ``data-db-main-0``. Whichever order the view lists them in, the
    claim is placed for ``db-main`` (by name) and the answer says the
    name is shared; ``main`` would put it in zone-c (its list starts there)."""
    sets = {
        "db-main": b.statefulset("db-main", namespace="cap", templates=("data",),
                                 annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}),
        "main": b.statefulset("main", namespace="cap", templates=("data-db",),
                              annotations={"stszone.io/zones": "zone-c,zone-a,zone-b"}),
    }  # fmt: skip
    store = store_from_objects([sets[name] for name in order])
    got, warnings = mutated(claim_review("data-db-main-0"), store)
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert (
        "claim data-db-main-0 is also a claim name of main; placed for db-main (rename a set or template)"
        in warnings
    )


def test_the_same_claim_already_in_the_view_keeps_what_the_view_says() -> None:
    """The view may list a claim before its admission ends (a reinvocation, a watch event
    racing the answer): under the same uid its record is this claim's, bound to pv-b."""
    same = b.pvc("data-db-0", namespace="cap", volume="pv-b")
    same["metadata"]["uid"] = "uid-of-this-claim"
    body = claim_review()
    body["request"]["object"]["metadata"]["uid"] = "uid-of-this-claim"
    got, _ = mutated(body, cluster(b.pv("pv-b", "zone-b"), same))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-b"


def test_a_claim_name_three_sets_produce_names_both_others() -> None:
    """Template a of set b-c-d, a-b of c-d and a-b-c of d all name ordinal 0's claim
    a-b-c-d-0: placed for b-c-d (first by name), and the warning lists the other two."""
    zones = {"stszone.io/zones": "zone-a,zone-b,zone-c"}
    sets = [
        b.statefulset(s, namespace="cap", templates=(t,), annotations=zones)
        for s, t in (("d", "a-b-c"), ("c-d", "a-b"), ("b-c-d", "a"))
    ]
    _, warnings = mutated(claim_review("a-b-c-d-0"), store_from_objects(sets))
    assert warnings == (
        "claim a-b-c-d-0 is also a claim name of c-d, d; placed for b-c-d (rename a set or "
        "template)",
    )


def following_logs(**spec: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """db (templates data and logs) whose logs-db-0 is bound in zone-b: data-db-0, created
    with ``spec``, follows it there (the rule says zone-a)."""
    sts = b.statefulset(namespace="cap", annotations=TEMPLATE, templates=("data", "logs"))
    logs = [b.pvc("logs-db-0", namespace="cap", volume="pv-logs"), b.pv("pv-logs", "zone-b")]
    return mutated(claim_review(**spec), store_from_objects([sts, *logs]))


FOLLOWS = "db-0 follows volume pv-logs (claim logs-db-0) to zone-b; the rule says zone-a"


def test_a_claim_following_a_sibling_volume_warns_of_both_the_move_and_its_class() -> None:
    """The recorded class `manual` becomes ssd-zone-b: both the data gravity and the class
    change are warned."""
    got, warnings = following_logs()
    assert got["spec"]["storageClassName"] == "ssd-zone-b"
    assert warnings == (
        FOLLOWS,
        "claim data-db-0: storageClassName manual -> ssd-zone-b (stszone.io/storage-class-template)",
    )


def test_a_claim_following_a_sibling_volume_with_an_empty_class_warns_of_both() -> None:
    got, warnings = following_logs(storageClassName="")
    assert (got["metadata"]["annotations"]["stszone.io/zone"], got["spec"]["storageClassName"]) == (
        "zone-b",
        "",
    )
    assert warnings == (
        FOLLOWS,
        'claim data-db-0 keeps storageClassName "" (volumes without a class); the storage-class '
        "template is not applied",
    )


def test_a_claim_naming_a_zoneless_volume_with_no_zone_to_follow_records_none() -> None:
    """node-ordinal mode, no node labelled 0 yet, and the claim names pv-nfs (usable from any
    zone): there is no zone to record, so the claim is left as written."""
    nfs = {"kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": "pv-nfs"},
           "spec": {"capacity": {"storage": "1Gi"}}}  # fmt: skip
    modes = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    sts = b.statefulset(namespace="cap", annotations={**TEMPLATE, **modes})
    store = store_from_objects([sts, nfs, b.node("n1", "zone-a")])
    got, warnings = mutated(claim_review(volumeName="pv-nfs"), store)
    assert "stszone.io/zone" not in got["metadata"].get("annotations", {})
    assert got["spec"]["storageClassName"] == "manual" and warnings == ()


@pytest.mark.parametrize("old_claim_listed", [True, False])
def test_a_claim_as_the_api_server_sends_it_to_mutate_is_not_pinned_by_an_earlier_claims_volume(
    old_claim_listed: bool,
) -> None:
    """The API server gives a new object its uid after the mutating webhooks (review 001 has
    none; its validating twin 002 has one), so /mutate never sees the new claim's uid. pv-b is
    still Bound to the deleted data-db-0 (its claimRef names that claim's uid): the claim the
    controller re-creates can never bind to it, so it gets the rule's zone-a and its template
    class, whether or not the view still lists the deleted claim."""
    assert "uid" not in claim_review()["request"]["object"]["metadata"]
    volume = b.pv("pv-b", "zone-b", claim=("cap", "data-db-0"))
    volume["spec"]["claimRef"]["uid"] = "uid-of-a-deleted-claim"
    extra = [volume]
    if old_claim_listed:
        old = b.pvc("data-db-0", namespace="cap", volume="pv-b")
        old["metadata"]["uid"] = "uid-of-a-deleted-claim"
        extra.append(old)
    got, warnings = mutated(claim_review(), cluster(*extra))
    assert got["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert got["spec"]["storageClassName"] == "ssd-zone-a"
    assert warnings == ("claim data-db-0: storageClassName manual -> ssd-zone-a "
                        "(stszone.io/storage-class-template)",)  # fmt: skip


def live_store(*objects: dict[str, Any]) -> Store:
    """A live view whose watches have all synced, holding ``objects``."""
    loaded = store_from_objects(list(objects))
    store = Store(live=True)
    for table in TABLES:
        store.replace(table, loaded.table(table).values())
    return store


@pytest.mark.parametrize(
    "username",
    ["system:kube-controller-manager", "system:serviceaccount:kruise-system:kruise-manager"],
)
def test_a_claim_another_controller_makes_in_an_opted_in_namespace_is_left_alone(
    username: str,
) -> None:
    """kube-controller-manager with --use-service-account-credentials=false (its default) makes
    every controller's claims as itself, among them the ephemeral volume controller's claim
    ``<pod>-<volume>`` of a pod's generic ephemeral volume, controlled by that pod; kruise-manager
    makes the claims of a CloneSet, ``<template>-<cloneset>-<instance id>``, controlled by it. No
    StatefulSet produces such a claim, and no set's watch event will ever make it one: refusing
    it "for retry" refuses it for good, and the pod never starts."""
    store = live_store(b.statefulset(namespace="cap", annotations=TEMPLATE))
    ephemeral = claim_review("db-0-cache-2")  # volume cache-2 of pod db-0
    ephemeral["request"]["object"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "db-0", "uid": "u-0", "controller": True}
    ]
    cloned = claim_review("data-cs-x7k2q")
    cloned["request"]["object"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "cs", "uid": "u",
         "controller": True}
    ]  # fmt: skip
    for body in (ephemeral, cloned):
        body["request"]["userInfo"]["username"] = username
        request = review.from_dict(body)
        outcome = review.answer("mutate", request, store=store, defaults=Defaults())
        assert (outcome.allowed, outcome.patch) == (True, []), outcome.message
