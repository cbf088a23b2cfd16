"""The app served in-process as ``stszone serve`` serves it: the one way tests start it.

:func:`served` runs ``runtime`` on :class:`~webhook.server.serve.Server` (aiohttp's low-level
server, runner and TLS site as ``stszone serve`` uses them, its connection timeouts taken from
``runtime.settings``) over the hardened TLS context of a
:class:`~webhook.server.tls.TlsContext` (a ``CertReloader``, or the one ``--manage-certs``
fills), on 127.0.0.1 at a port the kernel picks (or the one given), and stops it when the
block ends. :class:`InThread` runs the same in a thread with its own event loop, for tests
whose clients block (``ssl`` sockets, ``http.client``).

The ``serve`` fixture (conftest) is :func:`served` for async tests. The real process
(``python -m webhook serve``) is started by :func:`tests.process.start_serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from tests.hang import HANG_GUARD
from webhook.server.runtime import Runtime
from webhook.server.serve import Server
from webhook.server.tls import CertReloader, TlsContext


@dataclass
class Served:
    """A running app: where it listens, and a session whose requests trust its certificate."""

    url: str
    port: int
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
        """GET a path; return (status, text)."""
        async with self.session.get(self.url + path, ssl=self.ssl) as resp:
            return resp.status, await resp.text()


@contextlib.asynccontextmanager
async def served(
    runtime: Runtime, *, tls: TlsContext, client: ssl.SSLContext, port: int = 0
) -> AsyncIterator[Served]:
    """Serve ``runtime`` on 127.0.0.1:``port`` (0: a free one) over ``tls`` until the block
    ends.

    ``client`` is the context the yielded session's requests use (it must trust ``tls``).
    Background jobs run with the runner, as in production: attach
    ``tls.run`` to ``runtime`` to have certificates reloaded.
    """
    server = Server(runtime, settings=runtime.settings)
    await server.start("127.0.0.1", port, ssl_context=tls.context)
    try:
        port = server.port
        async with aiohttp.ClientSession() as session:
            yield Served(
                url=f"https://127.0.0.1:{port}",
                port=port,
                session=session,
                runtime=runtime,
                ssl=client,
            )
    finally:
        await server.close()


class InThread:
    """:func:`served` in a thread with its own event loop, for blocking clients.

    ``with InThread(runtime, tls=..., client=...) as app:`` then ``app.port``; the app stops
    when the block ends.
    """

    def __init__(self, runtime: Runtime, *, tls: CertReloader, client: ssl.SSLContext) -> None:
        self.runtime, self.tls, self.client = runtime, tls, client
        self.port = 0
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="served")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # reported by __enter__, not lost in the thread
            self._failed = err
            self._ready.set()

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with served(self.runtime, tls=self.tls, client=self.client) as app:
            self.port = app.port
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> InThread:
        self._thread.start()
        assert self._ready.wait(HANG_GUARD), (
            f"the app did not start in {HANG_GUARD:g}s (hang guard)"
        )
        if self._failed is not None:
            raise AssertionError(f"the app did not start: {self._failed!r}") from self._failed
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(HANG_GUARD)
        assert not self._thread.is_alive(), f"the app did not stop in {HANG_GUARD:g}s (hang guard)"
