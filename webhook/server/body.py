"""Reading a POST body: a JSON Content-Type, the 7 MiB cap, ``Expect``, and a bounded wait.

aiohttp calls a handler once the request's headers are in; the body is read here, from the
request's stream. What is checked before any of it is read (:func:`check_head`): the
Content-Type, the announced length against the cap, and the ``Expect`` header. A chunked body
(or one longer than it announced) is refused as soon as it passes the cap, and a body that stops
arriving gets 408 after ``Settings.body_timeout`` (aiohttp's keep-alive timer only covers a
connection waiting for its next request).

``Expect: 100-continue`` (curl sends it before large bodies) is answered by :func:`read_body`
only when :func:`check_head` admits the request: a refused client gets its 4xx without ever
being asked for the body.
"""

from __future__ import annotations

import asyncio
from typing import Final, NamedTuple

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from webhook.errors import BadRequest, PayloadTooLarge

JSON: Final = "application/json"


class BodyTimeout(BadRequest):
    """The body did not arrive in time (408; the connection closes)."""

    status = 408


class Body(NamedTuple):
    """What a POST endpoint reads: a JSON body, named in messages, under the body cap."""

    #: What the body must be, in messages ("the AdmissionReview").
    what: str
    #: Added to the 413 message (how the client can send less).
    too_large_hint: str = ""


def check_head(request: web.BaseRequest, *, body: Body, limit: int) -> None:
    """Refuse, from the headers alone, a body the endpoint will not take (BadRequest)."""
    # The exact header first: parsing it ("application/json; charset=utf-8") is rarer work.
    if request.headers.get(hdrs.CONTENT_TYPE) != JSON and request.content_type != JSON:
        raise BadRequest(
            f"Content-Type must be {JSON}, got {request.content_type or 'none'}; "
            f"send {body.what} as JSON"
        )
    length = request.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(
            f"request body of {length} bytes is over the {limit} byte cap{body.too_large_hint}"
        )
    expect = request.headers.get(hdrs.EXPECT)
    if expect is not None and expect.lower() != "100-continue":
        raise BadRequest(f"Expect: {expect} is not supported; send Expect: 100-continue or none")


async def read_body(request: web.BaseRequest, *, body: Body, limit: int, seconds: float) -> bytes:
    """The whole body, checked (:func:`check_head`), under ``limit`` bytes, within ``seconds``;
    a client waiting for ``100 Continue`` is sent it once the head is admitted."""
    check_head(request, body=body, limit=limit)
    content = request.content
    if content.is_eof():  # the whole body came with the headers: take it as one piece
        return content.read_nowait()
    if request.headers.get(hdrs.EXPECT) and request.version == HttpVersion11:
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size is counted from here
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while chunk := await content.readany():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(
                        f"request body is over the {limit} byte cap{body.too_large_hint}"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout(
            f"the request body did not arrive within {seconds:g}s; send it at once"
        ) from None
    return b"".join(chunks)
