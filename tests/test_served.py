"""A CRD's cache follows API discovery: empty and listed while the CRD is absent, watched once
it is served (no restart), emptied when it goes (webhook/cluster/served.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests import poolsim as sim
from tests.fakeapi import eventually
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credsource import load_credentials
from webhook.cluster.resources import Resource, optional_resources
from webhook.cluster.served import ServedReflector
from webhook.cluster.snapshot import list_cluster
from webhook.config import Settings
from webhook.model.store import Store
from webhook.model.tables import Table

FIXTURE = Path(__file__).parent / "fixtures" / "kruise" / "objects" / "statefulsets.v1beta1.json"


def _kruise_list() -> dict[str, Any]:
    listed: dict[str, Any] = json.loads(FIXTURE.read_text())
    return listed


def _pool_list() -> dict[str, Any]:
    pool = sim.pool_object("broker", replicas=3, node_ids=[0, 1, 2])
    return {"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "KafkaNodePoolList", "items": [pool]}


class Kind(NamedTuple):
    table: Table
    listing: Callable[[], dict[str, Any]]
    #: Whether the store holds what the listing holds.
    holds: Callable[[Store], bool]


KINDS = {
    "kruisesets": Kind(
        "kruisesets",
        _kruise_list,
        lambda store: (
            store.kruisesets.get(("shop", "web")) is not None
            and store.kruisesets[("shop", "web")].reserved == ((1, 1),)
        ),
    ),
    "nodepools": Kind(
        "nodepools",
        _pool_list,
        lambda store: (
            (pool := store.nodepool("kafka", "broker")) is not None and pool.node_ids == (0, 1, 2)
        ),
    ),
}


class Discovery:
    """An API server that serves one CRD's resource only while ``served`` is True."""

    def __init__(self, resource: Resource, listing: Callable[[], dict[str, Any]]) -> None:
        self.group_version_path, _, self.plural = resource.path.rpartition("/")
        self.listing = listing
        self.served = False
        self.discovery_calls = 0
        self.lists = 0

    async def group_version(self, request: web.Request) -> web.Response:
        self.discovery_calls += 1
        if not self.served:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        resources = [{"name": self.plural, "namespaced": True}]
        return web.json_response({"kind": "APIResourceList", "resources": resources})

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if not self.served:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        if request.query.get("watch"):
            response = web.StreamResponse()
            await response.prepare(request)
            await asyncio.sleep(3600)  # a quiet watch
            return response
        self.lists += 1
        listed = self.listing()
        listed["metadata"] = {"resourceVersion": "7"}
        return web.json_response(listed)


def discovery_app(*fakes: Discovery) -> web.Application:
    """An API server of each fake's discovery document and collection."""
    app = web.Application()
    for fake in fakes:
        app.router.add_get(fake.group_version_path, fake.group_version)
        app.router.add_get(f"{fake.group_version_path}/{fake.plural}", fake.collection)
    return app


@contextlib.asynccontextmanager
async def api_of(app: web.Application, tmp_path: Path) -> AsyncIterator[Api]:
    """A client of the API server ``app``, serving on a free port until the block ends."""
    async with TestServer(app, host="127.0.0.1") as server:
        config = write_kubeconfig(
            tmp_path / "kubeconfig", server=str(server.make_url("")).rstrip("/"), token="t"
        )
        async with Api(load_credentials(str(config))) as api:
            yield api


@contextlib.asynccontextmanager
async def running(cache: ServedReflector) -> AsyncIterator[None]:
    """``cache`` following discovery until the block ends."""
    job = asyncio.create_task(cache.run())
    try:
        yield
    finally:
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job


@pytest.mark.parametrize("table", sorted(KINDS))
async def test_cache_follows_the_crd(tmp_path: Path, table: str) -> None:
    kind = KINDS[table]
    (resource,) = [r for r in optional_resources(Settings()) if r.table == kind.table]
    fake = Discovery(resource, kind.listing)
    store = Store(live=True)
    async with api_of(discovery_app(fake), tmp_path) as api:
        cache = ServedReflector(resource, api=api, store=store, poll=0.05)
        async with running(cache):
            # Absent: an empty table that counts as listed, and a synced cache.
            await asyncio.wait_for(cache.wait_synced(), 5)
            assert kind.table in store.loaded and not store.table(kind.table)
            assert cache.status().synced and fake.lists == 0
            # Installed later: listed and watched, without a restart.
            fake.served = True
            await eventually(lambda: kind.holds(store))
            assert cache.status().synced and cache.status().objects == 1
            # Uninstalled: the cache is emptied and stays ready.
            fake.served = False
            await eventually(lambda: not store.table(kind.table))
            assert cache.status().synced


def test_the_kind_can_be_turned_off() -> None:
    assert {r.table for r in optional_resources(Settings(kruise=False))} == {
        "nodepools",
        "poolpods",
    }
    assert {r.table for r in optional_resources(Settings(kafka_node_pools=False))} == {"kruisesets"}


def _pool_list_v1() -> dict[str, Any]:
    listed = _pool_list()
    listed["apiVersion"] = "kafka.strimzi.io/v1"
    return listed


@pytest.mark.parametrize("version", ["v1", "v1beta2"])
async def test_node_pools_are_watched_at_the_version_strimzi_serves(
    tmp_path: Path, version: str
) -> None:
    # Strimzi 1.0 serves KafkaNodePools as kafka.strimzi.io/v1 only (v1beta2 is removed from
    # its CRDs); Strimzi before 0.49 serves v1beta2 only. Either way the pools are listed.
    (resource,) = [r for r in optional_resources(Settings()) if r.table == "nodepools"]
    at = f"/apis/kafka.strimzi.io/{version}/kafkanodepools"
    fake = Discovery(dataclasses.replace(resource, path=at), _pool_list_v1)
    fake.served = True
    store = Store(live=True)
    async with api_of(discovery_app(fake), tmp_path) as api:
        cache = ServedReflector(resource, api=api, store=store, poll=0.05)
        async with running(cache):
            await eventually(lambda: KINDS["nodepools"].holds(store))
            assert cache.status().synced and cache.status().objects == 1
        # The one-shot commands (audit, explain) list the same version.
        once = Store()
        await ServedReflector(resource, api=api, store=once).list()
        assert KINDS["nodepools"].holds(once)


async def test_node_pools_follow_strimzi_when_an_upgrade_removes_v1beta2(tmp_path: Path) -> None:
    (resource,) = [r for r in optional_resources(Settings()) if r.table == "nodepools"]
    before = sim.pool_object("broker", replicas=3, node_ids=[0, 1, 2])
    after = sim.pool_object("broker", replicas=4, node_ids=[0, 1, 2, 3])

    def listing(pool: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: {"kind": "KafkaNodePoolList", "items": [pool]}

    fakes = {
        version: Discovery(
            dataclasses.replace(resource, path=f"/apis/kafka.strimzi.io/{version}/kafkanodepools"),
            listing(pool),
        )
        for version, pool in (("v1beta2", before), ("v1", after))
    }
    fakes["v1beta2"].served = True  # Strimzi before 0.49
    store = Store(live=True)
    async with api_of(discovery_app(*fakes.values()), tmp_path) as api:
        cache = ServedReflector(resource, api=api, store=store, poll=0.05)
        async with running(cache):
            await eventually(lambda: store.nodepool("kafka", "broker") is not None)
            # Strimzi 1.0: its CRD serves v1 only.
            fakes["v1beta2"].served, fakes["v1"].served = False, True
            await eventually(lambda: getattr(store.nodepool("kafka", "broker"), "replicas", 0) == 4)
            assert cache.status().synced


async def test_the_rebalance_snapshot_lists_node_pools_at_v1_when_only_v1_is_served(
    tmp_path: Path,
) -> None:
    async def handle(request: web.Request) -> web.Response:
        if request.path == "/apis/kafka.strimzi.io/v1/kafkanodepools":
            return web.json_response(_pool_list_v1())
        if request.path.startswith("/apis/kafka.strimzi.io/"):
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        return web.json_response({"kind": "List", "items": [], "metadata": {}})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    async with api_of(app, tmp_path) as api:
        items = await list_cluster(Settings(), api=api)
    assert [i["metadata"]["name"] for i in items if i.get("kind") == "KafkaNodePool"] == ["broker"]
