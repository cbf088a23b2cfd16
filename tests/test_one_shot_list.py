"""The one-shot lists of ``audit``, ``explain`` and ``rebalance`` (webhook/cluster/snapshot.py)
against the fake API server: paged, and whole again when a page's continue token expires."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.fakeapi import FakeApi, Fault
from tests.kubeconfig import write_kubeconfig
from webhook.cluster.api import Api, ApiError
from webhook.cluster.credsource import load_credentials
from webhook.cluster.live import live_store
from webhook.cluster.snapshot import list_collection
from webhook.config import Settings
from webhook.errors import ConfigError


async def test_a_list_whose_continue_token_expires_midway_is_listed_again_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd compacts every 5 minutes: a token handed out before a compaction answers 410
    ("Expired"), and a list of 100,000 pods takes long enough to meet one. client-go's pager
    (``FullListIfExpired``) then lists the collection whole; so does stszone, rather than
    failing the command."""
    async with FakeApi() as fake:
        expected = sorted(key[1] for key in fake.objects.tables["pods"])
        config = write_kubeconfig(tmp_path / "kubeconfig", server=fake.url, token="t")
        async with Api(load_credentials(str(config))) as api:
            first_page = api.get

            async def compacted_after_the_first_page(
                path: str, *, params: Mapping[str, str], **rest: object
            ) -> bytes:
                body = await first_page(path, params=params)
                if "continue" not in params:
                    fake.compact()
                return body

            monkeypatch.setattr(api, "get", compacted_after_the_first_page)
            items = await list_collection(api, "/api/v1/pods", page=5)
    assert len(expected) > 5
    assert sorted(item["metadata"]["name"] for item in items) == expected
    pages = [seen.query for seen in fake.seen("pods", "list")]
    assert [("continue" in q, q.get("limit")) for q in pages] == [
        (False, "5"),
        (True, "5"),
        (False, None),
    ]


async def test_any_other_failure_of_a_page_is_the_commands_error(tmp_path: Path) -> None:
    async with FakeApi() as fake:
        fake.inject("pods", "list", Fault.status(503))
        config = write_kubeconfig(tmp_path / "kubeconfig", server=fake.url, token="t")
        async with Api(load_credentials(str(config))) as api:
            with pytest.raises(ApiError) as raised:
                await list_collection(api, "/api/v1/pods", page=5)
    assert raised.value.status == 503


async def test_a_refused_list_leaves_no_other_list_running(tmp_path: Path) -> None:
    """``audit``'s lists run side by side: when one is refused, the command's error is raised
    only once the others have stopped, so none goes on against the closed client (opening a
    session that nothing closes) after the command has failed."""
    async with FakeApi(token="t") as fake:
        fake.inject("pods", "list", Fault.status(403))
        fake.inject("nodes", "list", Fault.slow(2.0))  # still on its way when pods is refused
        config = write_kubeconfig(tmp_path / "kubeconfig", server=fake.url, token="t", ca=fake.ca)
        with pytest.raises(ConfigError, match="HTTP 403"):
            await live_store(Settings(), credentials=load_credentials(str(config), environ={}))
        running = [
            task
            for task in asyncio.all_tasks()
            if not task.done()
            and getattr(task.get_coro(), "__qualname__", "").endswith("Reflector.list")
        ]
    assert running == []
