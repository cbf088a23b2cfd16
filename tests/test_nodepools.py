"""Strimzi KafkaNodePools: placement of brokers and their claims, from the operator's objects."""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests import poolsim as sim
from tests import strimzi_ref as ref
from webhook.model.extract import claim_info, volume_info
from webhook.model.nodepools import (
    nodepool_info,
    parse_node_ids,
    poolpod_info,
    removal_order,
)


def balanced(zones: dict[int, str]) -> bool:
    counts = Counter(zones.values())
    values = [counts.get(z, 0) for z in sim.ZONES]
    return max(values) - min(values) <= 1


def test_the_recorded_cluster_is_placed_claims_first_and_balanced() -> None:
    """The fixtures' cluster (broker JBOD 6, controller 3; IDs 0-5 and 6-8), claims before
    pods: every broker's claims and pod agree, each pool spreads evenly over the zones."""
    view = sim.store()
    pools = {p["metadata"]["name"]: p for p in sim.objects("kafkanodepools.v1.json")}
    for pool in pools.values():
        fresh = copy.deepcopy(pool)
        fresh["apiVersion"], fresh["kind"] = "kafka.strimzi.io/v1", "KafkaNodePool"
        fresh.pop("status")
        fresh["metadata"]["annotations"] = {"stszone.io/storage-class-template": "ssd-{zone}"}
        created = sim.admit(view, fresh)
        assert created.allowed
        assert created.edited["metadata"]["annotations"]["stszone.io/zones"] == ",".join(sim.ZONES)
        view.put("nodepools", nodepool_info(created.edited))
    claim_zones: dict[str, str] = {}
    for number in range(6, 21):
        claim = sim.recorded(f"{number:03d}-all-PersistentVolumeClaim")["request"]["object"]
        answered = sim.admit(view, claim)
        assert answered.allowed, answered.message
        zone = answered.edited["metadata"]["annotations"]["stszone.io/zone"]
        assert answered.edited["spec"]["storageClassName"] == f"ssd-{zone}"
        claim_zones[claim["metadata"]["name"]] = zone
        view.put("claims", claim_info(answered.edited))
    for info in list(view.nodepools.values()):  # the operator writes status.nodeIds
        ids = [0, 1, 2, 3, 4, 5] if info.name == "broker" else [6, 7, 8]
        view.put(
            "nodepools",
            nodepool_info(
                {**_raw(pools[info.name], dict(info.annotations)), "status": {"nodeIds": ids}}
            ),
        )
    pods: dict[str, str] = {}
    for number in range(23, 32):
        pod = sim.recorded(f"{number:03d}")["request"]["object"]
        answered = sim.admit(view, pod)
        assert answered.allowed, answered.message
        zone = answered.edited["metadata"]["annotations"]["stszone.io/zone"]
        terms = answered.edited["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]} in terms[
            0
        ]["matchExpressions"]
        pods[pod["metadata"]["name"]] = zone
        view.put("poolpods", poolpod_info(answered.edited))
    for claim, zone in claim_zones.items():
        assert (
            pods[claim.removeprefix("data-0-").removeprefix("data-1-").removeprefix("data-")]
            == zone
        )
    brokers = Counter(z for n, z in pods.items() if "broker" in n)
    controllers = Counter(z for n, z in pods.items() if "controller" in n)
    assert brokers == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    assert controllers == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    # A rolling update re-creates broker-0 under the same name: back to its data's zone.
    again = sim.admit(view, sim.recorded("048")["request"]["object"])
    assert again.edited["metadata"]["annotations"]["stszone.io/zone"] == pods["my-cluster-broker-0"]


def _raw(pool: sim.JSON, annotations: dict[str, str]) -> sim.JSON:
    made = copy.deepcopy(pool)
    made["metadata"]["annotations"] = annotations
    return made


def test_a_broker_follows_its_bound_volume_whatever_the_balance() -> None:
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 2)
    view.put(
        "volumes", volume_info(b.pv("pv-x", "zone-c", claim=("kafka", "data-my-cluster-pool-0")))
    )
    cluster.reconcile()
    assert cluster.zones("pool") == {0: "zone-c", 1: "zone-a"}


def test_a_re_created_pod_returns_to_its_claims_zone() -> None:
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 4)
    cluster.reconcile()
    before = cluster.zones("pool")
    for node_id in range(4):  # every pod deleted and re-created: same zones
        view.delete("poolpods", ("kafka", f"my-cluster-pool-{node_id}"))
        cluster.create_pod("pool", node_id)
    assert cluster.zones("pool") == before


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(min_value=1, max_value=4)),
        min_size=1,
        max_size=8,
    )
)
def test_scale_ups_keep_every_pool_within_one(steps: list[tuple[str, int]]) -> None:
    """Pools of one cluster share node IDs (the operator's assignor): after any sequence of
    scale-ups each pool's zone counts differ by at most one."""
    view = sim.store()
    cluster = sim.Cluster(view)
    for pool, more in steps:
        if pool not in cluster.pools:
            cluster.create_pool(pool, more)
        else:
            cluster.set_pool(pool, replicas=cluster.pools[pool].replicas + more)
        cluster.reconcile()
        for name in cluster.pools:
            zones = cluster.zones(name)
            assert len(zones) == cluster.pools[name].replicas
            assert balanced(zones), (name, zones)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=12, unique=True),
    st.integers(min_value=0, max_value=12),
    st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=45).map(str),
            st.tuples(st.integers(0, 45), st.integers(0, 45)).map(lambda t: f"{t[0]}-{t[1]}"),
            st.sampled_from(["x", "", " ", "-1", "99999999999"]),
        ),
        max_size=5,
    ),
)
def test_removal_order_is_the_operators(ids: list[int], replicas: int, items: list[str]) -> None:
    annotation = "[" + ", ".join(items) + "]"
    assert removal_order(ids, replicas, annotation) == ref.removed_ids(ids, replicas, annotation)
    assert removal_order(ids, replicas, None) == ref.removed_ids(ids, replicas, None)


def test_annotation_parsing_matches_the_operator_on_edge_cases() -> None:
    edges = ["", "[]", " [ 1 , 2-4 ] ", "[1,,2]", "1,2", "[2147483648]", "[5-3]", "[a]"]
    # Java's Integer.MAX_VALUE itself is an ID; a value must open and close with brackets.
    edges += ["[2147483647]", "[0-2147483647]", "[3)", "(3]", "3]", "[3"]
    for text in edges:
        parsed = parse_node_ids(text)
        theirs = ref.parse_node_ids(text)
        assert (parsed is None) == (theirs is None), text
        if parsed is not None and theirs is not None:
            assert parsed == tuple((i.first, i.last) for i in theirs), text


def test_a_control_character_voids_the_annotation_for_the_guard_as_for_the_operator() -> None:
    # NodeIdRange's pattern spaces items with Java's \s, [ \t\n\x0B\f\r] only: "[\x1c3]" does not
    # match it, so the operator ignores the whole value and removes the highest ID (checked by
    # running NodeIdRange and NodeIdAssignor of strimzi-kafka-operator under a JVM).
    for text in ["[\x1c3]", "[3,\x1f5]", "[3 -\x1d5]", "[\x1e]"]:
        assert parse_node_ids(text) is None, repr(text)
        assert ref.parse_node_ids(text) is None, repr(text)
    assert removal_order([1, 3, 5, 7], 3, "[\x1c3]") == (7,)
    # Around the brackets too: only Java's \s is space there, so "\x1c[3]" and a no-break space
    # before "[3]" void the value, and the operator removes the highest ID.
    for text in ["\x1c[3]", "[3]\x1f", "\u00a0[3]", "[3]\u2003"]:
        assert parse_node_ids(text) is None, repr(text)
        assert ref.parse_node_ids(text) is None, repr(text)
        assert removal_order([1, 3, 5, 7], 3, text) == (7,), repr(text)
    assert removal_order([1, 3, 5, 7], 3, "[\t3 ]") == (3,)


@settings(max_examples=30, deadline=None)
@given(st.permutations(list(range(9))))
def test_claims_created_together_are_placed_as_if_one_by_one(order: list[int]) -> None:
    """The operator creates a pass's claims together: the view holds none of the siblings when
    each is placed. Broker (0-5) and controller (6-8) claims, in any order: each pool is even,
    and every claim gets the zone it gets when they come one by one, lowest ID first."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("broker", 6)
    cluster.create_pool("controller", 3)
    zones = {}
    for node_id in order:  # none of them reaches the view before all are placed
        pool = "broker" if node_id < 6 else "controller"
        answered = sim.admit(view, sim.claim_object("my-cluster", pool, node_id))
        zones[node_id] = answered.edited["metadata"]["annotations"]["stszone.io/zone"]
    assert zones == {i: sim.ZONES[i % 3] for i in range(9)}


def test_a_broker_stripped_of_its_zone_requirement_is_refused_at_validation() -> None:
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 1)
    cluster.reconcile()
    placed = cluster.create_pod("pool", 0)  # as mutated: zone annotation and requirement
    assert sim.admit(view, placed, endpoint="validate").allowed
    stripped = copy.deepcopy(placed)
    stripped["spec"].pop("affinity")
    refused = sim.admit(view, stripped, endpoint="validate")
    assert not refused.allowed and refused.reason == "ZoneRequirementMissing"
    assert "my-cluster-pool-0" in refused.message


def test_a_broker_refused_for_a_lost_zone_requirement_is_told_what_to_do() -> None:
    """A webhook after stszone's strips the pin, or ORs in a term without it: the refusal says
    how to find that webhook and keep the broker pods out of it, and that with IfNeeded the API
    server calls stszone again, which pins the broker anew (the chain then admits it)."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("pool", 1)
    cluster.reconcile()
    placed = cluster.create_pod("pool", 0)
    stripped = copy.deepcopy(placed)
    stripped["spec"].pop("affinity")
    widened = copy.deepcopy(placed)
    required = widened["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    required["nodeSelectorTerms"].append(
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["spot"]}]}
    )
    for undone in (stripped, widened):
        refused = sim.admit(view, undone, endpoint="validate")
        assert refused.reason == "ZoneRequirementMissing"
        for step in (
            "kubectl get mutatingwebhookconfigurations",
            "objectSelector on the label strimzi.io/pool-name",
            "reinvocationPolicy: IfNeeded on mutate.stszone.io",
        ):
            assert step in refused.message
    assert sim.admit(view, stripped).allowed  # stszone called again: pinned, then admitted


def test_a_broker_claim_is_not_pinned_by_the_volume_of_a_deleted_claim_of_its_name() -> None:
    """The recorded claim reached /mutate without a uid (the API server sets it later), so a
    volume still Bound to a deleted claim of that name (its claimRef names that claim's uid)
    is none of its own: the claim is placed by its pool and gets its zone's class."""
    view = sim.store()
    for pool in sim.objects("kafkanodepools.v1.json"):
        fresh = copy.deepcopy(pool)
        fresh["apiVersion"], fresh["kind"] = "kafka.strimzi.io/v1", "KafkaNodePool"
        fresh.pop("status")
        fresh["metadata"]["annotations"] = {"stszone.io/storage-class-template": "ssd-{zone}"}
        view.put("nodepools", nodepool_info(sim.admit(view, fresh).edited))
    claim = sim.recorded("006-all-PersistentVolumeClaim")["request"]["object"]
    assert "uid" not in claim["metadata"]
    old = b.pv("pv-old", "zone-c", claim=("kafka", "data-0-my-cluster-broker-0"))
    old["spec"]["claimRef"]["uid"] = "uid-of-a-deleted-claim"
    view.put("volumes", volume_info(old))
    answered = sim.admit(view, claim)
    assert answered.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"
    assert answered.edited["spec"]["storageClassName"] == "ssd-zone-a"


def test_claims_left_by_a_scale_down_count_no_broker_of_the_pool() -> None:
    """``deleteClaim: false`` (Strimzi's default) leaves a removed broker's claim behind. Once
    its ID belongs to another pool of the cluster, that claim is nobody's broker: the pool's
    next broker goes where its live brokers are fewest, not where the stale claim is."""
    view = sim.store()
    cluster = sim.Cluster(view)
    cluster.create_pool("broker", 6)
    cluster.reconcile()
    assert cluster.zones("broker") == {i: sim.ZONES[i % 3] for i in range(6)}
    cluster.set_pool("broker", replicas=4)  # the operator removes 5 and 4, keeping 0a 1b 2c 3a
    ordered = [cluster.pools[n] for n in sorted(cluster.pools)]
    assert ref.assign(ordered)["broker"].removed == (5, 4)
    stale = {i: view.claims[("kafka", f"data-my-cluster-broker-{i}")] for i in (4, 5)}
    cluster.reconcile()
    for info in stale.values():  # deleteClaim: false: the claims stay
        view.put("claims", info)
    cluster.create_pool("controller", 1)  # takes ID 4, the lowest no pool uses
    cluster.reconcile()
    assert set(cluster.zones("controller")) == {4}
    cluster.set_pool("broker", replicas=6)  # adds 5 (back to its data) and 6
    cluster.reconcile()
    zones = cluster.zones("broker")
    assert set(zones) == {0, 1, 2, 3, 5, 6} and zones[5] == "zone-c"
    assert balanced(zones), zones
