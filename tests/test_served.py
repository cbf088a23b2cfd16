"""A CRD's cache follows API discovery: empty and listed while the CRD is absent, watched once
it is served (no restart), emptied when it goes (webhook/cluster/served.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fakeapi import eventually
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api
from webhook.cluster.credentials import load_credentials
from webhook.cluster.resources import optional_resources
from webhook.cluster.served import ServedReflector
from webhook.config import Settings
from webhook.model.store import Store

FIXTURE = Path(__file__).parent / "fixtures" / "kruise" / "objects" / "statefulsets.v1beta1.json"
GROUP_VERSION = "/apis/apps.kruise.io/v1beta1"


class Discovery:
    """An API server that serves Advanced StatefulSets only while ``served`` is True."""

    def __init__(self) -> None:
        self.served = False
        self.discovery_calls = 0
        self.lists = 0

    async def group_version(self, request: web.Request) -> web.Response:
        self.discovery_calls += 1
        if not self.served:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        resources = [{"name": "statefulsets", "kind": "StatefulSet", "namespaced": True}]
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
        listed: dict[str, Any] = json.loads(FIXTURE.read_text())
        listed["metadata"] = {"resourceVersion": "7"}
        return web.json_response(listed)


async def test_cache_follows_the_crd(tmp_path: Path) -> None:
    fake = Discovery()
    app = web.Application()
    app.router.add_get(GROUP_VERSION, fake.group_version)
    app.router.add_get(f"{GROUP_VERSION}/statefulsets", fake.collection)
    async with TestServer(app, host="127.0.0.1") as server:
        config = write_kubeconfig(
            tmp_path / "kubeconfig", server=str(server.make_url("")).rstrip("/"), token="t"
        )
        (resource,) = optional_resources(Settings())
        store = Store(live=True)
        async with Api(load_credentials(str(config))) as api:
            cache = ServedReflector(resource, api=api, store=store, poll=0.05)
            job = asyncio.create_task(cache.run())
            try:
                # Absent: an empty table that counts as listed, and a synced cache.
                await asyncio.wait_for(cache.wait_synced(), 5)
                assert "kruisesets" in store.loaded and not store.kruisesets
                assert cache.status().synced and fake.lists == 0
                # Installed later: listed and watched, without a restart.
                fake.served = True
                await eventually(lambda: ("shop", "web") in store.kruisesets)
                assert store.kruisesets[("shop", "web")].reserved == ((1, 1),)
                assert cache.status().synced and cache.status().objects == 1
                # Uninstalled: the cache is emptied and stays ready.
                fake.served = False
                await eventually(lambda: not store.kruisesets)
                assert cache.status().synced
            finally:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job


def test_the_kind_can_be_turned_off() -> None:
    assert optional_resources(Settings(kruise=False)) == ()
