"""Reading a POST body: a JSON Content-Type, the 7 MiB cap, ``Expect``, and a bounded wait.

aiohttp calls a handler once the request's headers are in; the body is read in the handler
(``request.read()``, which refuses more than the application's ``client_max_size``). What is
checked before any of it is read (:func:`check_head`): the Content-Type, the announced length
against the cap, and the ``Expect`` header. A body that stops arriving gets 408 after
``Settings.body_timeout`` (aiohttp's keep-alive timer only covers a connection waiting for its
next request).

``Expect: 100-continue`` (curl sends it before large bodies) goes through the route's
``expect_handler`` (:func:`expect_handler`): a request :func:`check_head` refuses gets its 4xx
without ever being asked for the body; an admitted one is sent ``100 Continue``, as aiohttp's
own default handler does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, NamedTuple

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11
from aiohttp.web_protocol import RequestPayloadError

from webhook.errors import BadRequest, PayloadTooLarge
from webhook.wire.extender import refusal as filter_refusal

JSON: Final = "application/json"
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class BodyTimeout(BadRequest):
    """The body did not arrive in time (408; the connection closes)."""

    status = 408


class Body(NamedTuple):
    """What a POST endpoint reads: a JSON body, named in messages, under the body cap."""

    #: What the body must be, in messages ("the AdmissionReview").
    what: str
    #: Added to the 413 message (how the client can send less).
    too_large_hint: str = ""
    #: The 200 answer carrying that message, for a client that reads the body of a 200 only
    #: (None: a 413).
    too_large_answer: Callable[[str], bytes] | None = None


_SEND_NAMES: Final = "; set nodeCacheCapable: true to send node names"

#: Each POST path's body, for the messages of :func:`expect_handler`.
BODIES: Final = {
    "/mutate": Body("the AdmissionReview"),
    "/validate": Body("the AdmissionReview"),
    # kube-scheduler reports a filter's non-200 as "code 413" alone, dropping the advice, and
    # shows ExtenderFilterResult.Error on the pod: the refusal goes there. (It ignores a
    # prioritize error and scores with its own plugins.)
    "/extender/filter": Body("ExtenderArgs", _SEND_NAMES, filter_refusal),
    "/extender/prioritize": Body("ExtenderArgs", "; set nodeCacheCapable: true to send node names"),
}
_ANY: Final = Body("the request body")


def check_head(request: web.BaseRequest, *, body: Body) -> None:
    """Refuse, from the headers alone, a body the endpoint will not take (BadRequest)."""
    # The exact header first: parsing it ("application/json; charset=utf-8") is rarer work.
    if request.headers.get(hdrs.CONTENT_TYPE) != JSON and request.content_type != JSON:
        raise BadRequest(
            f"Content-Type must be {JSON}, got {request.content_type or 'none'}; "
            f"send {body.what} as JSON"
        )
    length, limit = request.content_length, request.client_max_size
    if length is not None and length > limit:
        raise PayloadTooLarge(
            f"request body of {length} bytes is over the {limit} byte cap{body.too_large_hint}"
        )
    expect = request.headers.get(hdrs.EXPECT)
    if expect is not None and expect.lower() != "100-continue":
        raise BadRequest(f"Expect: {expect} is not supported; send Expect: 100-continue or none")


def plain(status: int, *, text: str) -> web.Response:
    """A one-line ``text/plain`` answer. Header values quoted in it may hold bytes that are not
    UTF-8 (aiohttp keeps them as surrogates): they are written as escapes."""
    body = (text + "\n").encode("utf-8", "backslashreplace")
    return web.Response(status=status, body=body, content_type="text/plain", charset="utf-8")


def answer(err: BadRequest, *, body: Body) -> web.Response:
    """The answer to a refused request: a one-line 4xx, or the endpoint's 200 for a body over
    the cap where the client reads only a 200's body."""
    if body.too_large_answer is not None and isinstance(err, PayloadTooLarge):
        return web.Response(body=body.too_large_answer(err.message), content_type=JSON)
    return plain(err.status, text=err.message)


def refused(err: BadRequest, *, body: Body) -> web.Response:
    """The answer to a refused request whose body may still be coming: the connection closes
    (aiohttp reads and drops what comes for a moment, so the answer is not lost to a reset)."""
    response = answer(err, body=body)
    response.force_close()
    return response


async def expect_handler(request: web.Request) -> web.StreamResponse | None:
    """The POST routes' ``expect_handler``: refuse what :func:`check_head` refuses, else ask
    for the body (``100 Continue``)."""
    body = BODIES.get(request.path, _ANY)
    try:
        check_head(request, body=body)
    except BadRequest as err:
        return refused(err, body=body)
    if request.version == HttpVersion11:
        await request.writer.write(CONTINUE)
        request.writer.output_size = 0  # the answer's own size is counted from here
    return None


async def read_body(request: web.BaseRequest, *, body: Body, seconds: float) -> bytes:
    """The whole body, checked (:func:`check_head`), under the app's cap, within ``seconds``."""
    check_head(request, body=body)
    try:
        async with asyncio.timeout(seconds):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        limit = request.client_max_size
        raise PayloadTooLarge(
            f"request body is over the {limit} byte cap{body.too_large_hint}"
        ) from None
    except RequestPayloadError:
        raise BadRequest(
            "request body could not be decoded (its Content-Encoding or its chunked framing "
            f"is broken); send {body.what} as JSON"
        ) from None
    except TimeoutError:
        raise BodyTimeout(
            f"the request body did not arrive within {seconds:g}s; send it at once"
        ) from None
