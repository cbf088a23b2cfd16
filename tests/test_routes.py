"""The app's routes over TLS: paths, methods, and the body under the 7 MiB cap.

Paths and methods (404, 405 with ``Allow``, HEAD on GET endpoints, from aiohttp's router), and
the body as the handlers read it (``webhook.server.body``): announced and chunked uploads under
and over the cap, and ``Expect: 100-continue`` (curl sends it before large bodies), answered
only under the cap, so a refused client never uploads.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator

import pytest

from tests import builders as b
from tests.conftest import ServeFactory
from tests.rawhttp import closed, connected, request, response
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
        text = await resp.text()
        assert resp.status == status, text
        if status == 413:
            assert text == f"request body is over the {MAX_BODY} byte cap\n"


def expecting(length: int) -> bytes:
    return request(length=length, headers=("Expect: 100-continue",))


async def test_expect_100_continue_is_answered_before_the_body(
    served: Served, client_ssl: ssl.SSLContext
) -> None:
    """A client that waits for 100 Continue gets it, then the answer to its body."""
    body = review_of_size(4096)
    async with connected(served.port, client_ssl) as (reader, writer):
        writer.write(expecting(len(body)))
        assert (await response(reader)).status_line == b"HTTP/1.1 100 Continue"
        writer.write(body)
        assert (await response(reader)).status == 200


TOO_LARGE = f"request body of {MAX_BODY + 1} bytes is over the {MAX_BODY} byte cap\n".encode()


@pytest.mark.parametrize("expect", [True, False], ids=["expect-100-continue", "no-expect"])
async def test_an_announced_body_over_the_cap_is_refused_before_it_is_sent(
    served: Served, client_ssl: ssl.SSLContext, expect: bool
) -> None:
    """A Content-Length over 7 MiB gets a one-line 413 at once, never a 100 Continue: the
    client is told before it uploads anything, and the connection closes."""
    head = expecting(MAX_BODY + 1) if expect else request(length=MAX_BODY + 1)
    async with connected(served.port, client_ssl) as (reader, writer):
        writer.write(head)
        answer = await response(reader)
        assert (answer.status, answer.body) == (413, TOO_LARGE)
        assert answer.headers["connection"] == "close"
        assert await closed(reader) == b""
