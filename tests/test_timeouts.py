"""Slow clients: trickled headers, stalled bodies and idle connections are cut, on the real app.

The app runs with ``server.make_runner`` (what ``stszone serve`` uses) over TLS on 127.0.0.1,
with timeouts shrunk to fractions of a second; the clients are raw TLS streams.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from webhook.config import Settings
from webhook.install.certfiles import DevCerts
from webhook.model.store import Store
from webhook.server.app import make_app
from webhook.server.runtime import Runtime
from webhook.server.serve import make_runner
from webhook.server.tls import CertReloader

FIXTURE = Path(__file__).parent / "fixtures" / "admission" / "003-Pod-CREATE.json"
IDLE, BODY = 0.6, 0.6
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture
async def port(dev_certs: DevCerts) -> AsyncIterator[int]:
    settings = Settings(host="127.0.0.1", port=0, idle_timeout=IDLE, body_timeout=BODY)
    runtime = Runtime(
        store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
    )
    runner = make_runner(make_app(runtime), settings)
    await runner.setup()
    reloader = CertReloader(dev_certs.cert, dev_certs.key)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=reloader.context)
    await site.start()
    yield runner.addresses[0][1]
    await runner.cleanup()


async def connect(port: int, client_ssl: ssl.SSLContext) -> Stream:
    return await asyncio.open_connection("127.0.0.1", port, ssl=client_ssl)


def head(length: int) -> bytes:
    return (
        f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closes the connection (EOF or reset); fails after ``seconds``."""
    started = time.monotonic()
    async with asyncio.timeout(seconds):
        try:
            while await reader.read(65536):
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
    return time.monotonic() - started


async def test_headers_trickled_byte_by_byte_are_cut(port: int, client_ssl: ssl.SSLContext) -> None:
    """A client sending its request line one byte every 50 ms is disconnected after the idle
    timeout, long before it would finish."""
    reader, writer = await connect(port, client_ssl)
    started = time.monotonic()
    cut = False
    for byte in head(100):  # ~100 bytes: 5 s at this pace
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            cut = True
            break
        if reader.at_eof():
            cut = True
            break
        await asyncio.sleep(0.05)
        if time.monotonic() - started > 4 * IDLE + 1:
            break
    if not cut:
        await closed_within(reader, 1.0)
    assert time.monotonic() - started < 4 * IDLE + 1.5
    writer.close()


async def test_body_stalled_midway_gets_408_and_the_connection_ends(
    port: int, client_ssl: ssl.SSLContext
) -> None:
    """Headers and half the body, then silence: a 408 with a message after the body timeout."""
    body = FIXTURE.read_bytes()
    reader, writer = await connect(port, client_ssl)
    started = time.monotonic()
    writer.write(head(len(body)) + body[: len(body) // 2])
    await writer.drain()
    async with asyncio.timeout(BODY + 3):
        status_line = await reader.readline()
        response = await reader.readuntil(b"\r\n\r\n")
    waited = time.monotonic() - started
    assert status_line.startswith(b"HTTP/1.1 408"), status_line
    assert b"Server: stszone" in response
    assert BODY - 0.1 <= waited < BODY + 2
    text = await reader.read(4096)
    assert b"did not arrive within" in text
    writer.close()


async def test_idle_keepalive_connection_is_closed(port: int, client_ssl: ssl.SSLContext) -> None:
    """After a complete request, a connection with nothing more to say is closed when idle."""
    body = FIXTURE.read_bytes()
    reader, writer = await connect(port, client_ssl)
    writer.write(head(len(body)) + body)
    await writer.drain()
    status_line = await reader.readline()
    assert status_line.startswith(b"HTTP/1.1 200")
    headers = await reader.readuntil(b"\r\n\r\n")
    length = int(headers.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    await reader.readexactly(length)
    waited = await closed_within(reader, IDLE + 3)
    assert waited < IDLE + 2
    writer.close()


async def test_a_slow_but_complete_upload_is_answered(
    port: int, client_ssl: ssl.SSLContext
) -> None:
    """A body arriving in pieces within the timeout is answered normally (200)."""
    body = FIXTURE.read_bytes()
    reader, writer = await connect(port, client_ssl)
    writer.write(head(len(body)))
    for i in range(0, len(body), len(body) // 4 + 1):
        writer.write(body[i : i + len(body) // 4 + 1])
        await writer.drain()
        await asyncio.sleep(BODY / 8)
    status_line = await reader.readline()
    assert status_line.startswith(b"HTTP/1.1 200"), status_line
    writer.close()
