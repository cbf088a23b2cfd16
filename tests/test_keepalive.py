"""Keep-alive and pipelining over TLS: which answers leave the connection open, and in what order.

The API server keeps its connections to a webhook open and sends request after request on them.
Each test writes its requests by hand (``tests.rawhttp``) to the app served as ``stszone serve``
serves it, and checks what came back and whether the same connection still answers.
"""

from __future__ import annotations

import json
import ssl

import pytest

from tests.conftest import ServeFactory
from tests.rawhttp import FIXTURE, closed, connected, request, response
from webhook.model.store import Store

BODY = FIXTURE.read_bytes()
UID = json.loads(BODY)["request"]["uid"]


def uid_of(body: bytes) -> str:
    uid: str = json.loads(body)["response"]["uid"]
    return uid


@pytest.mark.parametrize(
    ("version", "connection", "stays_open", "says"),
    [
        ("1.1", None, True, None),
        ("1.1", "keep-alive", True, None),
        ("1.1", "close", False, "close"),
        ("1.0", None, False, None),
        ("1.0", "keep-alive", True, "keep-alive"),
    ],
)
async def test_keep_alive_follows_the_request(
    serve: ServeFactory,
    client_ssl: ssl.SSLContext,
    version: str,
    connection: str | None,
    stays_open: bool,
    says: str | None,
) -> None:
    """HTTP/1.1 stays open unless told to close; HTTP/1.0 closes unless it asks for keep-alive,
    and the answer says so when the version's default is not what happens."""
    app = await serve(store=Store(zones=("a", "b", "c")))
    extra = (f"Connection: {connection}",) if connection else ()
    data = request(BODY, version=version, headers=extra)
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(data)
        answer = await response(reader)
        assert (answer.status, uid_of(answer.body)) == (200, UID)
        assert answer.headers.get("connection") == says
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["server"] == "stszone"
        if stays_open:
            writer.write(data)
            assert uid_of((await response(reader)).body) == UID
        else:
            assert await closed(reader) == b""


async def test_pipelined_requests_are_answered_in_order(
    serve: ServeFactory, client_ssl: ssl.SSLContext
) -> None:
    """Three requests in one write: three answers, in the order asked, on an open connection."""
    app = await serve(store=Store(zones=("a", "b", "c")))
    other = json.loads(BODY)
    other["request"]["uid"] = "second"
    second = json.dumps(other).encode()
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(
            request(BODY)
            + request(second, path="/validate")
            + request(method="GET", path="/healthz")
        )
        first, then, health = [await response(reader) for _ in range(3)]
        assert (uid_of(first.body), uid_of(then.body)) == (UID, "second")
        assert (health.status, health.body) == (200, b"ok\n")
        writer.write(request(method="GET", path="/healthz"))
        assert (await response(reader)).status == 200


async def test_a_body_refused_for_its_content_type_leaves_the_connection_open(
    serve: ServeFactory, client_ssl: ssl.SSLContext
) -> None:
    """A complete request refused at its headers (400) does not cost the connection: the next
    request on it is answered."""
    app = await serve(store=Store(zones=("a", "b", "c")))
    refused = request(BODY).replace(b"application/json", b"text/plain")
    async with connected(app.port, client_ssl) as (reader, writer):
        writer.write(refused + request(BODY))
        first, second = await response(reader), await response(reader)
    assert first.status == 400 and b"Content-Type must be application/json" in first.body
    assert (second.status, uid_of(second.body)) == (200, UID)
