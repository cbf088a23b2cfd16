"""The placement rule: ordinals, zones, data gravity (pure, no server)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.errors import Denied
from webhook.model import objects
from webhook.model.extract import node_info, volume_info
from webhook.model.owners import ordinal_of
from webhook.model.store import Store
from webhook.rules.placement import Placement, place, rule_zone
from webhook.rules.policy import resolve_policy
from webhook.wire import review
from webhook.wire.patch import apply

zone_names = st.lists(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
    min_size=1,
    max_size=6,
    unique=True,
)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"name": "db-3"}, 3),
        ({"name": "my-db-cluster-12"}, 12),
        ({"name": "db-3", "labels": {"apps.kubernetes.io/pod-index": "7"}}, 7),
        ({"name": "web", "labels": {"apps.kubernetes.io/pod-index": "0"}}, 0),
        ({"name": "db-x"}, None),
        ({"name": "db-3", "labels": {"apps.kubernetes.io/pod-index": "x"}}, 3),
        ({"name": "db-٣"}, None),
        ({"name": "db-2147483647"}, 2147483647),
        ({"name": "db-" + "9" * 5000}, None),
        ({"name": "db-3", "labels": {"apps.kubernetes.io/pod-index": "9" * 11}}, 3),
    ],
)
def test_ordinal_of(meta: dict[str, object], expected: int | None) -> None:
    """The pod-index label wins; else the name's numeric suffix; non-ASCII digits, and more
    digits than an int32 has, are not ordinals."""
    assert ordinal_of(meta, objects.str_map(meta, "labels")) == expected


@given(zones=zone_names, start=st.integers(-5, 50), length=st.integers(0, 60))
def test_every_prefix_of_k_covers_all_zones(zones: list[str], start: int, length: int) -> None:
    """Any run of >= k consecutive ordinals from ``start`` covers every zone (scale-down safety)."""
    k = len(zones)
    covered = {rule_zone(i, zones=tuple(zones), start=start) for i in range(start, start + length)}
    if length >= k:
        assert covered == set(zones)
    else:
        assert len(covered) == length


@given(zones=zone_names, ordinal=st.integers(0, 1000), seed=st.integers(0, 2**32))
def test_mapping_stable_under_reordering_of_inputs(
    zones: list[str], ordinal: int, seed: int
) -> None:
    """The zone of an ordinal does not depend on the order objects reach the view."""
    objs = [b.node(f"n{i}", z) for i, z in enumerate(zones)] + [
        b.statefulset("db", start=2),
        b.pv("pv-other", zones[0], claim=("ns", "data-db-999999")),
    ]
    shuffled = list(objs)
    random.Random(seed).shuffle(shuffled)
    answers = []
    for items in (objs, shuffled):
        store = store_from_objects(items)
        policy = resolve_policy("ns", "db", store=store)
        answers.append(place(ordinal, namespace="ns", policy=policy, store=store).zone)
    assert answers[0] == answers[1] == sorted(zones)[(ordinal - 2) % len(zones)]


def test_zone_sources_in_order_of_precedence() -> None:
    """StatefulSet annotation, then the pod's own annotation, then --zones, then node discovery."""
    nodes = [b.node("n1", "zone-b"), b.node("n2", "zone-a")]
    discovered = store_from_objects(nodes)
    assert resolve_policy("ns", "db", store=discovered).zones == ("zone-a", "zone-b")
    override = store_from_objects(nodes, zones=("z3", "z1"))
    assert resolve_policy("ns", "db", store=override).zones == ("z3", "z1")
    from_pod = resolve_policy(
        "ns", "db", store=override, pod_annotations={"stszone.io/zones": "p,q"}
    )
    assert from_pod.zones == ("p", "q")
    with_sts = store_from_objects(
        [*nodes, b.statefulset(annotations={"stszone.io/zones": "s,t,u"})]
    )
    policy = resolve_policy("ns", "db", store=with_sts, pod_annotations={"stszone.io/zones": "p,q"})
    assert policy.zones == ("s", "t", "u")


def test_a_pod_key_its_set_lacks_joins_the_sets_policy() -> None:
    """The set's keys win; a key only the pod carries still counts, and a malformed set is
    refused for its pods (the set's annotations are parsed as the view reads the set)."""
    store = store_from_objects([b.statefulset(annotations={"stszone.io/zones": "s,t"})])
    own = {"stszone.io/zones": "p,q", "stszone.io/scheduler-name": "my-scheduler"}
    policy = resolve_policy("ns", "db", store=store, pod_annotations=own)
    assert policy.zones == ("s", "t")
    assert policy.declared.scheduler_name == "my-scheduler"
    with pytest.raises(Denied, match="node-ordinal"):
        resolve_policy("ns", "db", store=store, pod_annotations={"stszone.io/mode": "node-ordinal"})
    broken = store_from_objects([b.statefulset(annotations={"stszone.io/zones": "a,a"})])
    with pytest.raises(Denied, match="more than once"):
        resolve_policy("ns", "db", store=broken, pod_annotations={"stszone.io/zones": "a,b"})
    tolerated = resolve_policy("ns", "db", store=broken, tolerate_malformed=True)
    assert tolerated.malformed and tolerated.declared.zones is None


def test_ordinals_start_offsets_the_rule() -> None:
    """With ordinals.start = 5, ordinal 5 goes to the first zone."""
    store = store_from_objects([b.statefulset(start=5, annotations={"stszone.io/zones": "a,b,c"})])
    policy = resolve_policy("ns", "db", store=store)
    assert [place(i, namespace="ns", policy=policy, store=store).zone for i in range(5, 10)] == [
        "a",
        "b",
        "c",
        "a",
        "b",
    ]


def test_data_gravity_bound_volume_wins_with_warning() -> None:
    """Ordinal 0 belongs in a, but its claim is bound to a PV in c: the pod follows its data."""
    store = store_from_objects(
        [
            b.statefulset(annotations={"stszone.io/zones": "a,b,c"}),
            b.pvc("data-db-0", volume="pv-c"),
            b.pv("pv-c", "c", claim=("ns", "data-db-0")),
        ]
    )
    placement = place(
        0, namespace="ns", policy=resolve_policy("ns", "db", store=store), store=store
    )
    assert (placement.zone, placement.rule_zone, placement.volume) == ("c", "a", "pv-c")
    assert placement.warnings == (
        "db-0 follows volume pv-c (claim data-db-0) to c; the rule says a",
    )


def test_prebound_volume_claim_ref_counts_before_binding() -> None:
    """A PV whose claimRef names the claim pins it even while the claim is still Pending."""
    store = store_from_objects(
        [
            b.statefulset(annotations={"stszone.io/zones": "a,b,c"}),
            b.pv("pv-b", "b", claim=("ns", "data-db-0")),
        ]
    )
    policy = resolve_policy("ns", "db", store=store)
    assert place(0, namespace="ns", policy=policy, store=store).zone == "b"


def test_two_volumes_pre_bound_to_one_claim_give_every_replica_the_same_zone() -> None:
    """pv-a (zone a) and pv-b (zone b) both name data-db-0 in their claimRef. A replica that
    watched pv-b arrive before pv-a and one that listed both after a restart must pick the
    same volume: the API server may send a pod's mutation to one and its validation to the
    other, which would deny the pod as stripped of its zone."""
    claimed = [b.pv(f"pv-{z}", z, claim=("ns", "data-db-0")) for z in ("a", "b")]
    objects = [
        b.statefulset(annotations={"stszone.io/zones": "a,b"}),
        b.pvc("data-db-0"),
        b.node("n1", "a"),
        b.node("n2", "b"),
    ]
    listed = store_from_objects([*objects, *claimed])
    watched = store_from_objects(objects)
    for volume in reversed(claimed):
        watched.put("volumes", volume_info(volume))
    assert watched.prebound("ns", "data-db-0") == listed.prebound("ns", "data-db-0")
    pod = b.sts_pod("db", 0)
    mutated = review.answer(
        "mutate", review.from_dict(b.review(pod)), store=watched, defaults=Defaults()
    )
    assert mutated.allowed
    validated = review.answer(
        "validate",
        review.from_dict(b.review(apply(pod, mutated.patch))),
        store=listed,
        defaults=Defaults(),
    )
    assert validated.allowed, validated.message


def _old_volume(phase: str) -> dict[str, object]:
    """pv-b in zone b, whose claimRef names data-db-0 as it was (uid old-uid)."""
    volume = b.pv("pv-b", "b", claim=("ns", "data-db-0"))
    volume["spec"]["claimRef"]["uid"] = "old-uid"
    volume["status"] = {"phase": phase}
    return volume


@pytest.mark.parametrize(
    ("phase", "claim_uid", "zone"),
    [
        ("Released", None, "a"),  # the claim was deleted; a new one may come: never pinned
        ("Failed", None, "a"),
        ("Bound", "new-uid", "a"),  # not yet marked Released, but the new claim is not its
        ("Bound", "old-uid", "b"),  # its own claim, not yet showing volumeName: pinned
        ("Available", None, "b"),  # pre-bound by name and uid, the claim not created yet
    ],
)
def test_a_volume_of_an_earlier_claim_does_not_pin_a_new_one(
    phase: str, claim_uid: str | None, zone: str
) -> None:
    """After `rebalance --move-data` deleted data-db-0, its old volume (Released, or still
    Bound for a moment) must not pull the fresh claim of the same name back to zone b."""
    objects: list[dict[str, object]] = [
        b.statefulset(annotations={"stszone.io/zones": "a,b,c"}),
        _old_volume(phase),
    ]
    if claim_uid is not None:
        claim = b.pvc("data-db-0")
        claim["metadata"]["uid"] = claim_uid
        objects.append(claim)
    store = store_from_objects(objects)
    policy = resolve_policy("ns", "db", store=store)
    assert place(0, namespace="ns", policy=policy, store=store).zone == zone


def test_volume_in_the_rule_zone_gives_no_warning() -> None:
    """Data already where the rule wants it: no override, no warning."""
    store = store_from_objects(
        [b.pvc("data-db-1", volume="pv-b"), b.pv("pv-b", "b")], zones=("a", "b")
    )
    placement = place(
        1,
        namespace="ns",
        policy=resolve_policy("ns", "db", store=store, pod_claims=("data-db-1",)),
        store=store,
    )
    assert (placement.zone, placement.warnings) == ("b", ())


def test_two_claims_in_disjoint_zones_are_denied() -> None:
    """A pod whose two volumes live in different zones can never run: say so."""
    store = store_from_objects(
        [
            b.statefulset(templates=("data", "logs"), annotations={"stszone.io/zones": "a,b"}),
            b.pvc("data-db-0", volume="pv-a"),
            b.pv("pv-a", "a"),
            b.pvc("logs-db-0", volume="pv-b"),
            b.pv("pv-b", "b"),
        ]
    )
    with pytest.raises(Denied, match="different zones"):
        place(0, namespace="ns", policy=resolve_policy("ns", "db", store=store), store=store)


def test_two_claims_on_regional_disks_of_disjoint_zones_are_denied_naming_all() -> None:
    """data's regional disk is usable from a and b, logs' from c and d: every zone of each is
    named."""
    store = store_from_objects(
        [
            b.statefulset(templates=("data", "logs"), annotations={"stszone.io/zones": "a,b,c,d"}),
            b.pvc("data-db-0", volume="pv-ab"),
            b.pv("pv-ab", "a", "b"),
            b.pvc("logs-db-0", volume="pv-cd"),
            b.pv("pv-cd", "c", "d"),
        ]
    )
    with pytest.raises(Denied) as denied:
        place(0, namespace="ns", policy=resolve_policy("ns", "db", store=store), store=store)
    assert denied.value.message == (
        "claims data-db-0 and logs-db-0 of db-0 are bound to volumes in different zones "
        "(a, b vs c, d); no node can mount both. Move or re-create one."
    )


def test_an_unbound_claim_of_a_set_with_a_class_template_holds_its_pod_by_its_zone() -> None:
    """data-db-0 has no volume yet, but stszone gave it zone c (and so class ssd-c): the pod
    follows the claim, and the placement names the claim, not a volume."""
    claim = b.pvc("data-db-0")
    claim["metadata"]["annotations"] = {"stszone.io/zone": "c"}
    notes = {"stszone.io/zones": "a,b,c", "stszone.io/storage-class-template": "ssd-{zone}"}
    store = store_from_objects([b.statefulset(annotations=notes), claim])
    policy = resolve_policy("ns", "db", store=store)
    assert place(0, namespace="ns", policy=policy, store=store) == Placement(
        zone="c",
        rule_zone="a",
        claim="data-db-0",
        warnings=("db-0 follows claim data-db-0 (its stszone.io/zone) to c; the rule says a",),
    )


def test_no_zones_known_is_denied_with_what_to_do() -> None:
    """No annotation, no --zones, no labelled nodes: the denial says how to fix it."""
    store = Store()
    with pytest.raises(Denied, match="--zones"):
        place(0, namespace="ns", policy=resolve_policy("ns", "db", store=store), store=store)


def test_a_node_that_changes_zone_moves_in_discovery() -> None:
    """A MODIFIED node with the same labels changes nothing; a label change moves it."""
    store = store_from_objects([b.node("n1", "zone-b"), b.node("n2", "zone-a")])
    key = "topology.kubernetes.io/zone"
    assert store.discovered_zones() == ("zone-a", "zone-b")
    store.put("nodes", node_info(b.node("n1", "zone-b")))
    assert store.nodes_with_label(key, "zone-b") == ("n1",)
    store.put("nodes", node_info(b.node("n1", "zone-c")))
    assert store.nodes_with_label(key, "zone-b") == ()
    assert store.discovered_zones() == ("zone-a", "zone-c")
    store.delete("nodes", "gone")
    assert store.discovered_zones() == ("zone-a", "zone-c")


def test_local_volume_pinned_by_hostname_is_in_its_nodes_zone() -> None:
    """local-path / OpenEBS / TopoLVM PVs name a node, not a zone: the pod follows the node's zone."""
    local = b.pv("pv-local", "unused")
    local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["nc"]}
            ]
        }
    ]
    store = store_from_objects(
        [
            b.node("nc", "zone-c"),
            b.statefulset(annotations={"stszone.io/zones": "zone-a,zone-b,zone-c"}),
            b.pvc("data-db-0", volume="pv-local"),
            local,
        ]
    )
    placement = place(
        0, namespace="ns", policy=resolve_policy("ns", "db", store=store), store=store
    )
    assert (placement.zone, placement.volume) == ("zone-c", "pv-local")


# --- pods with several claims (through /mutate) -----------------------------------------------

TWO_TEMPLATES = b.statefulset(templates=("data", "logs"), annotations={"stszone.io/zones": "a,b,c"})


def zone_of(ordinal: int, store: Store) -> tuple[str, tuple[str, ...]]:
    """The zone /mutate records on the pod of ``ordinal`` (claims data and logs), and its
    warnings."""
    pod = b.sts_pod(ordinal=ordinal, claims=("data", "logs"))
    outcome = review.answer(
        "mutate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )
    assert outcome.allowed, outcome.message
    zone: str = apply(pod, outcome.patch)["metadata"]["annotations"]["stszone.io/zone"]
    return zone, outcome.warnings


def test_a_pod_whose_first_claim_is_unbound_follows_its_second() -> None:
    """data-db-0 is still Pending (no volume yet); logs-db-0 is bound to a volume in c: the pod
    goes to c, where its bound data is, and says which claim took it there."""
    store = store_from_objects(
        [TWO_TEMPLATES, b.pvc("data-db-0"), b.pvc("logs-db-0", volume="pv-c"), b.pv("pv-c", "c")]
    )
    assert zone_of(0, store) == (
        "c",
        ("db-0 follows volume pv-c (claim logs-db-0) to c; the rule says a",),
    )


@pytest.mark.parametrize(("ordinal", "warned"), [(0, True), (1, False), (2, True)])
def test_volumes_usable_from_several_zones_meet_where_all_allow(ordinal: int, warned: bool) -> None:
    """data's regional disk is usable from a and b, logs' from b and c: only b can mount both,
    whatever the rule says (ordinal 1's rule zone is b: no warning)."""
    store = store_from_objects(
        [
            TWO_TEMPLATES,
            b.pvc(f"data-db-{ordinal}", volume="pv-ab"),
            b.pv("pv-ab", "a", "b"),
            b.pvc(f"logs-db-{ordinal}", volume="pv-bc"),
            b.pv("pv-bc", "b", "c"),
        ]
    )
    zone, warnings = zone_of(ordinal, store)
    assert zone == "b" and bool(warnings) == warned
