"""A CRD's cache follows API discovery: empty and listed while the CRD is absent, watched once
it is served (no restart), emptied when it goes (webhook/cluster/served.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests import poolsim as sim
from tests.fakeapi import eventually
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credentials import load_credentials
from webhook.cluster.resources import Resource, optional_resources
from webhook.cluster.served import ServedReflector
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


@pytest.mark.parametrize("table", sorted(KINDS))
async def test_cache_follows_the_crd(tmp_path: Path, table: str) -> None:
    kind = KINDS[table]
    (resource,) = [r for r in optional_resources(Settings()) if r.table == kind.table]
    fake = Discovery(resource, kind.listing)
    app = web.Application()
    app.router.add_get(fake.group_version_path, fake.group_version)
    app.router.add_get(resource.path, fake.collection)
    async with TestServer(app, host="127.0.0.1") as server:
        config = write_kubeconfig(
            tmp_path / "kubeconfig", server=str(server.make_url("")).rstrip("/"), token="t"
        )
        store = Store(live=True)
        async with Api(load_credentials(str(config))) as api:
            cache = ServedReflector(resource, api=api, store=store, poll=0.05)
            job = asyncio.create_task(cache.run())
            try:
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
            finally:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job


def test_the_kind_can_be_turned_off() -> None:
    assert {r.table for r in optional_resources(Settings(kruise=False))} == {
        "nodepools",
        "poolpods",
    }
    assert {r.table for r in optional_resources(Settings(kafka_node_pools=False))} == {"kruisesets"}
