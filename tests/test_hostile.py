"""Hostile and odd clients over TLS: anything on the pod network can reach the webhook.

The app runs in a thread of its own (``tests.served.InThread``), as ``stszone serve`` runs it,
so the clients here (in the test's event loop or a worker thread) do not share its loop. What is
checked is what a client sees: which answers come, in which order, and when the server stops
taking bytes. Nothing is timed; ``HANG_GUARD`` only fails a test that would otherwise hang.

* A pipelined flood on many connections does not keep a fresh connection's review waiting for
  the flood to be answered.
* A client that never reads its answers is, soon, not read from either.
* A request with no ``Host`` is a 400 (RFC 9112 section 3.2); an ``Upgrade`` header on a
  valid POST is ignored, the review answered; an over-long header line is a 400, never a 5xx.
* A body whose Content-Encoding does not decode is a 400 counted as one; a refused header value
  that is not UTF-8 is escaped in its 400.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from collections.abc import Iterator

import pytest

from tests.fakeapi import eventually
from tests.rawhttp import FIXTURE, closed, connected, request, response
from tests.served import InThread
from webhook.config import Settings
from webhook.install.certfiles import DevCerts
from webhook.model.store import Store
from webhook.server import logs
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader

BODY = FIXTURE.read_bytes()
UID = json.loads(BODY)["request"]["uid"]
#: The flood: this many connections, each writing this many reviews in one go.
FLOOD_CONNECTIONS, FLOOD_REVIEWS = 8, 400
#: A client that never reads must be stopped well before it has written this much.
UNREAD_CAP = 128 * 2**20


@pytest.fixture(scope="module")
def app(dev_certs: DevCerts, client_ssl: ssl.SSLContext) -> Iterator[InThread]:
    settings = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(
        store=Store(zones=("a", "b", "c")), defaults=settings.defaults(), settings=settings
    )
    with InThread(
        runtime, tls=CertReloader(dev_certs.cert, dev_certs.key), client=client_ssl
    ) as served:
        yield served


def uid_of(body: bytes) -> str:
    uid: str = json.loads(body)["response"]["uid"]
    return uid


async def test_a_fresh_review_is_not_kept_behind_a_pipelined_flood(
    app: InThread, client_ssl: ssl.SSLContext
) -> None:
    """Many connections each write hundreds of reviews in one go (and read their answers);
    a review on a fresh connection is answered while most of the flood is still unanswered."""
    answered = 0
    started = asyncio.Event()
    total = FLOOD_CONNECTIONS * FLOOD_REVIEWS

    async def flood() -> None:
        nonlocal answered
        async with connected(app.port, client_ssl) as (reader, writer):
            writer.write(request(BODY) * FLOOD_REVIEWS)
            for _ in range(FLOOD_REVIEWS):
                assert (await response(reader)).status == 200
                answered += 1
                started.set()

    floods = [asyncio.create_task(flood()) for _ in range(FLOOD_CONNECTIONS)]
    try:
        await started.wait()
        async with connected(app.port, client_ssl) as (reader, writer):
            writer.write(request(BODY))
            answer = await response(reader)
            seen = answered
        assert (answer.status, uid_of(answer.body)) == (200, UID)
        assert seen < total // 2, f"the fresh review waited for {seen} of {total} flood answers"
    finally:
        await asyncio.gather(*floods)
    assert answered == total


def write_without_reading(port: int, ctx: ssl.SSLContext) -> int:
    """Write pipelined reviews and never read an answer; the bytes written before the server
    stopped taking them (a send blocked for 2 s), or ``UNREAD_CAP`` if it never did."""
    block = request(BODY) * 100
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # answers pile up at the server
    raw.connect(("127.0.0.1", port))
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.settimeout(2.0)
        sent = 0
        try:
            while sent < UNREAD_CAP:
                sent += tls.send(block)
        except TimeoutError:
            pass
    return sent


async def test_a_client_that_never_reads_is_soon_not_read_from(
    app: InThread, client_ssl: ssl.SSLContext
) -> None:
    """Pipelined reviews whose answers are never read: once the answers back up, the server
    stops reading (its queue of parsed requests is bounded), so the client's writes stall."""
    sent = await asyncio.to_thread(write_without_reading, app.port, client_ssl)
    assert sent < UNREAD_CAP, f"the server took {sent} bytes from a client that never reads"
    async with connected(app.port, client_ssl) as (reader, writer):  # and others are served
        writer.write(request(BODY))
        assert (await response(reader)).status == 200


async def test_a_request_without_host_is_a_400(app: InThread, client_ssl: ssl.SSLContext) -> None:
    """HTTP/1.1 requires Host (RFC 9112 section 3.2): 400, and the connection closes."""
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(request(BODY, host=False))
        answer = await response(reader)
        assert answer.status == 400 and b"Host" in answer.body, answer
        assert await closed(reader) == b""


async def test_a_request_aiohttp_cannot_parse_is_logged_in_one_debug_line(
    app: InThread, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    """A client's malformed request is the client's problem: one debug line, no error record
    and no traceback a flood of them would fill the log with (``logs.ClientErrors``)."""
    server = logging.getLogger("aiohttp.server")
    server.addFilter(errors := logs.ClientErrors())
    try:
        with caplog.at_level(logging.DEBUG):
            async with connected(app.port, client_ssl) as (reader, writer):
                writer.write(request(BODY, host=False))
                assert (await response(reader)).status == 400
                await closed(reader)
    finally:
        server.removeFilter(errors)
    mine = [(r.name, r.levelno) for r in caplog.records if "Missing 'Host'" in r.getMessage()]
    assert mine == [("stszone.server", logging.DEBUG)]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_http_1_0_needs_no_host(app: InThread, client_ssl: ssl.SSLContext) -> None:
    """HTTP/1.0 had no Host header: its requests are answered without one."""
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(request(BODY, host=False, version="1.0"))
        answer = await response(reader)
    assert (answer.status, uid_of(answer.body)) == (200, UID)


@pytest.mark.parametrize(
    "upgrade",
    [
        ("Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQAAP__"),
        ("Connection: Upgrade", "Upgrade: websocket"),
    ],
    ids=["h2c", "websocket"],
)
async def test_an_upgrade_header_on_a_post_is_ignored(
    app: InThread, client_ssl: ssl.SSLContext, upgrade: tuple[str, ...]
) -> None:
    """A valid review asking to switch protocols is answered as HTTP/1.1 (no 101, no 400), and
    the connection goes on serving requests."""
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(request(BODY, headers=upgrade))
        answer = await response(reader)
        assert (answer.status, uid_of(answer.body)) == (200, UID)
        writer.write(request(BODY))
        assert (await response(reader)).status == 200


async def test_an_over_long_header_line_is_a_400(app: InThread, client_ssl: ssl.SSLContext) -> None:
    """A header line of 70,000 bytes is refused with a 400 (never a 5xx), and the connection
    closes."""
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(request(BODY, headers=("X-Pad: " + "x" * 70_000,)))
        answer = await response(reader)
        assert answer.status == 400, answer
        assert await closed(reader) == b""


async def test_a_client_gone_mid_body_is_neither_an_error_nor_counted(
    app: InThread, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    """Half a review, then the connection drops: nothing is in flight any more, no error is
    logged, no answer is counted (nobody got one), and the next client is served."""
    seen: list[bool] = []  # per answer observed: was a review read?
    app.runtime.observers.append(lambda _, parsed, *__: seen.append(parsed is not None))
    try:
        with caplog.at_level(logging.DEBUG):
            async with connected(app.port, client_ssl) as (_, writer):
                writer.write(request(BODY)[:-100])
                await writer.drain()
                await eventually(lambda: app.runtime.in_flight.count == 1)
            await eventually(lambda: app.runtime.in_flight.count == 0)
            async with connected(app.port, client_ssl) as (reader, writer):
                writer.write(request(BODY))
                assert (await response(reader)).status == 200
            await eventually(lambda: True in seen)
    finally:
        app.runtime.observers.clear()
    assert seen == [True], "the request whose client left was counted"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_that_does_not_decode_is_a_400_counted_as_one(
    app: InThread, client_ssl: ssl.SSLContext, caplog: pytest.LogCaptureFixture, encoding: str
) -> None:
    """aiohttp decodes a Content-Encoding itself: a body that does not decode is the client's
    error, a one-line 400 with no error record (``logs.ClientErrors``), and the observers are
    told 400, not allowed."""
    statuses: list[int] = []
    app.runtime.observers.append(lambda *seen: statuses.append(seen[-1]))
    server = logging.getLogger("aiohttp.server")
    server.addFilter(errors := logs.ClientErrors())
    try:
        with caplog.at_level(logging.DEBUG):
            async with connected(app.port, client_ssl) as (reader, writer):
                broken = b"\x1f\x8b\x08\x00" + BODY[:64]  # a gzip header, then plain JSON
                writer.write(request(broken, headers=(f"Content-Encoding: {encoding}",)))
                answer = await response(reader)
            await eventually(lambda: bool(statuses))
    finally:
        server.removeFilter(errors)
        app.runtime.observers.clear()
    assert answer.status == 400 and b"Content-Encoding" in answer.body, answer
    assert statuses == [400]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_a_refused_header_value_that_is_not_utf8_is_escaped_in_the_400(
    app: InThread, client_ssl: ssl.SSLContext
) -> None:
    """The 400 for an unsupported ``Expect`` quotes its value: a byte that is not UTF-8 is
    written as an escape (of aiohttp's surrogate), not a 500."""
    latin1 = request(BODY, headers=("Expect: caf_",)).replace(b"caf_", b"caf\xe9")
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(latin1)
        answer = await response(reader)
    assert answer.status == 400 and b"Expect: caf\\udce9 is not supported" in answer.body, answer
