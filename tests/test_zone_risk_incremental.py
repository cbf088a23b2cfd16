"""A refresh audits only the sets whose inputs changed, and its figures are those of a fresh scan.

The zone-risk job skips a set when :meth:`Store.revision_of` says nothing its audit reads has
changed since its figures were made. A change that should have moved a set's revision but did
not would leave stale gauges, so the test drives random changes of every kind the audit reads
(nodes and their labels, volumes, claims, pods owned and not, sets, namespaces, whole re-lists),
some of them at the sweep's pauses, and after each quiet refresh compares every set's figures to
those of a scan that has never seen the view before.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests import builders as b
from tests.kruiseobjects import kruise_store
from tests.test_zone_risk import namespace, refreshed
from webhook.cluster.clusterfile import store_from_objects
from webhook.model.extract import claim_info, node_info, pod_info, statefulset_info, volume_info
from webhook.model.namespaces import namespace_info
from webhook.model.store import Store
from webhook.model.tables import Table
from webhook.rules.risk import RiskScan

ZONES = ("zone-a", "zone-b", "zone-c")
NODES = ("n1", "n2", "n3", "n4")
NAMESPACES = ("a", "b", "c")
SETS = ("db", "kf", "x")
BROKER = "example.io/broker"


def a_set(rng: random.Random, name: str, ns: str) -> dict[str, Any]:
    annotations = rng.choice(
        [
            {"stszone.io/zones": ",".join(ZONES)},
            {"stszone.io/zones": "zone-a,zone-b"},
            {"stszone.io/zones": ",".join(ZONES), "stszone.io/storage-class-template": "s-{zone}"},
            {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": BROKER},
            {"stszone.io/mode": "nope"},
            {},
        ]
    )
    templates = rng.choice([("data",), ()])
    return b.statefulset(
        name, namespace=ns, replicas=rng.randrange(5), templates=templates, annotations=annotations
    )


def a_node(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {BROKER: str(rng.randrange(4))} if rng.random() < 0.5 else {}
    return b.node(name, rng.choice([*ZONES, None]), labels=labels)


def start(rng: random.Random) -> Store:
    objects = [namespace(ns, enabled=ns != "c") for ns in NAMESPACES]
    objects += [a_node(rng, n) for n in NODES]
    objects += [a_set(rng, s, ns) for ns in NAMESPACES for s in SETS]
    return store_from_objects(objects)


def change(rng: random.Random, store: Store) -> None:
    """One random change of something a set's audit may read."""
    ns, sts, ordinal = rng.choice(NAMESPACES), rng.choice(SETS), rng.randrange(5)
    claim, volume = f"data-{sts}-{ordinal}", f"pv-{ns}-{sts}-{ordinal}"
    kind = rng.randrange(13)
    if kind == 0:
        node = rng.choice([*NODES, None])
        store.put("pods", pod_info(b.sts_pod(sts, ordinal, namespace=ns, node=node)))
    elif kind == 1:
        store.delete("pods", (ns, f"{sts}-{ordinal}"))
    elif kind == 2:  # a pod no set owns, named as one of a set's ordinals
        store.put("pods", pod_info(b.plain_pod(f"{sts}-{ordinal}", namespace=ns)))
    elif kind == 3:
        store.put("nodes", node_info(a_node(rng, rng.choice(NODES))))
    elif kind == 4:
        store.delete("nodes", rng.choice(NODES))
    elif kind == 5:
        bound = rng.choice([volume, ""])
        made = b.pvc(claim, namespace=ns, volume=bound)
        if rng.random() < 0.5:  # recorded where stszone placed it, maybe by another zone list
            made["metadata"]["annotations"] = {"stszone.io/zone": rng.choice(ZONES)}
        store.put("claims", claim_info(made))
    elif kind == 6:
        store.delete("claims", (ns, claim))
    elif kind == 7:
        ref = rng.choice([(ns, claim), (rng.choice(NAMESPACES), claim), None])
        zones = rng.sample(ZONES, rng.randrange(1, 3))
        store.put("volumes", volume_info(b.pv(volume, *zones, claim=ref)))
    elif kind == 8:
        store.delete("volumes", volume)
    elif kind == 9:
        store.put("statefulsets", statefulset_info(a_set(rng, sts, ns)))
    elif kind == 10:
        store.delete("statefulsets", (ns, sts))
    elif kind == 11:  # a pod named as one set's ordinal, owned by another set of its namespace
        pod = b.sts_pod(sts, ordinal, namespace=ns, node=rng.choice(NODES))
        pod["metadata"]["ownerReferences"][0]["name"] = rng.choice(SETS)
        store.put("pods", pod_info(pod))
    else:
        name = rng.choice(NAMESPACES)
        store.put("namespaces", namespace_info(namespace(name, enabled=rng.random() < 0.7)))


def relist(store: Store, table: Table) -> None:
    """A re-list of one table bringing the same records (the revision moves all the same)."""
    store.replace(table, list(store.table(table).values()))


@pytest.mark.parametrize("seed", range(12))
def test_figures_after_any_changes_are_those_of_a_fresh_scan(seed: int) -> None:
    rng = random.Random(seed)
    store = start(rng)
    scan = refreshed(RiskScan(store, budget=10**9))
    for step in range(150):
        for _ in range(rng.randrange(4)):
            change(rng, store)
        if step % 25 == 24:
            tables: list[Table] = ["nodes", "pods", "statefulsets", "namespaces"]
            relist(store, rng.choice(tables))
        # Some changes land at the sweep's pauses, in the middle of a set's audit.
        for _ in scan.sweep():
            if rng.random() < 0.05:
                change(rng, store)
        refreshed(scan)  # a quiet sweep: the figures must now be current
        fresh = refreshed(RiskScan(store, budget=10**9))
        assert scan.sets == fresh.sets, (seed, step)
    assert scan.unchanged > 0  # the skip was exercised, not only full audits


def test_an_unchanged_view_is_not_audited_again() -> None:
    """A second refresh of the same view visits no ordinal; a pod moved re-audits its set alone."""
    rng = random.Random(1)
    store = start(rng)
    store.put("namespaces", namespace_info(namespace("c", enabled=True)))
    for ns in NAMESPACES:
        for s in SETS:
            store.put("statefulsets", statefulset_info(b.statefulset(s, namespace=ns, replicas=4)))
    scan = refreshed(RiskScan(store))
    assert scan.visited == 4 * len(NAMESPACES) * len(SETS)
    passes = scan.passes
    refreshed(scan)
    assert scan.visited == 4 * len(NAMESPACES) * len(SETS)
    assert scan.passes == passes + 1  # a pass still completes: every set's figures are current
    store.put("pods", pod_info(b.sts_pod("kf", 2, namespace="b", node="n1")))
    refreshed(scan)
    assert scan.visited == 4 * len(NAMESPACES) * len(SETS) + 4
    store.put("claims", claim_info(b.pvc("data-x-1", namespace="a", volume="")))
    refreshed(scan)  # a claim: every set of its namespace
    assert scan.visited == 4 * len(NAMESPACES) * len(SETS) + 4 + 4 * len(SETS)
    store.put("nodes", node_info(b.node("n1", "zone-b")))
    refreshed(scan)  # a node: every set
    assert scan.visited == 2 * 4 * len(NAMESPACES) * len(SETS) + 4 + 4 * len(SETS)


def test_a_volume_reached_from_another_namespace_re_audits_the_claims_sets() -> None:
    """A claim may name a volume whose claimRef names another namespace's claim (a pre-bind
    gone wrong): a change of that volume still reaches the figures of the claim's set."""
    objects = [namespace("a", enabled=True), namespace("b", enabled=True)]
    zones = {"stszone.io/zones": "zone-a,zone-b"}
    objects += [
        b.node("n1", None),
        b.statefulset("db", namespace="a", replicas=1, annotations=zones),
    ]
    objects += [b.sts_pod("db", 0, namespace="a", node="n1")]
    objects += [b.pvc("data-db-0", namespace="a", volume="pv0")]
    objects += [b.pv("pv0", "zone-a", claim=("b", "data-db-0"))]
    store = store_from_objects(objects)
    scan = refreshed(RiskScan(store))
    assert scan.sets[("a", "db")].held == 1  # the pod's node has no zone: the volume's counts
    store.put("volumes", volume_info(b.pv("pv0", "zone-q", claim=("b", "data-db-0"))))
    refreshed(scan)
    assert scan.sets[("a", "db")] == refreshed(RiskScan(store)).sets[("a", "db")]
    assert scan.sets[("a", "db")].held == 0  # zone-q is not one of the set's zones


def test_a_set_changed_after_the_listing_is_audited_as_it_is_now() -> None:
    """The sweep lists the sets, then audits them one by one: a set's record changed at a pause
    in between is audited as it is then, not as listed."""
    store = store_from_objects(
        [namespace("a", enabled=True), b.node("n1", "zone-a")]
        + [b.statefulset(s, namespace="a", replicas=0, templates=()) for s in ("s0", "s1")]
    )
    scan = RiskScan(store)
    sweep = scan.sweep()
    next(sweep)  # after s0's audit (no ordinals, so no pause inside it): s1's comes next
    store.put("statefulsets", statefulset_info(b.statefulset("s1", namespace="a", replicas=2)))
    for _ in sweep:
        pass
    assert scan.sets[("a", "s1")].replicas == 2
    refreshed(scan)
    assert scan.sets == refreshed(RiskScan(store)).sets


def test_a_sweep_that_finds_new_sets_refreshes_the_changed_ones_too() -> None:
    """New sets are audited first, and the same sweep goes on through the others: figures are
    current after one quiet sweep whatever appeared."""
    zones = {"stszone.io/zones": "zone-a,zone-b"}  # ordinal 0 in zone-a
    store = store_from_objects(
        [namespace("a", enabled=True), b.node("n1", "zone-a"), b.node("n2", "zone-b")]
        + [
            b.statefulset(s, namespace="a", replicas=1, templates=(), annotations=zones)
            for s in ("s0", "s1")
        ]
    )
    scan = refreshed(RiskScan(store))
    assert scan.sets[("a", "s1")].misplaced == 0
    store.put("statefulsets", statefulset_info(b.statefulset("new", namespace="a", templates=())))
    store.put("pods", pod_info(b.sts_pod("s1", 0, namespace="a", claims=(), node="n2")))
    refreshed(scan)
    assert scan.sets == refreshed(RiskScan(store)).sets
    assert scan.sets[("a", "s1")].misplaced == 1


def test_revisions_are_kept_for_existing_sets_and_namespaces_with_sets_only() -> None:
    """Pods of sets that went, and namespaces without sets, leave nothing behind."""
    store = start(random.Random(2))
    for ns in NAMESPACES:
        store.put("claims", claim_info(b.pvc("data-db-0", namespace=ns)))
        for s in SETS:
            store.put("statefulsets", statefulset_info(b.statefulset(s, namespace=ns, replicas=7)))
    assert store._revisions.held() == (9, 3)
    for ns in NAMESPACES:
        for s in SETS:
            store.delete("statefulsets", (ns, s))
    for i in range(50):
        store.put("pods", pod_info(b.sts_pod(f"gone{i}", 0, namespace="a", node="n1")))
        store.put("claims", claim_info(b.pvc(f"data-gone{i}-0", namespace=f"ns{i}")))
    assert store._revisions.held() == (0, 0)
    before = store.revision_of("a", "gone3")
    store.put("statefulsets", statefulset_info(b.statefulset("gone3", namespace="a")))
    assert store.revision_of("a", "gone3") > before


def test_a_claim_binding_refreshes_an_advanced_statefulset_alone_in_its_namespace() -> None:
    """shop holds only the Advanced StatefulSet web (live ordinals 0, 2, 3). web-3 has no
    pod; once its claim binds to a volume of zone a, its rank's zone (c) is held by nobody: the
    next refresh says so, as a scan that never saw the view before does."""
    store = kruise_store(zones_of={"web-0": "a", "web-2": "b"})
    store.put("volumes", volume_info(b.pv("pv-3", "a")))
    scan = RiskScan(store)
    refreshed(scan)
    assert scan.sets[("shop", "web", "apps.kruise.io")].held == 3
    store.put("claims", claim_info(b.pvc("data-web-3", namespace="shop", volume="pv-3")))
    refreshed(scan)
    assert scan.sets == refreshed(RiskScan(store)).sets
    assert scan.sets[("shop", "web", "apps.kruise.io")].held == 2
