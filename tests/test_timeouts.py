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
from pathlib import Path

import pytest

from tests.hang import HANG_GUARD
from tests.served import served
from webhook.config import Settings
from webhook.install.certfiles import DevCerts
from webhook.model.store import Store
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
#: The timeout under test: far shorter than the client's behaviour around it.
SHORT = 0.6
DEFAULT = Settings()
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]
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
    extra = f"X-Padding: {'x' * padding}\r\n" if padding else ""
    return (
        f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {length}\r\n\r\n"
    ).encode()


async def closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (EOF or reset)."""
    received = b""
    async with asyncio.timeout(HANG_GUARD):
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except (ConnectionResetError, ssl.SSLError):
            pass
    return received


async def response(reader: asyncio.StreamReader) -> tuple[bytes, bytes, bytes]:
    """(status line, headers, body) of the next response on the stream."""
    async with asyncio.timeout(HANG_GUARD):
        status_line = await reader.readline()
        headers = await reader.readuntil(b"\r\n\r\n")
        length = int(headers.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        return status_line, headers, await reader.readexactly(length)


async def test_headers_trickled_byte_by_byte_are_cut(connect: Connect) -> None:
    """A client sending its request headers one byte every 50 ms (a minute of them) is
    disconnected by the idle timeout before its headers are complete."""
    request = head(100, padding=1100)  # ~1200 bytes at 20 a second: a minute
    sent = 0
    async with connect(idle_timeout=SHORT) as (reader, writer):
        for byte in request:
            if reader.at_eof():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                break
            sent += 1
            await asyncio.sleep(0.05)
        assert sent < len(request), "the whole trickled request was accepted"
        assert await closed(reader) == b"", "no answer is owed to an incomplete request"


async def test_body_stalled_midway_gets_408_and_the_connection_ends(connect: Connect) -> None:
    """Headers and half the body, then silence: a 408 naming the body timeout."""
    body = FIXTURE.read_bytes()
    async with connect(body_timeout=SHORT) as (reader, writer):
        writer.write(head(len(body)) + body[: len(body) // 2])
        await writer.drain()
        status_line, headers, text = await response(reader)
    assert status_line.startswith(b"HTTP/1.1 408"), status_line
    assert b"Server: stszone" in headers
    assert f"did not arrive within {SHORT:g}s".encode() in text, text


async def test_idle_keepalive_connection_is_closed(connect: Connect) -> None:
    """After a complete request, a connection with nothing more to say is closed when idle
    (the default idle timeout, 120 s, would outlast the hang guard)."""
    body = FIXTURE.read_bytes()
    async with connect(idle_timeout=SHORT) as (reader, writer):
        writer.write(head(len(body)) + body)
        await writer.drain()
        status_line, _, _ = await response(reader)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
        assert await closed(reader) == b""


async def test_a_slow_but_complete_upload_is_answered(connect: Connect) -> None:
    """A body arriving in pieces within the body timeout is answered normally (200)."""
    body = FIXTURE.read_bytes()
    async with connect(body_timeout=HANG_GUARD) as (reader, writer):
        writer.write(head(len(body)))
        for i in range(0, len(body), len(body) // 4 + 1):
            writer.write(body[i : i + len(body) // 4 + 1])
            await writer.drain()
            await asyncio.sleep(0.05)
        status_line, _, _ = await response(reader)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
