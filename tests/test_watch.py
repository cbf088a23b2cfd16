"""The live view's reflectors against the fake API server: sync, faults, readiness, bad data.

Every test runs the real :class:`~webhook.cluster.live.LiveView` (credentials from a kubeconfig file,
aiohttp streams, the state extractors) against :mod:`tests.fakeapi`, and judges it by what ends
up in the store compared with what the fake API holds, and by the requests the fake received.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_TOKEN
from tests.fakeapi import FakeApi, Fault, eventually
from tests.fakestate import API_FIXTURES, matches
from tests.hang import HANG_GUARD
from tests.retries import assert_doubling, in_background, parked
from webhook.cluster.api import Api
from webhook.cluster.backoff import Backoff
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import LiveView, live_store
from webhook.cluster.reflector import CacheStatus, Reflector, Tuning
from webhook.cluster.resources import METADATA_LIST, STATEFULSET_POD_LABEL, resources
from webhook.config import Settings
from webhook.model.store import Store
from webhook.model.tables import Table

TUNING = Tuning(
    page_size=5,
    watch_timeout=(30, 30),
    idle_timeout=5,
    request_timeout=5,
    backoff_initial=0.02,
    backoff_cap=0.1,
    healthy_after=0.2,
)
#: fake API resource -> store table
TABLES: dict[str, Table] = {
    "nodes": "nodes",
    "persistentvolumes": "volumes",
    "persistentvolumeclaims": "claims",
    "statefulsets": "statefulsets",
    "pods": "pods",
}


@contextlib.asynccontextmanager
async def running(
    kubeconfig: Path, *, settings: Settings | None = None, tuning: Tuning = TUNING
) -> AsyncIterator[LiveView]:
    """The live view running as ``stszone serve`` runs it (a job), stopped after the block."""
    credentials = load_credentials(str(kubeconfig))
    # The StatefulSet view alone: faults queued for "pods" go to its one pod watch.
    settings = settings or Settings(kafka_node_pools=False)
    view = LiveView(settings, credentials=credentials, tuning=tuning)
    job = asyncio.create_task(view.run())
    try:
        yield view
    finally:
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job


@contextlib.asynccontextmanager
async def reflecting(
    kubeconfig: Path,
    *,
    sleep: Callable[[float], Awaitable[None]],
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[Reflector]:
    """The StatefulSet pods' reflector alone, running with an injected backoff sleep (and clock):
    the test decides what each wait does, so no seconds are counted. Cancelled after the block."""
    (pods,) = [r for r in resources(Settings()) if r.table == "pods"]
    async with Api(load_credentials(str(kubeconfig))) as client:
        reflector = Reflector(
            pods, api=client, store=Store(), tuning=TUNING, clock=clock, sleep=sleep
        )
        async with in_background(reflector.run()):
            yield reflector


def status(view: LiveView, kind: Table) -> CacheStatus:
    return next(s for s in view.statuses() if s.table == kind)


def truth(api: FakeApi, resource: str) -> set[object]:
    """Store keys the API's objects should produce (only StatefulSet pods for pods)."""
    table = api.objects.tables[resource]
    if resource == "pods":
        return {k for k, s in table.items() if matches(STATEFULSET_POD_LABEL, s.labels)}
    return {k if k[0] else k[1] for k in table}


def converged(view: LiveView, api: FakeApi) -> bool:
    return all(set(view.store.table(t)) == truth(api, r) for r, t in TABLES.items())


def pod(name: str, *, namespace: str = "cap", owner: str = "db") -> dict[str, Any]:
    ordinal = name.rsplit("-", 1)[1]
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {STATEFULSET_POD_LABEL: name, "apps.kubernetes.io/pod-index": ordinal},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner, "controller": True}
            ],
        },
        "spec": {"nodeName": "lab-node-1"},
    }


async def test_first_list_mirrors_the_recorded_cluster(api: FakeApi, kubeconfig: Path) -> None:
    """Paged lists (full nodes, selected pods) fill every table; watches start at 666."""
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        assert converged(view, api)
        assert view.store.discovered_zones() == ("zone-a", "zone-b", "zone-c")
        assert view.store.claim_zones("cap", "data-db-0", "topology.kubernetes.io/zone") == (
            "pv-cap-zone-c-1",
            frozenset({"zone-c"}),
        )
        assert view.store.namespace_enabled("cap") is False  # namespaces known: none opted in
        for resource in TABLES:
            await api.wait_watching(resource)
    nodes = api.seen("nodes", "list")
    assert len(nodes) == 2 and nodes[1].query["continue"]  # 6 nodes in pages of 5
    # Full nodes: the guard reads their readiness (status.conditions, spec.taints).
    assert not any(s.metadata for s in api.seen("nodes", "list") + api.seen("nodes", "watch"))
    assert not any(s.metadata for s in api.seen("pods", "list") + api.seen("pods", "watch"))
    # The StatefulSet pods' watch (the pods of Kafka node pools have one of their own).
    watch = next(
        s.query
        for s in api.seen("pods", "watch")
        if s.query["labelSelector"] == STATEFULSET_POD_LABEL
    )
    assert watch["resourceVersion"] == "666" and watch["allowWatchBookmarks"] == "true"
    assert watch["labelSelector"] == STATEFULSET_POD_LABEL and int(watch["timeoutSeconds"]) == 30
    assert api.seen("namespaces", "list")[0].query["labelSelector"] == "stszone.io/enabled=true"


async def test_serve_freezes_what_start_up_built_once_before_any_list(
    api: FakeApi, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``stszone serve`` moves what start-up built into the permanent generation before the
    live view lists anything (the full collections a big first list sets off then never walk
    the modules), freezes nothing more once the caches are listed, and never switches the
    collector off."""
    from webhook.cli.serve import _main

    lists_at_freeze: list[int] = []

    def freeze() -> None:
        lists_at_freeze.append(sum(1 for seen in api.requests if seen.verb == "list"))

    monkeypatch.setattr("webhook.cli.serve.gc.freeze", freeze)
    settings = Settings(
        kubeconfig=str(kubeconfig), host="127.0.0.1", port=0, certs_dir=tmp_path, shutdown_delay=0
    )
    served = asyncio.create_task(_main(settings))
    try:
        async with asyncio.timeout(HANG_GUARD):
            while not all(api.seen(resource, "watch") for resource in TABLES):
                assert gc.isenabled() and not served.done()
                await asyncio.sleep(0.001)
    finally:
        served.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await served
    assert lists_at_freeze == [0]


async def test_full_nodes_when_a_node_condition_is_needed(api: FakeApi, kubeconfig: Path) -> None:
    """--storage-unhealthy-condition needs ``status.conditions``, as readiness does: nodes are
    listed in full, and their True conditions kept."""
    settings = Settings(storage_unhealthy_condition="StorageUnhealthy")
    async with running(kubeconfig, settings=settings) as view:
        await eventually(lambda: view.ready()[0])
        assert "Ready" in view.store.nodes["lab-node-1"].true_conditions
    assert not any(s.metadata for s in api.seen("nodes", "list"))


async def test_fake_serves_the_recorded_metadata_list(api: FakeApi) -> None:
    """The fake's metadata-only node list is the recorded one (so the tests above mean something)."""
    import aiohttp

    headers = {"Accept": METADATA_LIST, "Authorization": f"Bearer {FAKE_TOKEN}"}
    trusted = ssl.create_default_context(cafile=str(api.ca))
    async with (
        aiohttp.ClientSession() as session,
        session.get(api.url + "/api/v1/nodes", headers=headers, ssl=trusted) as resp,
    ):
        served = await resp.json()
    recorded = json.loads((API_FIXTURES / "nodes-metadata-list.json").read_text())
    assert served == recorded


async def test_recorded_watch_events_are_applied(api: FakeApi, kubeconfig: Path) -> None:
    """The recorded pod and node watch streams, replayed, leave the store as the cluster was."""
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        for line in (API_FIXTURES / "sts-pods-watch.jsonl").read_text().splitlines():
            event = json.loads(line)
            meta = event["object"]["metadata"]
            if event["type"] == "BOOKMARK":
                api.bookmark("pods")
            elif event["type"] == "DELETED":
                api.delete("pods", meta["name"], namespace=meta["namespace"])
            else:
                api.put("pods", event["object"])
        full = json.loads(api.objects.tables["nodes"][("", "lab-node-6")].body)
        for line in (API_FIXTURES / "nodes-metadata-watch.jsonl").read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "MODIFIED":
                api.put("nodes", {**full, "metadata": event["object"]["metadata"]})
        await eventually(lambda: view.store.nodes_with_label("example.io/node", "6") != ())
        await eventually(lambda: converged(view, api))
        rec2 = view.store.pod("rec", "rec-2")
        assert rec2 is not None and rec2.ordinal == 2 and rec2.owner == "rec"
        assert view.store.nodes_with_label("example.io/node", "6") == ("lab-node-6",)


#: (verb, fault, re-lists expected): the fault hits the first request after the watch is cut.
FAULTS = [
    pytest.param("watch", None, 0, id="connection-dropped-mid-event"),
    pytest.param("watch", Fault.expired(), 1, id="watch-200-ERROR-410"),
    pytest.param("watch", Fault.error_event(500), 0, id="watch-200-ERROR-500"),
    pytest.param("watch", Fault.status(500), 0, id="watch-HTTP-500"),
    pytest.param("watch", Fault.status(429, retry_after=1), 0, id="watch-HTTP-429"),
    pytest.param("watch", Fault.drop(), 0, id="watch-dropped-at-once"),
    pytest.param("watch", Fault.slow(0.3), 0, id="watch-slow"),
    pytest.param("list", Fault.status(410), 1, id="list-HTTP-410"),
    pytest.param("list", Fault.status(500), 1, id="list-HTTP-500"),
    pytest.param("list", Fault.drop(), 1, id="list-dropped-mid-body"),
    pytest.param("list", Fault.slow(0.3), 1, id="list-slow"),
]


@pytest.mark.parametrize(("verb", "fault", "relists"), FAULTS)
async def test_cache_converges_after_fault(
    api: FakeApi, kubeconfig: Path, verb: str, fault: Fault | None, relists: int
) -> None:
    """Whatever goes wrong, the pods cache ends equal to the API's pods; re-lists only on 410."""
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        await api.wait_watching("pods")
        if verb == "list":
            api.inject("pods", "watch", Fault.expired())  # the way to a re-list
        if fault is not None:
            api.inject("pods", "watch" if verb == "watch" else "list", fault)
        api.cut("pods")
        api.put("pods", pod("db-7"))  # changes made while the reflector is reconnecting
        api.delete("pods", "db-1", namespace="cap")
        await eventually(lambda: converged(view, api))
        assert view.store.pod("cap", "db-7") is not None and view.store.pod("cap", "db-1") is None
        pods = status(view, "pods")
        assert pods.restarts >= 1 and pods.relists == relists
        assert view.ready()[0]


async def test_expired_continue_token_restarts_the_list(api: FakeApi, kubeconfig: Path) -> None:
    """Compaction between two pages (HTTP 410 on ``continue``) restarts the list from page one."""
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        before = len(api.seen("pods", "list"))
        api.inject("pods", "watch", Fault.expired())
        api.inject("pods", "list", Fault.slow(0), Fault.slow(0.3))
        api.cut("pods")
        await eventually(lambda: len(api.seen("pods", "list")) == before + 2)
        api.compact()  # while page two is on its way: its continue token is now too old
        api.put("pods", pod("db-8"))
        await eventually(lambda: converged(view, api))
        lists = api.seen("pods", "list")[before:]
        assert [("continue" in s.query) for s in lists[:3]] == [False, True, False]
        assert status(view, "pods").relists == 1


@pytest.mark.parametrize("bookmark", [True, False], ids=["bookmark", "no-bookmark"])
async def test_bookmark_moves_the_resource_version_only(
    api: FakeApi, kubeconfig: Path, bookmark: bool
) -> None:
    """A BOOKMARK lets the reconnect resume after a compaction; without one it must re-list."""
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        await api.wait_watching("pods")
        pods = dict(view.store.pods)
        api.put("persistentvolumes", {"metadata": {"name": "pv-elsewhere"}, "spec": {}})
        if bookmark:
            heard = status(view, "pods").last_sync
            api.bookmark("pods")
            # Cut only once the reflector has read it: the fake sends nothing more on a watch
            # it has been told to cut, and the reconnect then has only the list's version.
            await eventually(lambda: status(view, "pods").last_sync != heard)
            assert view.store.pods == pods  # a bookmark changes no object
        api.compact()
        api.cut("pods")
        await eventually(lambda: len(api.seen("pods", "watch")) >= 2 and view.ready()[0])
        await api.wait_watching("pods")
        resumed_from = api.seen("pods", "watch")[1].query["resourceVersion"]
        assert resumed_from == ("667" if bookmark else "666")
        assert status(view, "pods").relists == (0 if bookmark else 1)


async def test_readiness_waits_for_every_first_list(api: FakeApi, kubeconfig: Path) -> None:
    """Not ready while one cache has not listed (saying why), ready once it has."""
    api.inject("persistentvolumeclaims", "list", *[Fault.status(500)] * 1000)
    async with running(kubeconfig) as view:
        await eventually(
            lambda: status(view, "pods").synced and status(view, "claims").restarts > 2
        )
        ready, detail = view.ready()
        assert not ready
        assert detail == "claims cache not listed yet (last error: HTTP 500 InternalError: " + (
            "injected failure 500)"
        )
        api.clear("persistentvolumeclaims", "list")
        await eventually(lambda: view.ready()[0])


async def test_readiness_fails_when_a_cache_cannot_resync(api: FakeApi, kubeconfig: Path) -> None:
    """Ready, then not ready once a re-list has failed for over --max-unsynced, then ready again."""
    settings = Settings(max_unsynced=0.5, kafka_node_pools=False)
    async with running(kubeconfig, settings=settings) as view:
        await eventually(lambda: view.ready()[0])
        api.inject("pods", "watch", Fault.expired())
        api.inject("pods", "list", *[Fault.status(500)] * 1000)
        api.cut("pods")
        await eventually(lambda: status(view, "pods").restarts >= 2)
        assert view.ready()[0]  # out of sync, but not for long yet
        await eventually(lambda: not view.ready()[0])
        assert "pods cache unable to re-sync for" in view.ready()[1]
        assert "over --max-unsynced 0.5s" in view.ready()[1]
        api.clear("pods", "list")
        await eventually(lambda: view.ready()[0])
        assert status(view, "pods").relists == 1


@pytest.mark.parametrize(
    "fault", [Fault.drop(), Fault.error_event(500)], ids=["watch-200-reset", "watch-200-ERROR-500"]
)
async def test_watch_failing_before_any_event_leaves_the_cache_unsynced(
    api: FakeApi, kubeconfig: Path, fault: Fault
) -> None:
    """A watch the API server answers and that then fails before delivering anything, on every
    attempt, proves nothing: the time out of sync counts on across the attempts (so /readyz
    fails past --max-unsynced), from the first failure after the list (the clock is injected:
    each retry waits one second of it)."""
    api.inject("pods", "watch", *[fault] * 1000)
    now = [0.0]
    unsynced: list[float] = []

    async def sleep(delay: float) -> None:
        unsynced.append(pods.status().unsynced_for)
        now[0] += 1.0
        if len(unsynced) == 6:
            await parked()
        await asyncio.sleep(0)

    async with reflecting(kubeconfig, sleep=sleep, clock=lambda: now[0]) as pods:
        await eventually(lambda: len(unsynced) == 6)
        assert pods.status().synced and pods.status().restarts == 6
    assert unsynced == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


async def test_quiet_watch_is_in_sync_once_open_for_healthy_after(
    api: FakeApi, kubeconfig: Path
) -> None:
    """A watch of a quiet resource delivers nothing: it proves itself by staying open for
    ``healthy_after``, not by being answered. The injected clock moves only in steps of 0.02 s,
    so the step that finds the cache in sync tells when it became so."""
    api.inject("pods", "watch", Fault.drop())  # out of sync from this failure, at time 0
    now = [0.0]

    async def sleep(delay: float) -> None:
        now[0] += 1.0  # the quiet watch opens at time 1

    def tick() -> bool:
        now[0] += 0.02
        return pods.status().unsynced_for == 0.0

    async with reflecting(kubeconfig, sleep=sleep, clock=lambda: now[0]) as pods:
        await api.wait_watching("pods")
        await eventually(tick)
        assert now[0] >= 1.0 + TUNING.healthy_after, now[0]
        assert pods.status().restarts == 1 and len(api.seen("pods", "watch")) == 2


async def test_bad_objects_are_skipped_and_logged_once(
    api: FakeApi, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Unreadable objects never enter the store nor stop the watch; each is logged once."""
    caplog.set_level(logging.WARNING, logger="stszone.watch")
    bad_pv: dict[str, Any] = {
        "metadata": {"name": "pv-bad", "uid": "u-1"},
        "spec": {"nodeAffinity": ["zone-a"]},
    }
    api.put("persistentvolumes", bad_pv)
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        bad_pod = pod("db-9")
        bad_pod["spec"]["nodeName"] = 3  # a field the record reads
        api.put("pods", bad_pod)
        api.put("persistentvolumes", {**bad_pv, "metadata": {**bad_pv["metadata"], "labels": {}}})
        api.put("nodes", {"metadata": {"name": "node-without-zone"}})
        api.put(
            "nodes",
            {"metadata": {"name": "node-odd", "labels": {"topology.kubernetes.io/zone": "mars"}}},
        )
        api.put("pods", pod("db-10", owner="db"))
        api.put(
            "pods",
            {**pod("orphan-0"), "metadata": {**pod("orphan-0")["metadata"], "ownerReferences": []}},
        )
        await eventually(lambda: view.store.pod("cap", "db-10") is not None)
        await eventually(lambda: "node-odd" in view.store.nodes)
        api.inject("persistentvolumes", "watch", Fault.expired())  # a re-list meets pv-bad again
        api.cut("persistentvolumes")
        await eventually(lambda: status(view, "volumes").relists == 1)
        assert "pv-bad" not in view.store.volumes and view.store.pod("cap", "db-9") is None
        assert view.store.pod("cap", "orphan-0") is None  # labelled, but no StatefulSet owns it
        assert view.store.node_zone("node-without-zone") is None
        assert "mars" in view.store.discovered_zones()
        assert status(view, "volumes").bad_objects == 1 and view.ready()[0]
    logged = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len([m for m in logged if "pv-bad" in m]) == 1, logged
    assert len([m for m in logged if "db-9" in m]) == 1, logged


async def test_bad_objects_count_only_what_is_skipped_now(api: FakeApi, kubeconfig: Path) -> None:
    """``bad_objects`` counts the objects skipped now: one deleted, one fixed, and one a re-list
    no longer meets (deleted while no watch was open) stop counting."""
    bad_pv: dict[str, Any] = {
        "metadata": {"name": "pv-bad", "uid": "u-1"},
        "spec": {"nodeAffinity": ["zone-a"]},
    }
    bad_pod = pod("db-9")
    bad_pod["spec"]["nodeName"] = 3
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        api.put("persistentvolumes", bad_pv)
        api.put("pods", bad_pod)
        await eventually(
            lambda: status(view, "volumes").bad_objects == status(view, "pods").bad_objects == 1
        )
        api.delete("persistentvolumes", "pv-bad")
        api.put("persistentvolumes", {"metadata": {"name": "pv-after"}, "spec": {}})
        api.put("pods", pod("db-9"))  # fixed
        await eventually(lambda: "pv-after" in view.store.volumes)  # after the DELETED
        await eventually(lambda: view.store.pod("cap", "db-9") is not None)
        assert status(view, "volumes").bad_objects == status(view, "pods").bad_objects == 0
        api.put("persistentvolumes", bad_pv)
        await eventually(lambda: status(view, "volumes").bad_objects == 1)
        api.inject("persistentvolumes", "watch", Fault.expired())
        api.cut("persistentvolumes")
        api.delete("persistentvolumes", "pv-bad")  # no watch sees it: only the re-list can tell
        await eventually(lambda: status(view, "volumes").relists == 1)
        assert status(view, "volumes").bad_objects == 0


async def test_unknown_event_type_is_logged_once_and_not_counted(
    api: FakeApi, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An event type no server sends is ignored and logged once; it is no object of the
    collection, so ``bad_objects`` does not count it."""
    caplog.set_level(logging.WARNING, logger="stszone.watch")
    future = b'{"type":"FUTURE","object":{"kind":"Pod","metadata":{"name":"db-0"}}}\n'
    async with running(kubeconfig) as view:
        await eventually(lambda: view.ready()[0])
        await api.wait_watching("pods")
        watches = len(api.seen("pods", "watch"))
        api.inject("pods", "watch", Fault.lines(future * 2))
        api.cut("pods")
        await eventually(lambda: len(api.seen("pods", "watch")) == watches + 2)
        assert status(view, "pods").bad_objects == 0
    logged = [r.getMessage() for r in caplog.records if "FUTURE" in r.getMessage()]
    assert logged == ["skipping pods event type 'FUTURE': unknown watch event type; ignored"]


async def test_silent_watch_is_reopened_quietly_after_idle_timeout(
    api: FakeApi, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A watch that stays silent (a quiet resource gets no bookmarks; a half-open connection is
    silent too) is re-opened from the same resourceVersion, with no warning and no restart
    counted: on a quiet cluster that is every watch, every ``idle_timeout``."""
    # idle_timeout also bounds the wait for the watch's response headers (aiohttp's sock_read),
    # and a wait past it is a failure: it is a second so that a machine too busy to run the
    # fake API server for a few tenths of a second does not count one.
    tuning = Tuning(idle_timeout=1.0, backoff_initial=0.02, backoff_cap=0.1)
    with caplog.at_level(logging.DEBUG, logger="stszone.watch"):
        async with running(kubeconfig, tuning=tuning) as view:
            await eventually(lambda: len(api.seen("namespaces", "watch")) >= 3)
            namespaces = status(view, "namespaces")
            assert namespaces.restarts == 0 and namespaces.last_error == ""
            assert namespaces.relists == 0 and view.ready()[0]
            versions = {s.query["resourceVersion"] for s in api.seen("namespaces", "watch")}
            assert len(versions) == 1, versions  # nothing changed: the same version each time
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "namespaces watch silent for 1s" in caplog.text


async def test_silence_inside_an_event_is_still_a_failure(api: FakeApi, kubeconfig: Path) -> None:
    """A stream that stops in the middle of an event is broken, not quiet: counted and retried."""
    api.inject("namespaces", "watch", Fault.stall())
    tuning = Tuning(idle_timeout=0.3, backoff_initial=0.02, backoff_cap=0.1)
    async with running(kubeconfig, tuning=tuning) as view:
        await eventually(lambda: status(view, "namespaces").restarts >= 1)
        assert "Timeout" in status(view, "namespaces").last_error


def test_backoff_is_capped_exponential_with_jitter() -> None:
    """Delays double up to the cap, stay within [bound/2, bound], and restart after reset()."""
    high, low = (
        Backoff(initial=1, cap=8, rand=lambda: 0.999999),
        Backoff(initial=1, cap=8, rand=lambda: 0.0),
    )
    assert [round(high.next(), 3) for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    assert [low.next() for _ in range(6)] == [0.5, 1, 2, 4, 4, 4]
    low.reset()
    assert low.next() == 0.5
    assert low.next(at_least=5) == 5 and low.next(at_least=3600) == 8  # Retry-After, capped
    assert Backoff(initial=1, cap=30, attempts=10_000).bound() == 30  # no float overflow


async def test_failing_api_is_retried_at_a_bounded_pace(api: FakeApi, kubeconfig: Path) -> None:
    """Against an API answering 500 forever, each failed list is followed by one backoff wait
    before the next: bounds doubling from ``backoff_initial`` up to ``backoff_cap``, each wait in
    the upper half of its bound (the sleep is injected: no seconds are counted)."""
    api.inject("pods", "list", *[Fault.status(500)] * 1000)
    waits: list[tuple[float, int]] = []  # (delay asked for, lists the API had seen by then)

    async def sleep(delay: float) -> None:
        waits.append((delay, len(api.seen("pods", "list"))))
        if len(waits) == 12:
            await parked()
        await asyncio.sleep(0)

    async with reflecting(kubeconfig, sleep=sleep) as reflector:
        await eventually(lambda: len(waits) == 12)
    assert [lists for _, lists in waits] == list(range(1, 13))  # no retry without its wait
    initial, cap = TUNING.backoff_initial, TUNING.backoff_cap
    assert initial * 2**11 >= cap  # the last waits are at the cap
    assert_doubling([delay for delay, _ in waits], initial=initial, cap=cap)
    status = reflector.status()
    assert not status.synced and status.restarts == 12 and "HTTP 500" in status.last_error


async def test_watch_expiring_after_every_list_re_lists_at_a_slowing_pace(
    api: FakeApi, kubeconfig: Path
) -> None:
    """A watch answering 410 right after every list (a watch cache whose window is shorter than a
    list takes, under heavy churn) re-lists after each wait, and the waits grow to the cap as
    after any failure: a completed list proves nothing about the watch, so it does not reset
    the backoff (the sleep is injected: no seconds are counted)."""
    api.inject("pods", "watch", *[Fault.expired()] * 1000)
    waits: list[tuple[float, int]] = []  # (delay asked for, lists the API had begun by then)

    async def sleep(delay: float) -> None:
        lists = [s for s in api.seen("pods", "list") if "continue" not in s.query]
        waits.append((delay, len(lists)))
        if len(waits) == 8:
            await parked()
        await asyncio.sleep(0)

    async with reflecting(kubeconfig, sleep=sleep) as pods:
        await eventually(lambda: len(waits) == 8)
    assert [lists for _, lists in waits] == list(range(1, 9))  # one full list per wait
    assert_doubling(
        [delay for delay, _ in waits], initial=TUNING.backoff_initial, cap=TUNING.backoff_cap
    )
    assert pods.status().relists == 7


async def test_watch_open_for_healthy_after_resets_the_backoff_however_it_ends(
    api: FakeApi, kubeconfig: Path
) -> None:
    """Three watches failing at once grow the backoff; a fourth that stays open for
    ``healthy_after`` (on the injected clock) resets it, though it ends cut mid-event: the wait
    after it is back at ``backoff_initial``."""
    api.inject("pods", "watch", *[Fault.drop()] * 3)
    now = [0.0]
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)
        now[0] += 1.0
        if len(waits) == 4:
            await parked()

    def tick() -> bool:
        now[0] += 0.02
        return pods.status().unsynced_for == 0.0

    async with reflecting(kubeconfig, sleep=sleep, clock=lambda: now[0]) as pods:
        await api.wait_watching("pods")
        await eventually(tick)  # the fourth watch, quiet, has been open healthy_after
        api.cut("pods")
        await eventually(lambda: len(waits) == 4)
    initial = TUNING.backoff_initial
    assert waits[2] >= 2 * initial and initial / 2 <= waits[3] <= initial, waits


async def test_live_store_lists_once_without_watching(api: FakeApi, kubeconfig: Path) -> None:
    """``live_store`` (for one-shot commands) lists every resource and opens no watch."""
    credentials = load_credentials(str(kubeconfig))
    store = await live_store(Settings(zones=("zone-c", "zone-a")), credentials=credentials)
    assert store.server_zones() == ("zone-c", "zone-a")
    assert {len(store.table(t)) for t in TABLES.values()} == {6, 12, 4}
    assert not [s for s in api.requests if s.verb == "watch"]


async def test_kafka_node_pools_not_served_hold_nothing_back(
    api: FakeApi, kubeconfig: Path
) -> None:
    """The fake serves no kafka.strimzi.io: the pools' table counts as listed (empty) and the
    view is ready (test_served.py: discovery is asked, the collection never listed)."""
    async with running(kubeconfig, settings=Settings(), tuning=TUNING) as view:
        await eventually(lambda: view.ready()[0])
        assert "nodepools" in view.store.loaded and not view.store.nodepools
        statuses = {s.table: s for s in view.statuses()}
        assert statuses["nodepools"].synced and statuses["nodepools"].restarts == 0


def test_turning_kafka_node_pools_off_lists_none_of_their_kinds() -> None:
    tables = {r.table for r in resources(Settings(kafka_node_pools=False))}
    assert "nodepools" not in tables and "poolpods" not in tables
    on = {r.table: r for r in resources(Settings())}
    assert on["nodepools"].optional and on["poolpods"].label_selector == "strimzi.io/pool-name"
