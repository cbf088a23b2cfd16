"""Shared fixtures: the real app served over real TLS on 127.0.0.1, and a client that trusts it."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import settings

from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from webhook.config import Settings
from webhook.install.certfiles import DevCerts, ensure_dev_certs
from webhook.model.store import Store
from webhook.server.app import make_app
from webhook.server.runtime import Runtime
from webhook.server.serve import Runner, make_runner
from webhook.server.tls import CertReloader

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def dev_certs(tmp_path_factory: pytest.TempPathFactory) -> DevCerts:
    """A development CA and a serving certificate for 127.0.0.1/localhost, made once per run."""
    return ensure_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def client_ssl(dev_certs: DevCerts) -> ssl.SSLContext:
    """A client context that trusts only the development CA (hostname checked)."""
    return ssl.create_default_context(cafile=str(dev_certs.ca))


@dataclass
class Served:
    """A running app: its base URL and a session that trusts its certificate."""

    url: str
    session: aiohttp.ClientSession
    runtime: Runtime
    ssl: ssl.SSLContext

    async def post_json(self, path: str, body: Any) -> tuple[int, Any]:
        """POST a JSON body; return (status, decoded JSON or text)."""
        async with self.session.post(self.url + path, json=body, ssl=self.ssl) as resp:
            if resp.content_type == "application/json":
                return resp.status, await resp.json()
            return resp.status, await resp.text()

    async def post_raw(
        self, path: str, data: bytes, *, content_type: str = "application/json"
    ) -> tuple[int, str]:
        """POST raw bytes with the given content type; return (status, text)."""
        headers = {"Content-Type": content_type}
        async with self.session.post(
            self.url + path, data=data, headers=headers, ssl=self.ssl
        ) as resp:
            return resp.status, await resp.text()

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.url + path, ssl=self.ssl) as resp:
            return resp.status, await resp.text()


ServeFactory = Callable[..., Awaitable[Served]]


@pytest.fixture
async def serve(dev_certs: DevCerts, client_ssl: ssl.SSLContext) -> AsyncIterator[ServeFactory]:
    """Start the real app over TLS on a free 127.0.0.1 port: ``await serve(store=..., ...)``."""
    runners: list[Runner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def start(
        *,
        store: Store | None = None,
        settings: Settings | None = None,
        runtime: Runtime | None = None,
    ) -> Served:
        settings = settings or Settings(host="127.0.0.1", port=0)
        if runtime is None:
            runtime = Runtime(
                store=store or Store(), defaults=settings.defaults(), settings=settings
            )
        reloader = CertReloader(dev_certs.cert, dev_certs.key)
        runner = make_runner(make_app(runtime), settings)
        await runner.setup()
        site = web.TCPSite(runner, host="127.0.0.1", port=0, ssl_context=reloader.context)
        await site.start()
        runners.append(runner)
        server = site._server
        assert server is not None and server.sockets
        port = server.sockets[0].getsockname()[1]
        session = aiohttp.ClientSession()
        sessions.append(session)
        return Served(
            url=f"https://127.0.0.1:{port}", session=session, runtime=runtime, ssl=client_ssl
        )

    yield start
    for session in sessions:
        await session.close()
    for runner in runners:
        await runner.cleanup()


#: The bearer token the fake API server accepts, in the kubeconfig the live tests write.
FAKE_TOKEN = "fake-token"


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    """A fake kube-apiserver on 127.0.0.1 serving the recorded cluster (tests/fakeapi.py)."""
    async with FakeApi(token=FAKE_TOKEN) as fake:
        yield fake


@pytest.fixture
def kubeconfig(tmp_path: Path, api: FakeApi) -> Path:
    """A kubeconfig pointing at the fake API server with its token."""
    return write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token=FAKE_TOKEN)


@pytest.fixture
def fixtures_dir() -> Path:
    return Path(__file__).parent / "fixtures"
