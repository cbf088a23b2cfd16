"""The app's own dispatch (``webhook.server.app.App``): what aiohttp's router did before.

Paths and methods (404, 405 with ``Allow``, HEAD on GET endpoints), and the body as the
handlers read it themselves: chunked uploads under and over the 7 MiB cap, and
``Expect: 100-continue`` (curl sends it before large bodies), answered only under the cap.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.served import Served
from webhook.config import MAX_BODY
from webhook.model.store import Store


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    return await serve(store=Store(zones=("a", "b", "c")))


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/nope", 404, None),
        ("POST", "/mutate/", 404, None),
        ("GET", "/mutate", 405, "POST"),
        ("PUT", "/validate", 405, "POST"),
        ("POST", "/healthz", 405, "GET,HEAD"),
        ("HEAD", "/healthz", 200, None),
        ("GET", "/extender/filter", 405, "POST"),
    ],
)
async def test_paths_and_methods(
    served: Served, method: str, path: str, status: int, allow: str | None
) -> None:
    """Unknown paths are 404, wrong methods 405 naming the right one; GET endpoints take HEAD."""
    async with served.session.request(method, served.url + path, ssl=served.ssl) as resp:
        assert (resp.status, resp.headers.get("Allow")) == (status, allow)


def review_of_size(size: int) -> bytes:
    """A pod review padded with an annotation to ``size`` bytes of JSON."""
    pod = b.sts_pod("db", 0)
    pod["metadata"]["annotations"] = {"pad": ""}
    body = json.dumps(b.review(pod)).encode()
    pod["metadata"]["annotations"]["pad"] = "x" * (size - len(body))
    body = json.dumps(b.review(pod)).encode()
    assert len(body) == size
    return body


async def chunks(body: bytes, size: int = 256 * 1024) -> AsyncIterator[bytes]:
    for at in range(0, len(body), size):
        yield body[at : at + size]


@pytest.mark.parametrize(("size", "status"), [(2 * 1024 * 1024, 200), (MAX_BODY + 1, 413)])
async def test_chunked_bodies_are_read_up_to_the_cap(
    served: Served, size: int, status: int
) -> None:
    """A body without Content-Length (chunked) is answered up to 7 MiB and refused beyond."""
    headers = {"Content-Type": "application/json"}
    async with served.session.post(
        served.url + "/mutate", data=chunks(review_of_size(size)), headers=headers, ssl=served.ssl
    ) as resp:
        assert resp.headers.get("Content-Length") is not None
        assert resp.status == status, await resp.text()


async def raw_exchange(served: Served, head: bytes, body: bytes) -> tuple[bytes, bytes]:
    """Send ``head``; read what comes before the body is sent, then send it and read the rest."""
    host, port = served.url.removeprefix("https://").split(":")
    reader, writer = await asyncio.open_connection(
        host, int(port), ssl=served.ssl, server_hostname=host
    )
    try:
        writer.write(head)
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        if first.startswith(b"HTTP/1.1 100"):
            writer.write(body)
            rest = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        else:
            rest = b""
        return first, rest
    finally:
        writer.close()


def expecting(length: int) -> bytes:
    return (
        f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()


async def test_expect_100_continue_is_answered_before_the_body(served: Served) -> None:
    """A client that waits for 100 Continue gets it, then the answer to its body."""
    body = review_of_size(4096)
    first, rest = await raw_exchange(served, expecting(len(body)), body)
    assert first.startswith(b"HTTP/1.1 100 Continue")
    assert rest.startswith(b"HTTP/1.1 200 ")


async def test_expect_over_the_cap_is_refused_without_continue(served: Served) -> None:
    """An announced body over 7 MiB gets 413 at once: the client never uploads it."""
    first, _ = await raw_exchange(served, expecting(MAX_BODY + 1), b"")
    assert first.startswith(b"HTTP/1.1 413 ")
