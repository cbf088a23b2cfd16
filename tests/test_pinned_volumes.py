"""Volumes pinned to nodes, not zones, and the claims a pod really mounts.

Zones a, b, c on nodes na, nb, nc (tests/test_guard.py), each labelled with its hostname; nc
also carries TopoLVM's node key. The rule puts ordinal i in zones[i mod 3]: 0 a, 1 b, 2 c.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from tests import rebalancing as r
from tests.test_guard import ABC, scale
from webhook.cluster.clusterfile import store_from_objects
from webhook.cluster.snapshot import from_objects
from webhook.config import Defaults
from webhook.model.store import Store
from webhook.rules.audit import audit
from webhook.rules.homes import slots
from webhook.rules.rebalance import chosen, plan
from webhook.rules.removal import removable_nodes
from webhook.wire import review

JSON = dict[str, Any]
TOPOLVM = "topology.topolvm.io/node"
HOSTNAME = "kubernetes.io/hostname"
NODES = [
    b.node("na", "a"),
    b.node("nb", "b"),
    b.node("nc", "c", labels={TOPOLVM: "disk-c"}),
    b.node("nbare", None),
]


def bound(ordinal: int, *values: str, key: str, claim: str = "") -> list[JSON]:
    """Claim ``claim`` (default data-db-<ordinal>) bound to a PV pinned by ``key In values``."""
    name = claim or f"data-db-{ordinal}"
    return [b.pvc(name, volume=f"pv-{ordinal}"), b.pv(f"pv-{ordinal}", *values, key=key)]


def view(*objects: JSON, replicas: int = 3) -> Store:
    return store_from_objects([*NODES, b.statefulset(annotations=ABC, replicas=replicas), *objects])


def mutated(pod: JSON, store: Store) -> review.Answer:
    return review.answer(
        "mutate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )


def validated(pod: JSON, store: Store) -> review.Answer:
    return review.answer(
        "validate", review.from_dict(b.review(pod)), store=store, defaults=Defaults()
    )


def pinned_zone(outcome: review.Answer) -> list[str] | None:
    """The zone values of the required affinity a mutation adds, None when it adds none."""
    for op in outcome.patch or []:
        if op["path"] == "/spec/affinity":
            term = op["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            values: list[str] = term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            return values
    return None


# --- a volume's zones are the zones of the nodes it can attach to -----------------------------


@pytest.mark.parametrize(
    ("key", "values"),
    [
        pytest.param(HOSTNAME, ("nc",), id="local volume by hostname"),
        pytest.param(TOPOLVM, ("disk-c",), id="TopoLVM node key"),
        pytest.param("example.com/rack-host", ("nc",), id="any node key"),
    ],
)
def test_a_volume_pinned_to_a_node_pulls_its_pod_to_that_nodes_zone(
    key: str, values: tuple[str, ...]
) -> None:
    """db-1's claim is bound to a volume only node nc (zone c) can attach: the pod goes to c
    (the rule says b), and a scale-down that removes db-1 loses c."""
    labels = {TOPOLVM: "disk-c", "example.com/rack-host": "nc"}
    nodes = [*NODES[:2], b.node("nc", "c", labels=labels), NODES[3]]
    store = store_from_objects(
        [*nodes, b.statefulset(annotations=ABC, replicas=2), b.sts_pod(ordinal=0, node="na"),
         *bound(1, *values, key=key)]
    )  # fmt: skip
    outcome = mutated(b.sts_pod(ordinal=1), store)
    assert pinned_zone(outcome) == ["c"]
    assert outcome.warnings == ("db-1 follows volume pv-1 (claim data-db-1) to c; the rule says b",)
    assert "zone c (ordinal 1 is the only one there; ordinal 1 is not running but its volume " in (
        scale(store, 2, 1).message
    )


def test_a_volume_on_nodes_of_two_zones_takes_the_rules_zone_among_them() -> None:
    """A volume either na or nb can attach (two hosts): ordinal 1 goes to b, its rule zone."""
    outcome = mutated(b.sts_pod(ordinal=1), view(*bound(1, "na", "nb", key=HOSTNAME)))
    assert pinned_zone(outcome) == ["b"] and outcome.warnings == ()


@pytest.mark.parametrize(
    "key",
    [
        "topology.ebs.csi.aws.com/zone",
        "topology.gke.io/zone",
        "topology.disk.csi.azure.com/zone",
        "failure-domain.beta.kubernetes.io/zone",
    ],
)
def test_the_zone_keys_of_csi_drivers_name_zones(key: str) -> None:
    """Zone keys read as zones, whatever node carries them: a volume in c pulls ordinal 1."""
    assert pinned_zone(mutated(b.sts_pod(ordinal=1), view(*bound(1, "c", key=key)))) == ["c"]


@pytest.mark.parametrize(
    ("key", "values", "why"),
    [
        pytest.param(
            HOSTNAME,
            ("gone",),
            "volume pv-1 can attach only to nodes with kubernetes.io/hostname In [gone], and no "
            "such node is in stszone's view",
            id="its node was deleted",
        ),
        pytest.param(
            TOPOLVM,
            ("disk-x",),
            "volume pv-1 can attach only to nodes with topology.topolvm.io/node In [disk-x], "
            "and no such node is in stszone's view",
            id="its key is on no node",
        ),
        pytest.param(
            HOSTNAME,
            ("nbare",),
            "volume pv-1 can attach only to node(s) nbare, which have no label "
            "topology.kubernetes.io/zone",
            id="its node has no zone",
        ),
    ],
)
def test_a_volume_that_selects_no_node_is_in_an_unknown_zone(
    key: str, values: tuple[str, ...], why: str
) -> None:
    """Its pod can run nowhere (or, on a node without a zone label, nowhere stszone can tell):
    stszone pins it to no zone and says why; the validating webhook lets it through; a
    scale-down that removes it, with no other pod in b and c, is refused as unknown, naming the
    volume."""
    store = view(b.sts_pod(ordinal=0, node="na"), *bound(1, *values, key=key), replicas=2)
    pod = b.sts_pod(ordinal=1)
    outcome = mutated(pod, store)
    assert outcome.allowed and pinned_zone(outcome) is None
    if values == ("nbare",):  # the node is there: the pod runs, in a zone no one can tell
        said = "is in no zone stszone can tell", "label the node(s) with their zone"
    else:
        said = "cannot run anywhere", "restore the node, or give the ordinal a new claim"
    assert outcome.warnings == (
        f"db-1 {said[0]}: {why} (claim data-db-1); stszone leaves it unpinned: {said[1]}",
    )
    assert validated(pod, store).allowed
    refused = scale(store, 2, 1)
    assert (refused.allowed, refused.reason) == (False, "ZoneUnknown")
    assert f"it removes ordinal 1, whose zone is unknown ({why})" in refused.message
    (report,) = audit(store).sets
    assert report.unknown == (1,) and report.rows[1].expected_zone is None


def _terms_pv(*terms: list[tuple[str, list[str]]]) -> JSON:
    """PV pv-1 with one nodeSelectorTerm per argument, each a list of (key, In values)."""
    pv = b.pv("pv-1", "x")
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in term]}
        for term in terms
    ]
    return pv


@pytest.mark.parametrize(
    ("hosts", "listed"),
    [
        (["n1", "n2", "n3"], "n1, n2, n3"),
        (["n1", "n2", "n3", "n4"], "n1, n2, n3 and 1 more"),
        (["n5", "n4", "n3", "n2", "n1"], "n1, n2, n3 and 2 more"),
    ],
)
def test_a_volume_on_unlabelled_nodes_names_three_and_counts_the_rest(
    hosts: list[str], listed: str
) -> None:
    """Its nodes (the hostnames it may attach to) carry no zone label, in name order."""
    nodes = [b.node(f"n{i}", None) for i in range(1, 6)]
    store = store_from_objects([*nodes, b.pv("pv-1", *hosts, key=HOSTNAME)])
    assert store.volume_nowhere("pv-1", "topology.kubernetes.io/zone") == (
        f"volume pv-1 can attach only to node(s) {listed}, which have no label "
        "topology.kubernetes.io/zone"
    )


def test_a_volume_for_no_node_in_view_spells_out_its_terms() -> None:
    """The terms are ORed, the expressions of a term ANDed, each with its values sorted."""
    pv = _terms_pv(
        [(HOSTNAME, ["lost", "gone"])], [(HOSTNAME, ["x"]), ("example.com/rack", ["r1"])]
    )
    store = store_from_objects([*NODES, pv])
    assert store.volume_nowhere("pv-1", "topology.kubernetes.io/zone") == (
        "volume pv-1 can attach only to nodes with kubernetes.io/hostname In [gone, lost] or "
        "example.com/rack In [r1] and kubernetes.io/hostname In [x], and no such node is in "
        "stszone's view"
    )
    # A volume the view does not hold is named as such, not as an empty list of terms.
    assert store.volume_nowhere("pv-2", "topology.kubernetes.io/zone") == (
        "volume pv-2 is not in stszone's view"
    )


def test_a_volume_on_nodes_without_the_sets_own_zone_key_names_them() -> None:
    """A set on example.com/room: node nc has a topology.kubernetes.io/zone but no room."""
    store = store_from_objects([*NODES, b.pv("pv-1", "nc", key=HOSTNAME)])
    assert store.volume_nowhere("pv-1", "example.com/room") == (
        "volume pv-1 can attach only to node(s) nc, which have no label example.com/room"
    )


def test_a_claim_created_for_a_volume_that_attaches_nowhere_gets_no_zone() -> None:
    """The claim names its volume (pre-provisioned local PV whose node is gone)."""
    store = view(b.pv("pv-1", "gone", key=HOSTNAME))
    claim = b.pvc("data-db-1", volume="pv-1")
    outcome = review.answer(
        "mutate", review.from_dict(b.review(claim)), store=store, defaults=Defaults()
    )
    assert outcome.allowed and not outcome.patch
    assert outcome.warnings == (
        "claim data-db-1: volume pv-1 can attach only to nodes with kubernetes.io/hostname In "
        "[gone], and no such node is in stszone's view; no zone set",
    )


def test_a_node_holding_a_topolvm_volume_is_not_removable() -> None:
    """db-2's data lives on nc's disk (TopoLVM): nc cannot go, though db-2 could run elsewhere
    in c by the rule alone."""
    nodes = [*NODES, b.node("nc2", "c")]
    store = store_from_objects(
        [*nodes, b.statefulset(annotations=ABC, replicas=3),
         *[b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na", "nb", "nc"])],
         *bound(2, "disk-c", key=TOPOLVM)]
    )  # fmt: skip
    alone = removable_nodes(store, [store.statefulsets[("ns", "db")]]).alone
    assert "nc" not in alone and "nc2" in alone


# --- data gravity follows the claims the pod mounts -------------------------------------------


def test_the_mounted_claim_decides_when_the_ordinal_label_and_the_name_disagree() -> None:
    """Pod db-3 carries pod-index 5 (its ordinal, for the rule) but mounts data-db-3, bound in
    a; data-db-5 is bound in b. Its data is where its mounted claim is: a."""
    store = view(
        b.pvc("data-db-3", volume="pv-3"), b.pv("pv-3", "a"),
        b.pvc("data-db-5", volume="pv-5"), b.pv("pv-5", "b"), replicas=6,
    )  # fmt: skip
    pod = b.sts_pod(ordinal=3)
    pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "5"
    outcome = mutated(pod, store)
    assert pinned_zone(outcome) == ["a"]
    assert outcome.warnings == ("db-3 follows volume pv-3 (claim data-db-3) to a; the rule says c",)


def test_a_pod_mounting_claims_bound_in_different_zones_is_denied_naming_both() -> None:
    """db-1 mounts its template's claim (in b) and a claim of its own, shared-1 (in c)."""
    store = view(
        b.pvc("data-db-1", volume="pv-1"), b.pv("pv-1", "b"),
        b.pvc("shared-1", volume="pv-s"), b.pv("pv-s", "c"),
    )  # fmt: skip
    pod = b.sts_pod(ordinal=1)
    pod["spec"]["volumes"].append(
        {"name": "shared", "persistentVolumeClaim": {"claimName": "shared-1"}}
    )
    outcome = mutated(pod, store)
    assert (outcome.allowed, outcome.reason) == (False, "VolumeZoneConflict")
    assert outcome.message == (
        "claims data-db-1 and shared-1 of db-1 are bound to volumes in different zones (b vs c); "
        "no node can mount both. Move or re-create one."
    )


def test_an_ordinal_whose_claims_are_bound_in_different_zones_holds_no_zone() -> None:
    """db-2 has no pod: its claims are bound in a and b, so stszone refuses the pod the
    controller creates (no node can mount both) and ordinal 2 runs nowhere. It must not count
    as holding c, the rule's zone: 6 -> 3 removes db-5, the only pod in c."""
    pods = [b.sts_pod(ordinal=o, node=f"n{z}", claims=("data", "logs"))
            for o, z in ((0, "a"), (1, "b"), (3, "a"), (4, "b"), (5, "c"))]  # fmt: skip
    sts = b.statefulset(annotations=ABC, replicas=6, templates=("data", "logs"))
    store = store_from_objects([
        *NODES, sts, *pods,
        b.pvc("data-db-2", volume="pv-a"), b.pv("pv-a", "a"),
        b.pvc("logs-db-2", volume="pv-b"), b.pv("pv-b", "b"),
    ])  # fmt: skip
    assert mutated(b.sts_pod(ordinal=2, claims=("data", "logs")), store).reason == (
        "VolumeZoneConflict"
    )
    outcome = scale(store, 6, 3)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneUnknown")
    assert (
        "kept ordinal 2, whose zone is unknown (volumes pv-a and pv-b are in different zones "
        "(a vs b); no node can mount both), is there" in outcome.message
    )


def test_the_guard_reads_the_claim_a_running_pod_mounts() -> None:
    """db-2 runs on nbare (no zone label) and mounts old-data-2, bound in c; no data-db-2 exists.
    Its mounted claim says c, so 3 -> 2 drops c -- a fact, not an unknown."""
    pod = b.sts_pod(ordinal=2, node="nbare")
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "old-data-2"
    store = view(
        b.sts_pod(ordinal=0, node="na"), b.sts_pod(ordinal=1, node="nb"), pod,
        b.pvc("old-data-2", volume="pv-old"), b.pv("pv-old", "c"),
    )  # fmt: skip
    outcome = scale(store, 3, 2)
    assert (outcome.allowed, outcome.reason) == (False, "ZoneLoss")
    assert "zone c (ordinal 2 is the only one there; ordinal 2 runs on nbare, whose zone its " in (
        outcome.message
    )


def test_rebalance_does_not_move_a_pod_whose_volume_attaches_nowhere() -> None:
    """db-1 runs in a (its rule zone is b), and its volume's node is gone: a re-created pod
    would stay Pending, so it is blocked, saying why."""
    objects = r.cluster(
        {0: "a1", 1: "a2", 2: "c1"},
        sts=r.statefulset(3, templates=("data",)),
        extra=[r.claim("data-db-1", "pv-1"), b.pv("pv-1", "gone", key=HOSTNAME)],
    )
    snap = from_objects(objects)
    (result,) = plan(snap.store, snap.state, sets=chosen(snap.store)).sets
    row = result.rows[1]
    assert row.kind == "blocked"
    assert (
        "its volume pv-1 can attach only to nodes with kubernetes.io/hostname In [gone], and no "
        "such node is in stszone's view: a re-created pod would stay Pending"
    ) in row.notes


def _pv(name: str, claim: str, *terms: list[tuple[str, list[str]]]) -> JSON:
    """A PV bound to ``claim`` whose nodeSelectorTerms hold these ``In`` expressions."""
    pv = b.pv(name, claim=("ns", claim))
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in term]}
        for term in terms
    ]
    if not terms:
        del pv["spec"]["nodeAffinity"]
    return pv


def _removable_with(pv: JSON) -> tuple[str, ...]:
    """Nodes na, na2 (a, na2 has disk d1), nb, nc; db-0 on na2 with its claim bound to ``pv``."""
    nodes = [
        b.node("na", "a"),
        b.node("na2", "a", labels={"example.io/disk": "d1"}),
        b.node("nb", "b"),
        b.node("nc", "c"),
    ]
    pods = [b.sts_pod(ordinal=o, node=n) for o, n in enumerate(["na2", "nb", "nc"])]
    store = store_from_objects(
        [
            *nodes,
            b.statefulset(annotations=ABC, replicas=3),
            *pods,
            b.pvc("data-db-0", volume=pv["metadata"]["name"]),
            pv,
        ]
    )
    return removable_nodes(store, [store.statefulsets[("ns", "db")]]).alone


def test_a_local_volume_reaches_only_the_nodes_every_expression_of_a_term_admits() -> None:
    """pv-0's first term names na and nb but also zones b,c and a,b (two zone keys, ANDed: b):
    of those only nb, in b. Its second names na and na2 and disk d1, which only na2 has. So in
    db-0's zone a the volume reaches na2 alone, and na2 cannot go; na holds nothing."""
    pv = _pv(
        "pv-0",
        "data-db-0",
        [
            (HOSTNAME, ["na", "nb"]),
            ("failure-domain.beta.kubernetes.io/zone", ["b", "c"]),
            ("topology.kubernetes.io/zone", ["a", "b"]),
        ],
        [(HOSTNAME, ["na", "na2"]), ("example.io/disk", ["d1"])],
    )
    alone = _removable_with(pv)
    assert "na" in alone and "na2" not in alone


def test_a_volume_pinned_to_no_node_leaves_its_pod_every_node_of_its_zone() -> None:
    """pv-0 has no node affinity (NFS, say): db-0 may be re-created on na, so na2 can go."""
    alone = _removable_with(_pv("pv-0", "data-db-0"))
    assert "na" in alone and "na2" in alone


def _alone(objects: list[JSON]) -> tuple[str, ...]:
    store = store_from_objects(objects)
    return removable_nodes(store, list(store.statefulsets.values())).alone


def test_a_pod_with_two_local_volumes_needs_a_node_that_reaches_both() -> None:
    """data-db-0 is local to na2, logs-db-0 to na or na2: only na2 reaches both, so it stays."""
    nodes = [b.node("na", "a"), b.node("na2", "a"), b.node("nb", "b")]
    sts = b.statefulset(
        annotations={"stszone.io/zones": "a,b"}, replicas=1, templates=("data", "logs")
    )
    pod = b.sts_pod(ordinal=0, node="na2", claims=("data", "logs"))
    volumes = [
        *(b.pvc("data-db-0", volume="pv-d"), b.pv("pv-d", "na2", key=HOSTNAME)),
        *(b.pvc("logs-db-0", volume="pv-l"), b.pv("pv-l", "na", "na2", key=HOSTNAME)),
    ]
    alone = _alone([*nodes, sts, pod, *volumes])
    assert "na2" not in alone and "na" in alone


def test_a_local_volume_narrows_the_nodes_of_the_ordinals_zone() -> None:
    """pv-0 is local to na or nb; db-0 belongs in a, where it reaches na only: na stays."""
    nodes = [b.node("na", "a"), b.node("na2", "a"), b.node("nb", "b")]
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b"}, replicas=1)
    volumes = [b.pvc("data-db-0", volume="pv-0"), b.pv("pv-0", "na", "nb", key=HOSTNAME)]
    alone = _alone([*nodes, sts, b.sts_pod(ordinal=0, node="na"), *volumes])
    assert "na" not in alone and "nb" in alone


def test_node_removal_reads_the_sets_own_topology_key() -> None:
    """Set db is spread over racks (example.io/rack r1, r2); every node is in zone a. db-0 on
    n1 may move to n2, the other node of r1; db-1 has n3 alone."""
    racks = {"n1": "r1", "n2": "r1", "n3": "r2"}
    nodes = [b.node(n, "a", labels={"example.io/rack": r}) for n, r in racks.items()]
    notes = {"stszone.io/zones": "r1,r2", "stszone.io/topology-key": "example.io/rack"}
    pods = [b.sts_pod(ordinal=0, node="n1"), b.sts_pod(ordinal=1, node="n3")]
    alone = _alone([*nodes, b.statefulset(annotations=notes, replicas=2), *pods])
    assert alone == ("n1", "n2")


def test_node_removal_follows_the_claim_the_pod_mounts() -> None:
    """db-0 runs on nb and mounts other-db-0 (not the controller's data-db-0), bound in b: it
    would be re-created in b, on nb2, so nb can go; the rule alone would send it to a."""
    nodes = [b.node("na", "a"), b.node("nb", "b"), b.node("nb2", "b")]
    sts = b.statefulset(annotations={"stszone.io/zones": "a,b"}, replicas=1)
    pod = b.sts_pod(ordinal=0, node="nb", claims=("other",))
    volumes = [b.pvc("other-db-0", volume="pv-0"), b.pv("pv-0", "b")]
    assert "nb" in _alone([*nodes, sts, pod, *volumes])


@pytest.mark.parametrize(
    "annotations",
    [
        {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/node"},
        {},  # no list, no --zones, no node with a zone: nowhere to re-create it
    ],
    ids=["node-ordinal", "no-zones"],
)
def test_a_slot_without_a_zone_to_re_create_in_records_none(annotations: dict[str, str]) -> None:
    store = store_from_objects(
        [b.node("n0", None, labels={"example.io/node": "0"}), b.statefulset(annotations=annotations, replicas=1)]
    )  # fmt: skip
    (slot,) = slots(store.statefulsets[("ns", "db")], store=store).slots
    assert slot.recreated is None


def test_the_templates_own_constraints_narrow_the_nodes_a_pod_may_move_to() -> None:
    """db's template asks for disk=ssd: in zone a only na has it, so db-0 on na has no other
    home and na stays; na2 (no ssd) holds nothing and can go."""
    nodes = [b.node("na", "a", labels={"disk": "ssd"}), b.node("na2", "a"), b.node("nb", "b")]
    sts = b.statefulset(
        annotations={"stszone.io/zones": "a,b"}, replicas=1, node_selector={"disk": "ssd"}
    )
    alone = _alone([*nodes, sts, b.sts_pod(ordinal=0, node="na")])
    assert "na" not in alone and "na2" in alone
