"""The scale-down guard: StatefulSet UPDATE and the statefulsets/scale subresource."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders as b
from tests import guardref
from tests.conftest import ServeFactory
from tests.work import CountingStore, line_budget
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.errors import Denied
from webhook.model.extract import claim_info, node_info, pod_info, statefulset_info
from webhook.model.store import Store
from webhook.rules import guard, ranges
from webhook.rules.audit import audit
from webhook.rules.decision import Decision
from webhook.rules.explain import explain_workload
from webhook.rules.placement import place
from webhook.rules.policy import Policy, resolve_policy
from webhook.wire import review

ZONE_KEY = "topology.kubernetes.io/zone"
ABC = {"stszone.io/zones": "a,b,c"}
CAB = {"stszone.io/zones": "c,a,b"}
ALLOW = {**ABC, "stszone.io/allow-zone-loss": "true"}
NODES = [b.node("na", "a"), b.node("nb", "b"), b.node("nc", "c")]


def cluster(
    zones: Sequence[str | None],
    *,
    annotations: dict[str, str] | None = None,
    start: int = 0,
    extra: list[dict[str, Any]] | None = None,
) -> Store:
    """A ``db`` set whose ordinal ``start + i`` runs in ``zones[i]`` (None: pod not scheduled)."""
    pods = [b.sts_pod(ordinal=start + i, node=f"n{z}" if z else None) for i, z in enumerate(zones)]
    sts = b.statefulset(annotations=annotations or ABC, replicas=len(zones), start=start)
    return guardref.view([*NODES, sts, *pods, *(extra or [])])


def scale(store: Store, old: int, new: int, **kw: Any) -> review.Answer:
    """Send a statefulsets/scale UPDATE from ``old`` to ``new`` replicas through /validate."""
    body = b.review(b.scale(replicas=new), operation="UPDATE", old=b.scale(replicas=old), **kw)
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


def update(
    store: Store, old: int, new: int, *, annotations: dict[str, str] | None = None, **kw: Any
) -> review.Answer:
    """Send a StatefulSet UPDATE whose new object carries ``annotations`` (default a,b,c)."""
    before = b.statefulset(replicas=old, annotations=ABC, **kw)
    after = b.statefulset(replicas=new, annotations=annotations or ABC, **kw)
    body = b.review(after, operation="UPDATE", old=before)
    return review.answer("validate", review.from_dict(body), store=store, defaults=Defaults())


MISPLACED = ["a", "a", "b", "c", "b", "a"]  # where the default scheduler put ordinals 0-5


def test_the_misplaced_case_the_product_exists_for() -> None:
    """Ordinals 0-2 in a, a, b and 3-5 in c, b, a: 6 -> 3 drops c, and the message says so."""
    outcome = scale(cluster(MISPLACED), 6, 3)
    assert not outcome.allowed
    assert outcome.message == (
        "scale-down of db from 6 to 3 would drop zone c (ordinal 3 is its only pod); the "
        "smallest replica count that keeps every zone is 4; set stszone.io/allow-zone-loss: "
        '"true" on the StatefulSet to force it'
    )
    assert (outcome.code, outcome.reason) == (403, "ZoneLoss")
    assert update(cluster(MISPLACED), 6, 3).message == outcome.message
    assert scale(cluster(MISPLACED), 6, 4).allowed


@pytest.mark.parametrize(
    ("zones", "old", "new", "says"),
    [
        (["a", "b", "c", "a", "b", "c"], 6, 3, None),  # placed by the rule: any 3 keep all
        (["a", "b", "c", "a", "b", "c"], 6, 2, "zone c (ordinals 2 and 5 are its only pods)"),
        (MISPLACED, 6, 5, None),
        (MISPLACED, 6, 2, "zones b (ordinals 2 and 4 are its only pods) and c (ordinal 3 is"),
        (["a", "a", "a", "b"], 4, 3, "zone b (ordinal 3 is its only pod); the smallest "),
        (["c", "c", "c"], 3, 1, None),  # never spread: nothing to lose
        (["a", "b", "c"], 3, 0, None),  # zero stops the set: allowed, with a warning
    ],
)
def test_guard_table(zones: list[str], old: int, new: int, says: str | None) -> None:
    """Deny exactly when a zone of the old ordinals is missing among the kept ones."""
    outcome = scale(cluster(zones[:old]), old, new)
    assert outcome.allowed == (says is None), outcome.message
    if says is not None:
        assert says in outcome.message


def test_a_set_labelled_skip_is_left_alone_on_its_scale_subresource() -> None:
    """The objectSelector (stszone.io/skip NotIn [true]) keeps a labelled set's own writes from
    /validate, but the API server matches it against the Scale, which carries none of the set's
    labels (k8s.io/apiserver .../predicates/object/matcher.go): its /scale still arrives, and
    is allowed as a patch of its replicas is."""
    sts = b.statefulset(annotations=ABC, replicas=6)
    sts["metadata"]["labels"] = {"stszone.io/skip": "true"}
    pods = [b.sts_pod(ordinal=i, node=f"n{z}") for i, z in enumerate(MISPLACED)]
    outcome = scale(guardref.view([*NODES, sts, *pods]), 6, 3)
    assert outcome.allowed and not outcome.warnings, outcome.message
    assert not scale(cluster(MISPLACED), 6, 3).allowed  # the same set unlabelled


def test_ordinals_start_keeps_the_lowest_ordinals_from_start() -> None:
    """With ordinals.start = 10, 6 -> 3 keeps 10-12 and removes 13-15 (13 holds c alone)."""
    store = cluster(MISPLACED, start=10)
    outcome = scale(store, 6, 3)
    assert "zone c (ordinal 13 is its only pod)" in outcome.message
    assert "smallest replica count that keeps every zone is 4" in outcome.message
    assert update(store, 6, 3, start=10).message == outcome.message


def test_pending_pod_falls_back_to_its_volume_then_to_the_rule() -> None:
    """Ordinal 3 is not scheduled: its bound PV says c. Without the PV the rule says a."""
    with_pv = cluster(
        ["a", "a", "b", None],
        extra=[b.pvc("data-db-3", volume="pv-3"), b.pv("pv-3", "c", claim=("ns", "data-db-3"))],
    )
    outcome = scale(with_pv, 4, 3)
    assert outcome.message.startswith(
        "scale-down of db from 4 to 3 would drop zone c (ordinal 3 is the only one there; "
        "ordinal 3 is not running but its volume pv-3 is there)"
    )
    # No volume: the rule puts ordinal 3 in a, which ordinals 0-1 hold already.
    assert scale(cluster(["a", "a", "b", None]), 4, 3).allowed
    # No pod at all for ordinal 4: the rule puts it in b (4 mod 3 = 1), held by ordinal 2.
    assert scale(cluster(["a", "a", "b", "c"]), 5, 4).allowed
    # But with zones a,b,c,d,e the rule puts the pod-less ordinal 4 in zone e, alone.
    five = cluster(["a", "a", "b", "c"], annotations={"stszone.io/zones": "a,b,c,d,e"})
    denied = scale(five, 5, 4)
    assert "zone e (ordinal 4 is the only one there; ordinal 4 is not running but the " in (
        denied.message
    )


def test_pod_on_a_node_that_no_longer_exists_counts_where_its_replacement_goes() -> None:
    """db-2 is still bound to node ghost, which the view (holding the cluster's nodes) does not
    hold: the node was deleted, PodGC deletes the pod and the controller re-creates it in its
    rule zone c. It holds no zone, so 3 -> 2 drops c, and the refusal says why."""
    pods = [b.sts_pod(ordinal=i, node=n) for i, n in enumerate(["na", "na", "ghost"])]
    store = store_from_objects([*NODES, b.statefulset(annotations=ABC), *pods])
    outcome = scale(store, 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert outcome.message.startswith(
        "scale-down of db from 3 to 2 would drop zone c (ordinal 2 is the only one there; db-2 "
        "is on node ghost, which no longer exists (PodGC deletes the pod); its replacement goes "
        "to c)"
    )


def test_pod_on_a_node_of_a_view_without_nodes_is_unknown() -> None:
    """A saved cluster without Node objects says nothing of node ghost: db-2's zone is unknown
    (never the rule's), so dropping it may drop a zone: refused as unknown."""
    pods = [b.sts_pod(ordinal=i, node=n) for i, n in enumerate(["na", "na", "ghost"])]
    store = store_from_objects([b.statefulset(annotations=ABC), *pods])
    outcome = scale(store, 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert "it removes ordinal 2, whose zone is unknown (node ghost is not in stszone's view)" in (
        outcome.message
    )


def test_local_volume_pinned_by_hostname_counts_as_its_nodes_zone() -> None:
    """A local PV (nodeAffinity kubernetes.io/hostname In [nc]) puts a pod-less ordinal in c."""
    local = b.pv("pv-local", "c", claim=("ns", "data-db-1"))
    expr = local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
    expr[0] = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["nc"]}
    store = cluster(["a", None], extra=[b.pvc("data-db-1", volume="pv-local"), local])
    assert "its volume pv-local is there" in scale(store, 2, 1).message


def test_a_regional_volume_does_not_tell_which_zone_its_running_pod_is_in() -> None:
    """db-0 runs on nbare, a node that lost its zone label, with its data on a regional disk
    usable from a and b: the pod is in a or in b, and nothing says which. Removing db-3, the
    only other pod in a, may drop a: refused as unknown, never guessed from the rule."""
    nodes = [b.node("nbare", None)]
    regional = [b.pvc("data-db-0", volume="pv-0"), b.pv("pv-0", "a", "b")]
    pods = [b.sts_pod(ordinal=i, node=n) for i, n in enumerate(["nbare", "nb", "nc", "na"])]
    store = guardref.view([*NODES, *nodes, b.statefulset(annotations=ABC), *pods, *regional])
    outcome = scale(store, 4, 3)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown"), outcome.message
    assert "ordinal 0" in outcome.message and "pv-0" in outcome.message
    # A disk in one zone does say where its pod runs: db-0 is in a, and 4 -> 3 keeps a.
    zonal = [b.pvc("data-db-0", volume="pv-0"), b.pv("pv-0", "a")]
    store = guardref.view([*NODES, *nodes, b.statefulset(annotations=ABC), *pods, *zonal])
    assert scale(store, 4, 3).allowed


def test_override_allows_with_a_warning_naming_the_loss() -> None:
    """allow-zone-loss on the StatefulSet: allowed, and the warning says what is lost."""
    outcome = scale(cluster(MISPLACED, annotations=ALLOW), 6, 3)
    assert outcome.allowed
    assert outcome.warnings == (
        'db: 6 -> 3 drops c; allowed by stszone.io/allow-zone-loss="true" (remove it to re-arm '
        "the guard)",
    )


def test_override_set_in_the_same_update_counts_and_removing_it_rearms() -> None:
    """The update is judged as written: setting the override with the scale-down allows it;
    an update that drops the override and scales down is refused."""
    store = cluster(MISPLACED)
    same = update(store, 6, 3, annotations=ALLOW)
    assert same.allowed and "drops c;" in same.warnings[0]
    guarded = cluster(MISPLACED, annotations=ALLOW)  # the view says allowed, the update removes it
    assert not update(guarded, 6, 3, annotations=ABC).allowed


def test_scale_to_zero_arrives_without_replicas() -> None:
    """ScaleSpec.replicas is omitempty: `kubectl scale --replicas=0` sends spec: {}; zero
    stops the set (it drops no zone for good), so it is allowed with a warning."""
    body = b.review(b.scale(replicas=0), operation="UPDATE", old=b.scale(replicas=3))
    del body["request"]["object"]["spec"]["replicas"]
    outcome = review.answer(
        "validate", review.from_dict(body), store=cluster(["a", "b", "c"]), defaults=Defaults()
    )
    assert outcome.allowed
    assert outcome.warnings == (
        "db: 3 -> 0 stops the set in every zone; scaling up puts each ordinal back in its zone",
    )


class NoLookups(Store):
    """A view that fails the test on any query: increases must be answered without one."""

    def _fail(self, *args: object, **kwargs: object) -> Any:
        raise AssertionError(f"lookup during an increase: {args}")

    pod = statefulset = node_zone = claim_zones = volume = nodes_with_label = _fail
    server_zones = discovered_zones = namespace_enabled = _fail


class SetOnly(Store):
    """A view that fails the test on any query but the set's record: an increase through a
    Scale, which carries no annotations, reads the set (what the new count is told comes from
    it) and nothing else."""

    pod = node_zone = claim_zones = volume = nodes_with_label = NoLookups._fail
    server_zones = discovered_zones = namespace_enabled = NoLookups._fail


class NoGuardLookups(Store):
    """A copy of a view that fails the test on any query about members (their pods, claims,
    volumes, labelled nodes, a node's zone): what the guard of a scale-down asks."""

    pod = node_zone = claim_zones = volume = nodes_with_label = NoLookups._fail

    def __init__(self, source: Store) -> None:
        super().__init__(zones=source.zones_override, live=source.live)
        for table in source.loaded:
            self.replace(table, source.table(table).values())


@pytest.mark.parametrize(("old", "new"), [(3, 5), (3, 3), (0, 1)])
def test_increases_and_unchanged_counts_need_no_lookups(old: int, new: int) -> None:
    """A StatefulSet UPDATE that does not lower replicas touches nothing in the view; a Scale
    reads the set alone (none here: allowed without a word), and never what the guard asks
    about members, even where the set is known and warned of its count."""
    assert scale(SetOnly(), old, new).decision == Decision()
    assert update(NoLookups(), old, new).allowed
    told = scale(NoGuardLookups(cluster(["a", "b", "c"])), old, new)
    assert told.allowed
    thin = f"db: {new} replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss"
    assert [w.startswith(thin) for w in told.warnings] == ([True] if new < 3 else [])


def test_status_subresource_is_not_checked() -> None:
    """The controller's status writes must never be blocked, even for a malformed set."""
    sts = b.statefulset(annotations={"stszone.io/mode": "bogus"}, replicas=1)
    body = b.review(sts, operation="UPDATE", old=sts, sub_resource="status")
    request = review.from_dict(body)
    assert review.answer("validate", request, store=NoLookups(), defaults=Defaults()).allowed


def test_scale_of_a_look_alike_resource_is_not_ours() -> None:
    """A `statefulsets/scale` of another API group is not looked up (OpenKruise's is judged:
    tests/test_kruise.py)."""
    body = b.review(b.scale(replicas=0), operation="UPDATE", old=b.scale(replicas=6))
    body["request"]["resource"]["group"] = "apps.example.io"
    request = review.from_dict(body)
    assert review.answer("validate", request, store=NoLookups(), defaults=Defaults()).allowed


@pytest.mark.parametrize(("kind", "operation"), [("StatefulSet", "UPDATE"), ("Scale", "CREATE")])
def test_only_a_scale_update_of_the_scale_subresource_is_guarded(kind: str, operation: str) -> None:
    """Whatever else a `statefulsets/scale` request carries is not a count to guard."""
    body = b.review(b.scale(replicas=3), operation="UPDATE", old=b.scale(replicas=6))
    body["request"]["kind"]["kind"] = kind
    body["request"]["operation"] = operation
    request = review.from_dict(body)
    assert review.answer("validate", request, store=NoLookups(), defaults=Defaults()).allowed


def test_scale_of_a_set_missing_from_the_view_warns() -> None:
    """Not in the view yet: the guard still uses the pods it knows, and says what it lacked."""
    pods = [b.sts_pod(ordinal=i, node=f"n{z}") for i, z in enumerate(MISPLACED)]
    outcome = scale(store_from_objects([*NODES, *pods]), 6, 3)
    assert "zone c (ordinal 3 is its only pod)" in outcome.message
    assert outcome.warnings == (
        "ns/db is not in stszone's view yet: guarded on its pods and the server's zones",
    )


def test_a_scale_without_its_old_object_is_judged_from_the_view() -> None:
    """A hand-written Scale review (`stszone review`) may leave out oldObject: the count it
    lowers is the set's in the view, 3 here, so 2 drops zone c; a set the view lacks has no
    count to lower."""
    body = b.review(b.scale(replicas=2), operation="UPDATE")
    request = review.from_dict(body)
    refused = review.answer(
        "validate", request, store=cluster(["a", "b", "c"]), defaults=Defaults()
    )
    assert (refused.allowed, refused.reason) == (False, "ZoneLoss")
    unknown = review.answer(
        "validate", request, store=store_from_objects(NODES), defaults=Defaults()
    )
    assert unknown.allowed and unknown.warnings == ()


def test_node_ordinal_mode_uses_the_zone_of_the_pinned_node() -> None:
    """No pod running: ordinal N is where the node labelled N is; duplicates across zones are
    unknown and counted in no zone (the warning names them)."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node", **ABC}
    nodes = [
        b.node("k0", "a", labels={"example.io/node": "0"}),
        b.node("k1", "a", labels={"example.io/node": "1"}),
        b.node("k2", "b", labels={"example.io/node": "2"}),
        b.node("k3", "c", labels={"example.io/node": "3"}),
        b.node("k3bis", "a", labels={"example.io/node": "3"}),
    ]
    sts = b.statefulset(annotations=spec, replicas=4)
    running = [b.sts_pod(ordinal=0, node="k0"), b.sts_pod(ordinal=2, node="k2")]
    store = store_from_objects([*nodes, sts, *running])
    outcome = scale(store, 3, 2)
    assert "zone b (ordinal 2 is its only pod)" in outcome.message
    # Ordinal 1 has no pod: node k1 (zone a) pinned to it gives its zone.
    assert scale(store, 3, 1).message.startswith(
        "scale-down of db from 3 to 1 would drop zone b (ordinal 2 is its only pod)"
    )
    # Ordinal 3's label is on nodes in zones c and a: its zone is unknown, and it may be the
    # only ordinal in c (no kept one is known to be there): refused, saying why.
    unknown = scale(store, 4, 3)
    assert (unknown.allowed, unknown.reason) == (False, "ZoneUnknown")
    assert (
        "may drop zone c, which no kept pod is known to hold: it removes ordinal 3, whose zone "
        "is unknown (nodes labelled example.io/node=3 span zones a, c)"
    ) in unknown.message
    pinned = store_from_objects([*nodes[:4], sts])  # nothing runs: zones come from the pins
    assert "zone c (ordinal 3 is the only one there; ordinal 3 is not running but node k3" in (
        scale(pinned, 4, 3).message
    )


def test_an_ordinal_label_also_on_a_node_with_no_zone_holds_no_zone() -> None:
    """Label 2 is on k2 (zone c) and on k2bare (no zone label), where kube-scheduler may as
    well put pod db-2: ordinal 2 does not surely hold c, so scaling 4 -> 3, which removes
    ordinal 3 (k3, zone c), may drop c. The guard, the audit and explain all say so, and the
    reference walk agrees."""
    spec = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node", **ABC}
    nodes = [
        b.node(name, zone, labels={"example.io/node": label})
        for name, zone, label in [
            ("k0", "a", "0"), ("k1", "b", "1"), ("k2", "c", "2"), ("k2bare", None, "2"),
            ("k3", "c", "3"),
        ]
    ]  # fmt: skip
    sts = b.statefulset(annotations=spec, replicas=4)
    store = guardref.view([*nodes, sts])
    why = "node k2bare labelled example.io/node=2 has no label topology.kubernetes.io/zone"
    outcome = scale(store, 4, 3)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert f"ordinal 2, whose zone is unknown ({why})" in outcome.message
    policy = resolve_policy("ns", "db", store=store)
    assert guardref.walk(store, policy, range(4), range(3))[0].refused
    (report,) = audit(store).sets
    assert (report.held, report.unknown, report.lowest) == (("a", "b", "c"), (2,), 4)
    assert [(r.ordinal, r.expected_zone) for r in report.rows][2] == (2, None)
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    assert [(s.replicas, s.allowed) for s in explained.sizes] == [
        (3, False),
        (2, False),
        (1, False),
        (0, True),
    ]
    assert f"ordinal 2, whose zone is unknown ({why})" in explained.sizes[0].message


@given(
    placed=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=9),
    data=st.data(),
)
def test_property_denies_iff_kept_ordinals_miss_a_zone(placed: list[str | None], data: Any) -> None:
    """For any placement (None: not scheduled, the rule decides) the guard denies iff the kept
    ordinals miss a zone the old ones held, and names the lowest count that keeps them all;
    scaling to zero stops the set and is always allowed."""
    old = len(placed)
    new = data.draw(st.integers(0, old - 1), label="new")
    rule = ["a", "b", "c"]
    zone = [z if z is not None else rule[i % 3] for i, z in enumerate(placed)]
    outcome = scale(cluster(placed), old, new)
    lost = set(zone) - set(zone[:new]) if new else set()
    assert outcome.allowed == (not lost)
    if lost:
        lowest = min(n for n in range(old + 1) if set(zone[:n]) == set(zone))
        assert f"keeps every zone is {lowest};" in outcome.message
        assert all(f" {z} (" in outcome.message for z in lost)


# --- the recorded reviews, over the real TLS server ------------------------------------------


def recorded() -> Store:
    """The cluster the reviews were recorded in: db-0 on zone-c, db-1 on zone-a, and the
    claims of ordinals 2, 3, 4 bound to PVs in zone-b, zone-c, zone-b."""
    return store_from_objects(b.recorded_lists())


async def test_recorded_kubectl_scale_up_is_allowed(serve: ServeFactory) -> None:
    """014: `kubectl scale sts db --replicas=5` from 3 through statefulsets/scale."""
    served = await serve(store=recorded())
    sent = b.fixture_review("014-Scale-UPDATE")
    _, body = await served.post_json("/validate", sent)
    assert body["response"] == {"uid": sent["request"]["uid"], "allowed": True}


async def test_recorded_patch_scale_down_is_refused(serve: ServeFactory) -> None:
    """024: `kubectl patch sts db -p {spec:{replicas:2}}` from 5: ordinals 2 and 4 hold zone-b
    (by their volumes), so 2 replicas would lose it; 3 keep every zone."""
    served = await serve(store=recorded())
    sent = b.fixture_review("024-StatefulSet-UPDATE")
    _, body = await served.post_json("/validate", sent)
    response = body["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "ZoneLoss"
    assert response["status"]["message"] == (
        "scale-down of db from 5 to 2 would drop zone zone-b (ordinals 2 and 4 are the only ones "
        "there; ordinal 2 is not running but its volume pv-cap-zone-b-1 is there; ordinal 4 is "
        "not running but its volume pv-cap-zone-b-2 is there); the smallest replica count that "
        'keeps every zone is 3; set stszone.io/allow-zone-loss: "true" on the StatefulSet to '
        "force it"
    )
    assert response["warnings"] == [
        "db: 2 replica(s) for 3 zones leaves a zone empty; 3 or more survive the loss of any zone"
    ]
    # The same scale-down as kubectl scale sends it (the Scale carries no annotations).
    scale_body = copy.deepcopy(b.fixture_review("014-Scale-UPDATE"))
    scale_body["request"]["object"]["spec"]["replicas"] = 2
    scale_body["request"]["oldObject"]["spec"]["replicas"] = 5
    _, by_scale = await served.post_json("/validate", scale_body)
    assert by_scale["response"]["status"]["message"] == response["status"]["message"]


@pytest.mark.parametrize("name", ["024-StatefulSet-UPDATE", "034-StatefulSet-UPDATE"])
async def test_dry_run_gets_the_same_answer(serve: ServeFactory, name: str) -> None:
    """034 is a recorded `kubectl apply --dry-run=server` (2 -> 4); 024 a real 5 -> 2. Flipping
    dryRun changes nothing in the answer."""
    served = await serve(store=recorded())
    sent = b.fixture_review(name)
    flipped = copy.deepcopy(sent)
    flipped["request"]["dryRun"] = not sent["request"]["dryRun"]
    _, real = await served.post_json("/validate", sent)
    _, dry = await served.post_json("/validate", flipped)
    assert real == dry
    assert real["response"]["allowed"] is (name == "034-StatefulSet-UPDATE")


async def test_recorded_template_update_is_allowed(serve: ServeFactory) -> None:
    """026: a pod-template patch keeps replicas at 2: allowed, only the replicas warning."""
    served = await serve(store=recorded())
    _, body = await served.post_json("/validate", b.fixture_review("026-StatefulSet-UPDATE"))
    assert body["response"]["allowed"] is True
    assert [w[:40] for w in body["response"]["warnings"]] == [
        "db: 2 replica(s) for 3 zones leaves a zo"
    ]


# --- scale: bounded by the objects in the view, not by replicas ------------------------------


def agrees_with_a_walk(store: Store, old: range, new: range) -> guard.ScaleDown:
    """The guard's answer for ns/db, checked against the brute-force walk of tests/guardref."""
    policy = resolve_policy("ns", "db", store=store)
    got = guard.scale_down("db", old=old, new=new, namespace="ns", policy=policy, store=store)
    want, lowest = guardref.walk(store, policy, old, new)
    assert held(got.lost) == named(want.lost) and held(got.unlisted) == named(want.unlisted)
    assert (got.refused, got.depends_on_unknown) == (want.refused, want.depends_on_unknown)
    assert list(got.at_risk) == want.at_risk
    for unknown, ordinals in ((got.unknown_removed, want.unknown_removed),
                              (got.unknown_kept, want.unknown_kept)):  # fmt: skip
        assert unknown.count == len(ordinals)
        assert [i.ordinal for i in unknown.first] == ordinals[: ranges.NAMED]
    assert got.lowest == lowest
    assert {z: [i.ordinal for i in got.leaving[z]] for z in got.leaving} == {
        z: o[: ranges.NAMED] for z, o in want.leaving.items()
    }
    assert {z: [i.ordinal for i in got.unready[z]] for z in got.unready} == {
        z: o[: ranges.NAMED] for z, o in want.unready.items()
    }
    counted_where_placed(store, policy, range(min(old.start, new.start), old.stop))
    return got


def counted_where_placed(store: Store, policy: Policy, span: range) -> None:
    """Each ordinal with no running pod counts (by the walk) where placement puts its pod, or
    is unknown where placement puts it nowhere or refuses it (zone modes, with a zone list)."""
    if not policy.zones or policy.declared.mode == "node-ordinal":
        return
    for o in span:
        pod = guardref.own_pod(store, policy, o, "ns")
        if pod is not None and pod.node and not guardref.going(store, pod):
            continue
        claims = pod.claims if pod is not None else None
        try:
            zone = place(o, namespace="ns", policy=policy, store=store, claims=claims).zone
        except Denied:
            zone = ""
        assert guardref.locate(store, policy, o) == (zone or None), o


def held(zones: Mapping[str, ranges.Holders]) -> dict[str, tuple[int, list[int]]]:
    """Zone -> (how many ordinals hold it, the first few of them) as the guard says; each one
    named is located in that zone (the guard counts by zone, and locates only those it names)."""
    for zone, h in zones.items():
        assert [i.zone for i in h.first] == [zone] * len(h.first), (zone, h.first)
    return {z: (h.count, [i.ordinal for i in h.first]) for z, h in zones.items()}


def test_a_scale_down_is_a_value_two_runs_over_one_view_are_equal() -> None:
    """What the guard finds compares as data: not by the locator it names ordinals with."""
    store = cluster(MISPLACED)
    policy = resolve_policy("ns", "db", store=store)
    one, two = (
        guard.scale_down(
            "db", old=range(6), new=range(3), namespace="ns", policy=policy, store=store
        )
        for _ in range(2)
    )
    assert one.lost and one == two


def named(zones: dict[str, list[int]]) -> dict[str, tuple[int, list[int]]]:
    """The same from the walk's full lists: the guard names the first ``NAMED``."""
    return {z: (len(o), o[: ranges.NAMED]) for z, o in zones.items()}


#: Pods in every state a pod can be in: (zone of its node or None, status.phase, Terminating);
#: "gone" is a node the view does not hold (deleted: PodGC deletes its pods).
POD_STATES = st.tuples(
    st.sampled_from(["a", "b", "c", "x", "bare", "gone", None]),
    st.sampled_from([None, "Pending", "Running", "Succeeded", "Failed", "Unknown"]),
    st.booleans(),
)
#: How a node reports itself: Ready, NotReady, Unknown (its kubelet is gone), or only the taint
#: the node lifecycle controller adds.
READINESS = st.sampled_from(["True", "False", "Unknown", "taint"])

GEN, TOPOLVM, HOST = "example.io/gen", "topology.topolvm.io/node", "kubernetes.io/hostname"


def _req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


#: A volume's node constraints: (key, In values) as a local or zonal PV has them, or the PV's
#: nodeSelectorTerms (None: no node affinity) and its own labels.
Volume = tuple[str, tuple[str, ...]] | tuple[list[dict[str, Any]] | None, dict[str, str]]

#: Volumes bound to an ordinal's claim: pinned to a zone, to a node by hostname, by TopoLVM's
#: node key, to a node that is gone, to an unlabelled node, to nodes of two zones; and with
#: every operator, empty and unparsable terms, fields (which a volume's affinity never reads),
#: zone labels, a CSI zone key no node carries and a zone no node is in yet.
VOLUMES = st.sampled_from(
    [
        ("topology.kubernetes.io/zone", ("b",)),
        (HOST, ("nc",)),
        (HOST, ("na", "nb")),
        (TOPOLVM, ("disk-b",)),
        (HOST, ("gone",)),
        (TOPOLVM, ("disk-gone",)),
        (HOST, ("nbare",)),
        ([{"matchExpressions": [_req(ZONE_KEY, "NotIn", "a", "b")]}], {}),
        ([{"matchExpressions": [_req(ZONE_KEY, "NotIn", "a", "b", "c", "x")]}], {}),
        ([{"matchExpressions": [_req(TOPOLVM, "Exists")]}], {}),
        ([{"matchExpressions": [_req(TOPOLVM, "DoesNotExist")]}], {}),
        ([{"matchExpressions": [_req(GEN, "Gt", "4")]}], {}),
        ([{"matchExpressions": [_req(GEN, "Lt", "4")]}], {}),
        ([{"matchExpressions": [_req(GEN, "Gt", "four")]}, {"matchExpressions": [_req(ZONE_KEY, "In", "a")]}], {}),
        ([{}, {"matchExpressions": [_req(ZONE_KEY, "In", "c")]}], {}),
        ([{}], {}),
        ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["na"]}]}], {}),
        ([{"matchExpressions": [_req(ZONE_KEY, "In", "d")]}], {}),
        ([{"matchExpressions": [_req("topology.ebs.csi.aws.com/zone", "In", "c")]}], {}),
        (None, {ZONE_KEY: "b__c"}),
        ([{"matchExpressions": [_req(HOST, "In", "na", "nb", "nc")]}], {ZONE_KEY: "c"}),
    ]
)  # fmt: skip


def pv_of(name: str, volume: Volume, *, claim: tuple[str, str] | None = None) -> dict[str, Any]:
    """PersistentVolume ``name`` with the node constraints ``volume`` describes."""
    first, second = volume
    if isinstance(first, str):
        assert isinstance(second, tuple)
        return b.pv(name, *second, key=first, claim=claim)
    assert isinstance(second, dict)
    pv = b.pv(name, "x", claim=claim)
    if first is None:
        del pv["spec"]["nodeAffinity"]
    else:
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = first
    pv["metadata"]["labels"] = dict(second)
    return pv


def moving_cluster(
    pods: dict[int, tuple[str | None, str | None, bool]],
    readiness: dict[str, str],
    volumes: dict[int, Volume],
    *,
    start: int,
    replicas: int,
    recorded: dict[int, Recorded] | None = None,
) -> Store:
    """``db`` with pods in any phase, some Terminating, some on a node that is gone, on nodes
    in any readiness, with claims bound to volumes pinned to zones or to nodes (some gone);
    with ``recorded``, a storage-class template and claims with no volume in the view, each
    recorded in a zone (or none)."""
    nodes = []
    generations = {"na": "1", "nb": "5", "nc": "9", "nx": "x"}
    for name, zone in (("na", "a"), ("nb", "b"), ("nc", "c"), ("nx", "x"), ("nbare", None)):
        state = readiness.get(name, "True")
        labels = {TOPOLVM: "disk-b"} if name == "nb" else {}
        if name in generations:
            labels[GEN] = generations[name]
        nodes.append(
            b.node(
                name,
                zone,
                labels=labels,
                ready=state if state != "taint" else "True",
                taint="node.kubernetes.io/unreachable" if state == "taint" else None,
            )
        )
    made = [
        b.sts_pod(ordinal=start + o, node=f"n{z}" if z else None, phase=phase, deleting=gone)
        for o, (z, phase, gone) in pods.items()
    ]
    for o, volume in volumes.items():
        claim = f"data-db-{start + o}"
        made += [b.pvc(claim, volume=f"pv-{o}"), pv_of(f"pv-{o}", volume)]
    for o, (zone, volume_name) in (recorded or {}).items():
        if o in volumes:
            continue
        unbound = b.pvc(f"data-db-{start + o}", volume=volume_name)
        if zone is not None:
            unbound["metadata"]["annotations"] = {"stszone.io/zone": zone}
        made.append(unbound)
    annotations = {**ABC, **({TEMPLATE: "ssd-{zone}"} if recorded is not None else {})}
    sts = b.statefulset(replicas=replicas, start=start, annotations=annotations)
    return guardref.view([*nodes, sts, *made])


TEMPLATE = "stszone.io/storage-class-template"
#: A claim with no volume in the view: the zone recorded on it (None: none, "": an empty one)
#: and the volume it names ("": not bound yet; else bound to a volume the view does not hold).
Recorded = tuple[str | None, str]
RECORDED = st.tuples(
    st.sampled_from(["a", "b", "c", "x", "", None]), st.sampled_from(["", "pv-lag"])
)


@given(
    pods=st.dictionaries(st.integers(0, 60), POD_STATES, max_size=8),
    readiness=st.dictionaries(st.sampled_from(["na", "nb", "nc", "nx", "nbare"]), READINESS),
    volumes=st.dictionaries(st.integers(0, 60), VOLUMES, max_size=4),
    recorded=st.none() | st.dictionaries(st.integers(0, 60), RECORDED, max_size=4),
    start=st.integers(0, 3),
    old=st.integers(1, 70),
    data=st.data(),
)
def test_property_matches_a_brute_force_walk(
    pods: dict[int, tuple[str | None, str | None, bool]],
    readiness: dict[str, str],
    volumes: dict[int, Volume],
    recorded: dict[int, Recorded] | None,
    start: int,
    old: int,
    data: Any,
) -> None:
    """Sparse pods anywhere (zone x is outside the list), in every phase and some Terminating,
    on nodes Ready or not, with volumes pinned to zones or to nodes (some gone): the bounded
    walk gives the lost zones, their holder counts, the lowest safe count, the unknown count,
    the dying pods in lost zones and the zones left to nodes that are not Ready, of a walk over
    every ordinal."""
    new = data.draw(st.integers(0, old - 1), label="new")
    store = moving_cluster(pods, readiness, volumes, start=start, replicas=old, recorded=recorded)
    got = agrees_with_a_walk(store, range(start, start + old), range(start, start + new))
    assert all(len(h.first) == min(h.count, ranges.NAMED) for h in got.lost.values())


@given(
    pods=st.dictionaries(st.integers(0, 8), POD_STATES, min_size=3, max_size=9),
    readiness=st.fixed_dictionaries(dict.fromkeys(("na", "nb", "nc", "nx", "nbare"), READINESS)),
    volumes=st.dictionaries(st.integers(0, 8), VOLUMES, max_size=3),
    recorded=st.none() | st.dictionaries(st.integers(0, 8), RECORDED, max_size=4),
    old=st.integers(1, 9),
    data=st.data(),
)
def test_property_dense_sets_in_motion_match_a_brute_force_walk(
    pods: dict[int, tuple[str | None, str | None, bool]],
    readiness: dict[str, str],
    volumes: dict[int, Volume],
    recorded: dict[int, Recorded] | None,
    old: int,
    data: Any,
) -> None:
    """Small sets with a pod on most ordinals and most nodes not Ready: the shapes where a
    dying pod sits in a lost zone, or a zone is left to pods on nodes not Ready, are common
    here; the guard's findings agree with the walk's."""
    new = data.draw(st.integers(0, old - 1), label="new")
    store = moving_cluster(pods, readiness, volumes, start=0, replicas=old, recorded=recorded)
    agrees_with_a_walk(store, range(old), range(new))


#: (the shape, pods, node readiness, volumes, old and new replica counts, what must be found)
MOTION: list[tuple[str, dict[int, tuple[str | None, str | None, bool]], dict[str, str], dict[int, Volume], int, int, str]] = [
    ("a Terminating kept pod in the lost zone", {0: ("c", "Running", True), 1: ("b", None, False), 2: ("a", None, False), 3: ("c", None, False)}, {}, {}, 4, 3, "leaving"),
    ("two dying pods in two lost zones", {0: ("c", "Failed", False), 1: ("a", "Succeeded", False), 2: ("a", None, False), 3: ("c", None, False), 4: ("b", None, False)}, {}, {}, 5, 3, "leaving"),
    ("a removed Failed pod counted where its replacement goes", {0: ("a", None, False), 1: ("b", None, False), 2: ("a", "Failed", False)}, {}, {}, 3, 2, "lost"),
    ("the replacement follows a hostname volume", {0: ("a", None, False), 1: ("a", None, True), 2: ("c", None, False)}, {}, {1: ("kubernetes.io/hostname", ("nc",))}, 3, 2, "allowed"),
    ("a zone left to a pod on a NotReady node", {0: ("a", None, False), 1: ("b", None, False), 2: ("c", None, False), 3: ("c", None, False)}, {"nc": "False"}, {}, 4, 3, "unready"),
    ("a zone left to pods on an unreachable node", {0: ("a", None, False), 1: ("b", None, False), 2: ("c", None, False), 5: ("c", None, False), 3: ("a", None, False)}, {"nc": "taint"}, {}, 6, 4, "unready"),
    ("a zone kept by a pod on an Unknown node and by the rule", {0: ("a", None, False), 1: ("b", None, False), 2: ("c", None, False), 5: ("b", None, False)}, {"nb": "Unknown"}, {}, 6, 5, "allowed"),
    ("a pod-less ordinal's volume on a deleted node", {0: ("a", None, False), 1: ("b", None, False)}, {}, {2: ("kubernetes.io/hostname", ("gone",))}, 3, 2, "unknown"),
    ("a Terminating pod whose volume attaches nowhere", {0: ("a", None, False), 1: ("b", None, False), 2: ("c", None, True)}, {}, {2: ("topology.topolvm.io/node", ("disk-gone",))}, 3, 2, "unknown"),
    ("a TopoLVM volume on nb", {0: ("a", None, False), 2: ("c", None, False)}, {}, {1: ("topology.topolvm.io/node", ("disk-b",))}, 3, 1, "lost"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pods", "readiness", "volumes", "old", "new", "finds"),
    [pytest.param(*m[1:], id=m[0]) for m in MOTION],
)
def test_motion_shapes_match_a_brute_force_walk(
    pods: dict[int, tuple[str | None, str | None, bool]],
    readiness: dict[str, str],
    volumes: dict[int, Volume],
    old: int,
    new: int,
    finds: str,
) -> None:
    """Shapes of pods in motion the generated sets reach rarely, each with the finding it must
    make (so the comparison with the walk is never about nothing)."""
    got = agrees_with_a_walk(
        moving_cluster(pods, readiness, volumes, start=0, replicas=old), range(old), range(new)
    )
    found = {
        "leaving": bool(got.leaving),
        "unready": bool(got.unready) and not got.refused,
        "lost": bool(got.lost) and not got.depends_on_unknown,
        "unknown": got.depends_on_unknown,
        "allowed": not got.refused and not got.unready,
    }
    assert found[finds], got


def on(nodes: dict[int, str]) -> list[dict[str, Any]]:
    """Pods: ordinal -> its node (na/nb/nc, nx in zone x outside the list, nbare without a
    zone label)."""
    return [b.sts_pod(ordinal=o, node=n, claims=("data", "logs")) for o, n in nodes.items()]


def bound(template: str, zones: dict[int, str]) -> list[dict[str, Any]]:
    """Claims of ``template`` bound to volumes usable from the given zones ("ab": a and b)."""
    made: list[dict[str, Any]] = []
    for o, where in zones.items():
        made += [
            b.pvc(f"{template}-db-{o}", volume=f"{template}-{o}"),
            b.pv(f"{template}-{o}", *where),
        ]
    return made


def pinned(*labels: tuple[str, str | None]) -> list[dict[str, Any]]:
    """Nodes labelled example.io/node=<value>, in the given zone (None: no zone label)."""
    return [b.node(f"p{v}", z, labels={"example.io/node": v}) for v, z in labels]


NODE_ORDINAL = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}

#: (the shape, the set's annotations, its ordinals.start -- the new one when it moves --, the
#: objects, old ordinals, new ordinals)
EDGES: list[tuple[str, dict[str, str], int, list[dict[str, Any]], range, range]] = [
    ("a start offset, unknown zones removed", ABC, 1, on({1: "na", 2: "nbare", 3: "nc", 4: "nbare", 5: "nb"}), range(1, 6), range(1, 3)),
    ("a start offset, an unknown the only chance of a zone", ABC, 1, on({1: "na", 2: "nb", 3: "nbare", 4: "na", 5: "nb", 6: "na"}), range(1, 7), range(1, 3)),
    ("a start offset, the rule holding the rest", ABC, 2, on({3: "nbare"}), range(2, 9), range(2, 4)),
    ("start moved up: the lowest ordinals go", ABC, 1, on({0: "na", 1: "nb", 2: "nc", 3: "na", 4: "nb", 5: "nc"}), range(0, 6), range(1, 3)),
    ("start moved up past an unknown", ABC, 2, on({0: "nbare", 3: "nc"}), range(0, 6), range(2, 4)),
    ("start moved down, an unknown at the top", ABC, 0, on({4: "nbare", 5: "nc"}), range(2, 6), range(0, 2)),
    ("start moved down just below an unknown", ABC, 0, on({2: "nbare", 3: "na"}), range(2, 4), range(0, 1)),
    ("start moved down onto pods outside the list", ABC, 0, on({0: "nx", 1: "nx", 2: "nx", 5: "nc"}), range(3, 6), range(0, 1)),
    ("start moved up, pods outside the list on both sides", ABC, 1, on({0: "nx", 5: "nx", 1: "na"}), range(0, 6), range(1, 3)),
    ("two pods outside the list, one removed", ABC, 0, on({0: "nx", 4: "nx", 1: "na"}), range(0, 6), range(0, 3)),
    ("an unknown kept beside a lost zone", ABC, 0, on({0: "nbare", 2: "nc"}), range(0, 3), range(0, 2)),
    ("more holders than a message names", ABC, 0, on({7: "nbare"}), range(0, 40), range(0, 2)),
    ("regional volumes meeting in one zone", ABC, 0, [*bound("data", {2: "ab"}), *bound("logs", {2: "bc"})], range(0, 3), range(0, 2)),
    ("no zone list: volumes tell where the set is", {}, 0, [*bound("data", {0: "a", 1: "b", 2: "a"})], range(0, 3), range(0, 2)),
    ("no zone list: a pod whose zone is unknown", {}, 0, [b.node("nbare", None), *on({0: "nbare"}), *bound("data", {1: "a"})], range(0, 2), range(0, 1)),
    ("node-ordinal: a node labelled with a word", {**ABC, **NODE_ORDINAL}, 0, pinned(("0", "a"), ("1", "b"), ("spare", "c"), ("2", "c")), range(0, 3), range(0, 2)),
    ("node-ordinal: no zone anywhere", NODE_ORDINAL, 0, pinned(("0", None), ("1", None)), range(0, 2), range(0, 1)),
    ("node-ordinal: an unknown below a pinned ordinal", {**ABC, **NODE_ORDINAL}, 0, pinned(("0", "a"), ("1", "b"), ("3", "a")), range(0, 4), range(0, 2)),
    ("node-ordinal: start moved up, a labelled node past the old count keeps a zone", {**ABC, **NODE_ORDINAL}, 1, pinned(("0", "a"), ("1", "b"), ("2", "c"), ("3", "b"), ("4", "a")), range(0, 3), range(1, 4)),
    ("node-ordinal: start moved up, the zone's labelled node far past the old count", {**ABC, **NODE_ORDINAL}, 1, pinned(("0", "a"), ("1", "b"), ("2", "c"), ("3", "b"), ("12", "a")), range(0, 3), range(1, 4)),
    ("no zone list: start moved up, a claim past the old count keeps a zone", {}, 1, [*bound("data", {0: "a", 1: "b", 2: "b", 5: "a"})], range(0, 3), range(1, 4)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("annotations", "start", "objects", "old", "new"),
    [pytest.param(*e[1:], id=e[0]) for e in EDGES],
)
def test_edge_shapes_match_a_brute_force_walk(
    annotations: dict[str, str], start: int, objects: list[dict[str, Any]], old: range, new: range
) -> None:
    """Shapes the generated ones rarely reach -- ordinals.start offsets and moves (the
    StatefulSet start-ordinal migration), unknown zones at the edges of what is kept, holders
    beyond what a message names, regional volumes, no zone list at all, node-ordinal labels
    that are not ordinals -- agree with the walk: the zones lost and who holds them, the pods
    leaving zones outside the list, the unknowns and the lowest safe count."""
    nodes = (
        [*NODES, b.node("nx", "x"), b.node("nbare", None)]
        if "stszone.io/zones" in annotations
        else []
    )
    sts = b.statefulset(
        replicas=len(new), start=start, annotations=annotations, templates=("data", "logs")
    )
    agrees_with_a_walk(guardref.view([*nodes, sts, *objects]), old, new)


@given(
    labels=st.lists(
        st.tuples(st.integers(0, 14), st.sampled_from(["a", "b", "c", "x", None])), max_size=9
    ),
    running=st.sets(st.integers(0, 14), max_size=4),
    listed=st.booleans(),
    starts=st.tuples(st.integers(0, 4), st.integers(0, 4)).filter(lambda s: s[0] != s[1]),
    old=st.integers(1, 7),
    new=st.integers(0, 7),
)
def test_property_node_ordinal_start_moves_match_a_brute_force_walk(
    labels: list[tuple[int, str | None]],
    running: set[int],
    listed: bool,
    starts: tuple[int, int],
    old: int,
    new: int,
) -> None:
    """node-ordinal mode, nodes labelled with ordinals (some twice, in zone x outside the list
    or in none), pods running on the first node of their label: a move of ordinals.start with
    any count agrees with the walk, the lowest safe count included, which a labelled node past
    the old count may give; and that count, set with the start, is allowed. At the new start,
    the audit's lowest count is the walk's, and explain allows exactly the sizes from it."""
    nodes = [
        b.node(f"p{i}", z, labels={"example.io/node": str(v)}) for i, (v, z) in enumerate(labels)
    ]
    first = {v: f"p{i}" for i, (v, _) in reversed(list(enumerate(labels)))}
    pods = [b.sts_pod(ordinal=o, node=first[o]) for o in sorted(running) if o in first]
    annotations = {**NODE_ORDINAL, **(ABC if listed else {})}
    sts = b.statefulset(replicas=new, start=starts[1], annotations=annotations)
    store = guardref.view([*nodes, sts, *pods])
    before = range(starts[0], starts[0] + old)
    got = agrees_with_a_walk(store, before, range(starts[1], starts[1] + new))
    if got.lowest is not None:
        offered = range(starts[1], starts[1] + got.lowest)
        policy = resolve_policy("ns", "db", store=store)
        kept = guard.scale_down(
            "db", old=before, new=offered, namespace="ns", policy=policy, store=store
        )
        assert not kept.refused, got.lowest
    now = range(starts[1], starts[1] + new)
    _, emptied = guardref.walk(store, resolve_policy("ns", "db", store=store), now, now[:0])
    (report,) = audit(store).sets
    assert report.lowest == emptied
    explained = explain_workload(store, "ns", "db")
    assert explained is not None
    for size in explained.sizes:
        safe = size.replicas == 0 or (emptied is not None and size.replicas >= emptied)
        assert size.allowed == safe, size


#: A watch event: (kind, ordinal, zone or None) -- kind "pod" puts pod db-<o> on the node of
#: that zone (None: not scheduled), "gone" deletes it, "claim" binds data-db-<o> to a PV in that
#: zone (None: deletes the claim), "prebound" a PV whose claimRef names it, before any claim;
#: "node" relabels node n<zone> (na, nb, nc, nx) with zone "abcx"[o % 4] (o >= 8: no label),
#: "nodegone" deletes n<zone>. Where the set's running pods are is kept between two checks
#: until the set's pods or a node change (:func:`agrees_with_a_walk` keeps it, as admission does).
EVENTS = st.tuples(
    st.sampled_from(["pod", "gone", "claim", "prebound", "node", "nodegone"]),
    st.integers(0, 12),
    st.sampled_from(["a", "b", "c", "x", None]),
)


def apply_event(store: Store, kind: str, o: int, zone: str | None) -> None:
    if kind == "pod":
        store.put("pods", pod_info(b.sts_pod(ordinal=o, node=f"n{zone}" if zone else None)))
    elif kind == "gone":
        store.delete("pods", ("ns", f"db-{o}"))
    elif kind == "node" and zone is not None:
        store.put("nodes", node_info(b.node(f"n{zone}", "abcx"[o % 4] if o < 8 else None)))
    elif kind == "nodegone" and zone is not None:
        store.delete("nodes", f"n{zone}")
    elif kind in ("node", "nodegone"):
        pass  # no node to change
    elif kind == "claim" and zone is None:
        store.delete("claims", ("ns", f"data-db-{o}"))
    elif kind == "claim":
        assert zone is not None  # None took the branch above
        guardref.put_volume(store, b.pv(f"pv-{o}-{zone}", zone))
        store.put("claims", claim_info(b.pvc(f"data-db-{o}", volume=f"pv-{o}-{zone}")))
    else:
        claim = ("ns", f"data-db-{o}")
        guardref.put_volume(store, b.pv(f"pre-{o}", zone or "a", claim=claim))


@given(
    events=st.lists(st.lists(EVENTS, max_size=4), min_size=1, max_size=6), old=st.integers(1, 14)
)
def test_property_guard_follows_watch_events(
    events: list[list[tuple[str, int, str | None]]], old: int
) -> None:
    """Pods, claims and volumes change between scale checks (as watch events do): each check
    agrees with a walk over the tables as they are then, never with what it saw before."""
    store = guardref.view([*NODES, b.node("nx", "x"), b.statefulset(replicas=old)])
    for batch in events:
        for event in batch:
            apply_event(store, *event)
        for new in {0, old // 2, old - 1}:
            agrees_with_a_walk(store, range(old), range(new))


def test_where_running_pods_are_follows_every_change_of_the_pods_or_nodes() -> None:
    """A node relabelled, a node deleted or a pod moved between two scale-downs changes the
    answer.

    Ordinals 0-3 run on na, nb, nc and nd; nd is in zone c too, so 4 -> 3 keeps c on nc. With
    nc deleted (and zones c,a,b), ordinal 2's pod is going away and its replacement goes to b:
    c is left to ordinal 3 alone.
    """
    store = cluster(["a", "b", "c", "d"], extra=[b.node("nd", "c")])
    assert scale(store, 4, 3).allowed
    assert dict(store.pod_zones("ns", "db", ZONE_KEY).zones) == {0: "a", 1: "b", 2: "c", 3: "c"}
    store.put("nodes", node_info(b.node("nc", "a")))  # ordinal 2 is in a now: c leaves with 3
    relabelled = scale(store, 4, 3)
    assert (relabelled.allowed, relabelled.reason) == (False, "ZoneLoss"), relabelled
    assert "would drop zone c (ordinal 3 is its only pod)" in relabelled.message
    store.put("nodes", node_info(b.node("nc", "c")))
    assert scale(store, 4, 3).allowed
    store.delete("nodes", "nc")  # ordinal 2's node is gone: its pod goes, the rule says b
    store.put("statefulsets", statefulset_info(b.statefulset(replicas=4, annotations=CAB)))
    gone = scale(store, 4, 3)
    assert (gone.allowed, gone.reason) == (False, "ZoneLoss"), gone
    assert store.pod_zones("ns", "db", ZONE_KEY).gone == {2: "nc"}
    store.put("statefulsets", statefulset_info(b.statefulset(replicas=4, annotations=ABC)))
    store.put("nodes", node_info(b.node("nc", "c")))
    assert scale(store, 4, 3).allowed
    store.put("pods", pod_info(b.sts_pod(ordinal=2, node="na")))  # moved: a again
    assert not scale(store, 4, 3).allowed
    assert dict(store.pod_zones("ns", "db", ZONE_KEY).zones) == {0: "a", 1: "b", 2: "a", 3: "c"}


def test_two_billion_replicas_is_answered_at_once_with_a_bounded_message() -> None:
    """replicas is an int32: 2147483647 -> 1 must not walk two billion ordinals. The ordinals
    located one by one are bounded by the objects in the view (counted through the Store, the
    rules' only way to the cluster), and so is the whole answer's work."""
    store = CountingStore(cluster(["a", "b", "c"]))
    with line_budget(20_000):  # ~1,400 lines today; a walk fails here at once
        outcome = update(store, 2**31 - 1, 1)
    assert store.lookups <= store.objects()
    assert not outcome.allowed and len(outcome.message) < 2000
    assert "1, 4, 7, 10, 13, 16, 19, 22, 25, 28 and 715827872 more" in outcome.message
    assert "keeps every zone is 3;" in outcome.message


@given(
    pods=st.dictionaries(st.integers(0, 40), st.sampled_from(["a", "b", "c", None]), max_size=6),
    labels=st.dictionaries(st.integers(0, 40), st.sampled_from(["a", "b", "c"]), max_size=6),
    old=st.integers(1, 45),
    data=st.data(),
)
def test_property_node_ordinal_matches_a_brute_force_walk(
    pods: dict[int, str | None], labels: dict[int, str], old: int, data: Any
) -> None:
    """Node-ordinal mode: no rule, so every ordinal without a pod or labelled node is unknown."""
    new = data.draw(st.integers(0, old - 1), label="new")
    pinned = [b.node(f"p{o}", z, labels={"example.io/node": str(o)}) for o, z in labels.items()]
    objs = [b.sts_pod(ordinal=o, node=f"n{z}" if z else None) for o, z in pods.items()]
    mode = {**ABC, "stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"}
    sts = b.statefulset(replicas=old, annotations=mode)
    store = guardref.view([*NODES, *pinned, sts, *objs])
    got = agrees_with_a_walk(store, range(old), range(new))
    for unknown in (got.unknown_removed, got.unknown_kept):
        assert len(unknown.first) == min(unknown.count, ranges.NAMED)


def test_set_pods_are_found_by_the_names_the_controller_gives() -> None:
    """Ordinal N's pod is the one named "<set>-<N>": "db-03" or "db-x" are not ordinal pods,
    but their pod-index labels still count as ordinals the set has."""
    from webhook.model.records import PodInfo
    from webhook.model.setpods import SetPods

    pods = [
        PodInfo("ns", "db-3", "db", 3, "na"),
        PodInfo("ns", "db-03", "db", 4, "nb"),
        PodInfo("ns", "db-x", "db", 5, "nc"),
        PodInfo("ns", "db-0", "db", 0, ""),
    ]
    got = SetPods.of(pods)
    assert got.ordinals == {0, 3, 4, 5}
    assert {o: p.name for o, p in got.by_name.items()} == {3: "db-3", 0: "db-0"}
