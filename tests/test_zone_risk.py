"""Zone-risk gauges: figures worked out by hand, series that go with their set, bounded work."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.test_metrics import Samples, parse, scrape, value
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Settings
from webhook.model.extract import pod_info, statefulset_info
from webhook.model.store import Store
from webhook.rules.audit import PAUSE_EVERY, audit_set, audit_steps, finish
from webhook.rules.ordinals import WALK_LIMIT
from webhook.rules.risk import LIST_SLICE, RiskScan, SetRisk
from webhook.server import riskmetrics
from webhook.server.app import install_metrics
from webhook.server.metrics import Metrics
from webhook.server.riskmetrics import RENDER_SLICE, ZoneRisk
from webhook.server.runtime import Runtime

ZONES = "zone-a,zone-b,zone-c"

# Nodes a1 zone-a, b1 zone-b, c1 zone-c, k1 zone-a labelled example.io/broker=0.
# shop/db (zones a,b,c, 4 replicas, no volumes):
#   0 on a1 (zone-a) ok | 1 on c1 (zone-c, expected zone-b) MISPLACED | 2 pending -> rule
#   zone-c | 3 no pod -> rule zone-a.  Held: zone-a, zone-c (zone-b lost to the misplaced
#   pod): 2 of 3 listed.  Lowest count keeping both: ordinals 0 (a), 1 (c) -> 2.
# shop/kafka (node-ordinal on example.io/broker, no zones annotation: the server's three
#   discovered zones; 2 replicas): 0 on k1 ok -> zone-a | 1 no node labelled 1: unknown.
#   Held: zone-a, 1 of 3; 1 ordinal of unknown zone. Lowest 2: scaling to 1 would remove
#   ordinal 1, whose zone is unknown while zone-b and zone-c are uncovered, which the guard
#   refuses (an answer that depends on an unknown zone is a refusal).
# shop/broken: malformed annotation -> replicas only.
# lab/cache: namespace not opted in -> no series.
EXPECTED = {
    ("shop", "db"): SetRisk("shop", "db", replicas=4, zones=3, held=2, misplaced=1, unknown=0, lowest=2),
    ("shop", "kafka"): SetRisk("shop", "kafka", replicas=2, zones=3, held=1, misplaced=0, unknown=1, lowest=2),
}  # fmt: skip


def namespace(name: str, *, enabled: bool) -> dict[str, Any]:
    labels = {"stszone.io/enabled": "true"} if enabled else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def cluster() -> Store:
    broker = {"example.io/broker": "0"}
    node_ordinal = {"stszone.io/mode": "node-ordinal", "stszone.io/node-label": "example.io/broker"}
    return store_from_objects(
        [
            namespace("shop", enabled=True),
            namespace("lab", enabled=False),
            b.node("a1", "zone-a"),
            b.node("b1", "zone-b"),
            b.node("c1", "zone-c"),
            b.node("k1", "zone-a", labels=broker),
            b.statefulset("db", namespace="shop", replicas=4, templates=(), annotations={"stszone.io/zones": ZONES}),
            b.sts_pod("db", 0, namespace="shop", claims=(), node="a1"),
            b.sts_pod("db", 1, namespace="shop", claims=(), node="c1"),
            b.sts_pod("db", 2, namespace="shop", claims=()),
            b.statefulset("kafka", namespace="shop", replicas=2, templates=(), annotations=node_ordinal),
            b.sts_pod("kafka", 0, namespace="shop", claims=(), node="k1"),
            b.statefulset("broken", namespace="shop", replicas=5, annotations={"stszone.io/mode": "nope"}),
            b.statefulset("cache", namespace="lab", replicas=3, annotations={"stszone.io/zones": ZONES}),
            b.sts_pod("cache", 0, namespace="lab", claims=(), node="b1"),
        ]
    )  # fmt: skip


def refreshed(scan: RiskScan) -> RiskScan:
    for _ in scan.sweep():
        pass
    return scan


def test_figures_are_the_hand_worked_ones() -> None:
    """Listed and held zones, misplaced pods, unknown ordinals, lowest safe count per set."""
    scan = refreshed(RiskScan(cluster()))
    assert set(scan.sets) == {("shop", "db"), ("shop", "kafka"), ("shop", "broken")}
    for key, expected in EXPECTED.items():
        assert scan.sets[key] == expected, key
    broken = scan.sets[("shop", "broken")]
    assert broken.replicas == 5 and "stszone.io/mode" in broken.problem


def gauges(metrics: Metrics) -> Samples:
    return parse(metrics.exposition().decode())


def served(scan: RiskScan) -> Metrics:
    """Metrics serving the gauges a refresh of ``scan`` wrote."""
    risk = ZoneRisk(scan, ready=lambda: True, interval=30, pause=0)
    asyncio.run(risk.refresh())
    return Metrics(rendered=[risk.exposition])


def test_gauges_export_the_figures_and_a_malformed_set_only_its_replicas() -> None:
    """Every gauge per set, labelled namespace/statefulset/kind; the malformed set has replicas
    alone."""
    samples = gauges(served(RiskScan(cluster())))
    db = {"namespace": "shop", "statefulset": "db", "kind": "StatefulSet"}
    assert value(samples, "stszone_statefulset_replicas", **db) == 4
    assert value(samples, "stszone_statefulset_zones", **db) == 3
    assert value(samples, "stszone_statefulset_zones_held", **db) == 2
    assert value(samples, "stszone_statefulset_misplaced_pods", **db) == 1
    assert value(samples, "stszone_statefulset_unknown_zone_ordinals", **db) == 0
    assert value(samples, "stszone_statefulset_lowest_safe_replicas", **db) == 2
    kafka = {"namespace": "shop", "statefulset": "kafka", "kind": "StatefulSet"}
    assert value(samples, "stszone_statefulset_unknown_zone_ordinals", **kafka) == 1
    broken = frozenset({("namespace", "shop"), ("statefulset", "broken"), ("kind", "StatefulSet")})
    assert {name for name, labels in samples if labels == broken} == {
        "stszone_statefulset_replicas"
    }
    assert not any(("statefulset", "cache") in labels for _, labels in samples)


def test_a_set_whose_pod_template_is_skipped_raises_no_zone_alert() -> None:
    """stszone places none of its pods (the objectSelector keeps them away): two of them in
    zone-a, where the rule would have put one in zone-b, are not misplaced, and with no
    ``zones``/``zones_held`` samples StszoneStatefulSetLostZone cannot fire for it; the guard
    still judges its scale-downs, so its replicas and lowest safe count are exported."""
    store = store_from_objects(b.skipped_template_cluster())
    samples = gauges(served(RiskScan(store)))
    db = frozenset({("namespace", "shop"), ("statefulset", "db"), ("kind", "StatefulSet")})
    assert {name: v for (name, labels), v in samples.items() if labels == db} == {
        "stszone_statefulset_replicas": 3,
        "stszone_statefulset_misplaced_pods": 0,
        "stszone_statefulset_unknown_zone_ordinals": 0,
        "stszone_statefulset_lowest_safe_replicas": 3,
    }


async def test_a_deleted_set_loses_its_series_at_the_next_refresh() -> None:
    """No stale series: the set is gone from the figures, and from the text a scrape is
    served, at the first refresh after the view drops it."""
    store = cluster()
    risk = ZoneRisk(RiskScan(store), ready=lambda: True, interval=30, pause=0)
    metrics = Metrics(rendered=[risk.exposition])
    await risk.refresh()
    assert any(("statefulset", "db") in labels for _, labels in gauges(metrics))
    store.delete("statefulsets", ("shop", "db"))
    await risk.refresh()
    assert ("shop", "db") not in risk.scan.sets
    samples = gauges(metrics)
    assert not any(("statefulset", "db") in labels for _, labels in samples)
    assert any(("statefulset", "kafka") in labels for _, labels in samples)


def many_sets(count: int, replicas: int) -> Store:
    objects = [namespace("ns", enabled=True), b.node("a1", "zone-a")]
    objects += [b.statefulset(f"s{i}", replicas=replicas, templates=()) for i in range(count)]
    return store_from_objects(objects)


def test_each_refresh_visits_at_most_its_budget_plus_one_set() -> None:
    """Budget 25, five sets of 10: 30 ordinals (three sets), then the last two and a full pass."""
    scan = RiskScan(many_sets(5, 10), budget=25)
    refreshed(scan)
    assert (scan.visited, len(scan.sets), scan.passes) == (30, 3, 0)
    refreshed(scan)
    assert (scan.visited, len(scan.sets), scan.passes) == (50, 5, 1)


def test_a_huge_replica_count_costs_the_audit_cap_not_its_size() -> None:
    """replicas 2147483647 (a typo away) is audited up to WALK_LIMIT ordinals."""
    scan = refreshed(RiskScan(many_sets(1, 2_147_483_647), budget=1))
    assert scan.visited == WALK_LIMIT


def test_new_sets_are_refreshed_before_the_rest_of_a_pass() -> None:
    """A set created mid-pass gets its figures in the next refresh, not after the whole pass."""
    store = many_sets(4, 10)
    scan = RiskScan(store, budget=10)
    refreshed(scan)
    assert set(scan.sets) == {("ns", "s0")}
    store.put("statefulsets", statefulset_info(b.statefulset("new", replicas=10, templates=())))
    refreshed(scan)
    assert set(scan.sets) == {("ns", "s0"), ("ns", "new")}


def spread_set(replicas: int, *, misplaced: int | None = None) -> Store:
    """ns/db over zones a,b,c, every pod scheduled where the rule puts it (``misplaced``, if
    given, on the next zone's node instead)."""
    zones = ("zone-a", "zone-b", "zone-c")
    objects = [namespace("ns", enabled=True), *(b.node(z, z) for z in zones)]
    annotations = {"stszone.io/zones": ",".join(zones)}
    objects.append(
        b.statefulset(
            "db", namespace="ns", replicas=replicas, templates=(), annotations=annotations
        )
    )
    for i in range(replicas):
        node = zones[(i + (i == misplaced)) % 3]
        objects.append(b.sts_pod("db", i, namespace="ns", claims=(), node=node))
    return store_from_objects(objects)


def pauses_of(steps: Iterator[None]) -> int:
    return sum(1 for _ in steps)


def test_a_large_set_is_audited_in_slices_with_the_same_report() -> None:
    """A set of 100 is 100 / PAUSE_EVERY slices, and slicing changes nothing in its report."""
    store = spread_set(100, misplaced=37)
    sts = store.statefulsets[("ns", "db")]
    whole = audit_set(sts, store=store)
    assert whole.misplaced == 1 and whole.lowest == 3
    for every in (1, 7, PAUSE_EVERY, 100, 10**9):
        steps = audit_steps(sts, store=store, every=every)
        assert finish(steps) == whole, every
        assert pauses_of(audit_steps(sts, store=store, every=every)) == -(-100 // every)
    scan = RiskScan(store)
    # One pause before each slice of the set, and one after the set.
    assert pauses_of(scan.sweep()) == -(-100 // PAUSE_EVERY) + 1
    assert scan.sets[("ns", "db")].misplaced == 1


def test_a_change_at_a_pause_is_seen_by_the_later_slices() -> None:
    """Each slice reads the view as it is then: a pod moved while the audit waits is counted."""
    store = spread_set(3 * PAUSE_EVERY)
    scan = RiskScan(store)
    sweep = scan.sweep()
    next(sweep)  # paused before the first slice
    next(sweep)  # and before the second: the first slice has read the view
    moved = 2 * PAUSE_EVERY + 1  # in the last slice
    elsewhere = ("zone-a", "zone-b", "zone-c")[(moved + 1) % 3]  # not the rule's zone
    store.put("pods", pod_info(b.sts_pod("db", moved, namespace="ns", claims=(), node=elsewhere)))
    for _ in sweep:
        pass
    assert scan.sets[("ns", "db")].misplaced == 1


def test_a_set_deleted_during_its_audit_gets_no_figures() -> None:
    """A set the view drops at a pause is not published when its audit ends."""
    store = spread_set(3 * PAUSE_EVERY)
    scan = refreshed(RiskScan(store))
    assert ("ns", "db") in scan.sets
    # A pod moved: the set is audited again, and deleted at its first pause.
    store.put("pods", pod_info(b.sts_pod("db", 1, namespace="ns", claims=(), node="zone-a")))
    sweep = scan.sweep()
    next(sweep)
    store.delete("statefulsets", ("ns", "db"))
    for _ in sweep:
        pass
    assert ("ns", "db") not in scan.sets


def test_listing_many_sets_pauses_too() -> None:
    """Finding the opted-in sets among thousands, and queueing them for a pass, are done in
    slices of LIST_SLICE; so is finding them unchanged at the next refresh."""
    count = 3 * LIST_SLICE + 1
    scan = RiskScan(many_sets(count, 0))
    # Sets of zero replicas: no ordinal slices, so the pauses are the listing's (3), the
    # queueing's (3) and one after each set's audit.
    assert pauses_of(scan.sweep()) == 3 + 3 + count
    # The view unchanged: no audit, a pause every LIST_SLICE sets found unchanged (3).
    assert pauses_of(scan.sweep()) == 3 + 3 + 3


async def test_the_refresh_waits_and_lets_the_loop_run_at_each_pause() -> None:
    """The job waits ``pause`` s at every pause: a task on the same loop runs during one set's
    audit, and the refresh takes at least the pauses' time."""
    scan = RiskScan(spread_set(10 * PAUSE_EVERY))
    expected = pauses_of(RiskScan(spread_set(10 * PAUSE_EVERY)).sweep())
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    loop = asyncio.get_running_loop()
    started = loop.time()
    await ZoneRisk(scan, ready=lambda: True, interval=30, pause=0.002).refresh()
    elapsed = loop.time() - started
    stop.set()
    await task
    assert ticks - before >= expected
    assert elapsed >= 0.9 * expected * 0.002  # timers may fire a clock tick early
    assert ("ns", "db") in scan.sets


async def test_a_scrape_serves_the_text_the_refresh_wrote_in_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gauges' text is written by the refresh, RENDER_SLICE sets at a time with the loop
    free between slices, and again only for the sets whose figures changed; a scrape writes
    none of it (only the line of the last pass)."""
    count = 3 * RENDER_SLICE + 1
    store = many_sets(count, 0)
    scan = RiskScan(store)
    written: list[int] = []  # samples per family, each time the module writes text
    events: list[str] = []  # "w" for a family written, "t" when another task ran

    def spy(collector: Any) -> bytes:
        for family in collector.collect():
            written.append(len(family.samples))
            events.append("w")
        return generate_latest(collector)

    monkeypatch.setattr(riskmetrics, "generate_latest", spy)
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            events.append("t")
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    risk = ZoneRisk(scan, ready=lambda: True, interval=30, pause=0.001, clock=lambda: 5.0)
    await risk.refresh()
    stop.set()
    await task
    assert written == [1] * 6 * count  # six gauges of one set at a time
    runs = [len(run) for run in "".join(events).split("t") if run]
    assert runs == [6 * RENDER_SLICE] * 3 + [6]  # the loop runs between two slices
    written.clear()
    metrics = Metrics(rendered=[risk.exposition])
    samples = gauges(metrics)
    assert written == [1]  # the last pass
    replicas = [labels for name, labels in samples if name == "stszone_statefulset_replicas"]
    assert len(replicas) == count
    assert value(samples, "stszone_zone_risk_last_pass_timestamp_seconds") == 5.0

    written.clear()
    await risk.refresh()  # nothing changed: nothing to write
    assert written == []
    store.put("statefulsets", statefulset_info(b.statefulset("s7", replicas=4, templates=())))
    await risk.refresh()
    assert written == [1] * 6  # the one set whose figures changed
    samples = gauges(metrics)
    assert (
        value(
            samples,
            "stszone_statefulset_replicas",
            namespace="ns",
            statefulset="s7",
            kind="StatefulSet",
        )
        == 4
    )
    assert len([1 for name, _ in samples if name == "stszone_statefulset_replicas"]) == count


class Ticks:
    """An injected sleep: counts the job's waits and ends the job after ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waits = 0
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits += 1
        self.seconds.append(seconds)
        if self.waits >= self.limit:
            raise asyncio.CancelledError


async def run_job(risk: ZoneRisk) -> None:
    with pytest.raises(asyncio.CancelledError):
        await risk.run()


async def test_the_job_waits_for_a_ready_view() -> None:
    """While the view is not ready nothing is published; once it is, the figures appear."""
    ready = False
    ticks = Ticks(limit=2)
    risk = ZoneRisk(
        RiskScan(cluster()), ready=lambda: ready, interval=30, sleep=ticks, clock=lambda: 1e9
    )
    await run_job(risk)
    assert risk.scan.sets == {} and risk.last_pass is None
    ready, ticks.waits = True, 0
    await run_job(risk)
    assert set(risk.scan.sets) == {("shop", "db"), ("shop", "kafka"), ("shop", "broken")}
    assert risk.last_pass == 1e9


async def test_the_job_comes_back_within_a_second_while_sets_wait_for_their_first_figures() -> None:
    """Five sets of 10 and a budget of 25: the first refresh leaves two sets without figures,
    so the next comes after a second, not a whole interval; then the interval again."""
    ticks = Ticks(limit=3)
    scan = RiskScan(many_sets(5, 10), budget=25)
    await run_job(ZoneRisk(scan, ready=lambda: True, interval=30, sleep=ticks))
    assert ticks.seconds == [1.0, 30, 30]
    assert len(scan.sets) == 5


async def test_served_metrics_carry_the_gauges_readiness_and_denials_by_kind(
    serve: ServeFactory,
) -> None:
    """The real app: the job fills the gauges after start; denials say which kind was denied."""
    settings = Settings(host="127.0.0.1", port=0, zones=("a", "b", "c"))
    runtime = Runtime(store=cluster(), defaults=settings.defaults(), settings=settings)
    install_metrics(runtime)
    served = await serve(runtime=runtime)
    conflicting = b.sts_pod("db", 1, node_selector={"topology.kubernetes.io/zone": "x"})
    status, _ = await served.post_json("/mutate", b.review(conflicting))
    assert status == 200
    for _ in range(500):  # the job's first refresh runs as soon as the app starts
        samples = await scrape(served)
        if (
            "stszone_statefulset_zones_held",
            frozenset({("namespace", "shop"), ("statefulset", "db"), ("kind", "StatefulSet")}),
        ) in samples:
            break
        await asyncio.sleep(0.01)
    db = {"namespace": "shop", "statefulset": "db", "kind": "StatefulSet"}
    assert value(samples, "stszone_statefulset_zones_held", **db) == 2
    assert value(samples, "stszone_ready") == 1
    denied = value(
        samples, "stszone_denials_total", endpoint="mutate", kind="Pod", reason="ZoneConflict"
    )
    assert denied == 1
    runtime.checks.append(lambda: (False, "caches not listed yet"))
    assert value(await scrape(served), "stszone_ready") == 0
