"""Slow clients: trickled headers, stalled bodies and idle connections are cut, on the real app.

The app runs as ``stszone serve`` runs it (``tests.served``: ``server.serve.Server`` over the
hardened TLS context) on 127.0.0.1, with the timeout under test shrunk to a fraction of a second;
the clients are raw TLS streams. Nothing here times the server: each test checks what the
client saw happen, and in which order. ``HANG_GUARD`` only fails a test that would otherwise
wait forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from tests.hang import HANG_GUARD
from tests.rawhttp import FIXTURE, Stream, closed, request, response
from tests.served import served
from webhook.config import Settings
from webhook.install.certfiles import DevCerts
from webhook.model.store import Store
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader

#: The timeout under test: far shorter than the client's behaviour around it.
SHORT = 0.6
DEFAULT = Settings()
Connect = Callable[..., AbstractAsyncContextManager[Stream]]


@pytest.fixture
def connect(dev_certs: DevCerts, client_ssl: ssl.SSLContext) -> Connect:
    """``async with connect(idle_timeout=..., body_timeout=...) as (reader, writer)``: a raw TLS
    stream to the app served with those timeouts (the others at their defaults)."""

    @contextlib.asynccontextmanager
    async def connected(
        *, idle_timeout: float = DEFAULT.idle_timeout, body_timeout: float = DEFAULT.body_timeout
    ) -> AsyncIterator[Stream]:
        settings = Settings(
            host="127.0.0.1", port=0, idle_timeout=idle_timeout, body_timeout=body_timeout
        )
        runtime = Runtime(
            store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
        )
        tls = CertReloader(dev_certs.cert, dev_certs.key)
        async with served(runtime, tls=tls, client=client_ssl) as app:
            reader, writer = await asyncio.open_connection("127.0.0.1", app.port, ssl=client_ssl)
            try:
                yield reader, writer
            finally:
                writer.close()

    return connected


def head(length: int, *, padding: int = 0) -> bytes:
    """Request line and headers of a POST /mutate; ``padding`` bytes of an extra header."""
    extra = (f"X-Padding: {'x' * padding}",) if padding else ()
    return request(length=length, headers=extra)


async def test_headers_trickled_byte_by_byte_are_cut(connect: Connect) -> None:
    """A client sending its request headers one byte every 50 ms (a minute of them) is
    disconnected by the idle timeout before its headers are complete."""
    data = head(100, padding=1100)  # ~1200 bytes at 20 a second: a minute
    sent = 0
    async with connect(idle_timeout=SHORT) as (reader, writer):
        for byte in data:
            if reader.at_eof():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                break
            sent += 1
            await asyncio.sleep(0.05)
        assert sent < len(data), "the whole trickled request was accepted"
        assert await closed(reader) == b"", "no answer is owed to an incomplete request"


async def test_body_stalled_midway_gets_408_and_the_connection_ends(connect: Connect) -> None:
    """Headers and half the body, then silence: a one-line 408 naming the body timeout, and
    the connection closes (the rest of the body, were it to come, is not waited for)."""
    body = FIXTURE.read_bytes()
    async with connect(body_timeout=SHORT) as (reader, writer):
        writer.write(head(len(body)) + body[: len(body) // 2])
        await writer.drain()
        answer = await response(reader)
        assert answer.status == 408, answer
        assert answer.headers["server"] == "stszone"
        assert answer.headers["connection"] == "close"
        assert answer.body == (
            f"the request body did not arrive within {SHORT:g}s; send it at once\n".encode()
        )
        assert await closed(reader) == b""


async def test_idle_keepalive_connection_is_closed(connect: Connect) -> None:
    """A kept-alive connection answers request after request; once it has nothing more to
    say it is closed when idle (the default idle timeout, 120 s, would outlast the hang guard)."""
    body = FIXTURE.read_bytes()
    async with connect(idle_timeout=SHORT) as (reader, writer):
        for _ in range(3):
            writer.write(head(len(body)) + body)
            await writer.drain()
            assert (await response(reader)).status == 200
        assert await closed(reader) == b""


def test_the_default_idle_timeout_outlasts_the_api_servers() -> None:
    """kube-apiserver closes idle connections to webhooks after 90 s: the webhook must wait
    longer, or a POST sent as it closes the connection fails and is not retried."""
    assert DEFAULT.idle_timeout > 90


async def test_a_slow_but_complete_upload_is_answered(connect: Connect) -> None:
    """A body arriving in pieces within the body timeout is answered normally (200)."""
    body = FIXTURE.read_bytes()
    async with connect(body_timeout=HANG_GUARD) as (reader, writer):
        writer.write(head(len(body)))
        for i in range(0, len(body), len(body) // 4 + 1):
            writer.write(body[i : i + len(body) // 4 + 1])
            await writer.drain()
            await asyncio.sleep(0.05)
        assert (await response(reader)).status == 200
