"""Shared fixtures: the real app served over real TLS on 127.0.0.1, and a client that trusts it."""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.fakeapi import FakeApi
from tests.kubeconfig import write_kubeconfig
from tests.served import Served, served
from webhook.config import Settings
from webhook.install.certfiles import DevCerts, ensure_dev_certs
from webhook.model.store import Store
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader

#: .ci/run sets STSZONE_NO_SKIP=1: a skipped test fails there (tests/noskip.py).
pytest_plugins = ["tests.noskip"]

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
# mutmut ([tool.mutmut] in pyproject.toml): the same examples for every mutant, and fewer of them.
settings.register_profile("mutation", max_examples=30, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def dev_certs(tmp_path_factory: pytest.TempPathFactory) -> DevCerts:
    """A development CA and a serving certificate for 127.0.0.1/localhost, made once per run."""
    return ensure_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def client_ssl(dev_certs: DevCerts) -> ssl.SSLContext:
    """A client context that trusts only the development CA (hostname checked)."""
    return ssl.create_default_context(cafile=str(dev_certs.ca))


ServeFactory = Callable[..., Awaitable[Served]]


@pytest.fixture
async def serve(dev_certs: DevCerts, client_ssl: ssl.SSLContext) -> AsyncIterator[ServeFactory]:
    """Start the real app over TLS on a free 127.0.0.1 port: ``await serve(store=..., ...)``
    (``tests.served``: the runner and TLS context ``stszone serve`` uses)."""
    async with contextlib.AsyncExitStack() as stack:

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
            tls = CertReloader(dev_certs.cert, dev_certs.key)
            return await stack.enter_async_context(served(runtime, tls=tls, client=client_ssl))

        yield start


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
    return write_kubeconfig(tmp_path / "kubeconfig", server=api.url, token=FAKE_TOKEN, ca=api.ca)


@pytest.fixture
def fixtures_dir() -> Path:
    return Path(__file__).parent / "fixtures"


@pytest.fixture
def stopper() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Kills any server process a failing test left running (append its Popen)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
