"""HTTP/1.1 for the webhook: one asyncio Protocol per connection over llhttp (``httptools``).

Every answer stszone gives is computed from memory without waiting on anything, so a request
needs no task, no stream and no coroutine: the connection's protocol parses the bytes as they
arrive and, when a request is complete, calls the dispatcher and writes the answer in one
piece, within the same event-loop callback. That is most of what a plain Go ``net/http``
server does per request and less than aiohttp's server (a task per connection, a request
object, a payload stream, a response object; ``docs/performance.md``, seventh round).

What the connection owns, and aiohttp's server did before:

* **Framing**: llhttp parses requests (Content-Length or chunked, pipelined or not); a parse
  error is a 400 naming it, and the connection closes. Keep-alive follows the request
  (HTTP/1.0 keep-alive, ``Connection: close``); a closing answer says ``Connection: close``.
* **Limits**: the request line and headers may take ``MAX_HEAD`` bytes (then 431); the body
  is capped by the dispatcher's :meth:`Dispatcher.admit` (413 before the body when its length
  is announced, as soon as the cap is passed when it is chunked). ``Expect: 100-continue`` is
  answered only when the request was admitted, so a refused client never uploads.
* **Timeouts**: a connection with no request in progress is closed ``idle_timeout`` seconds
  after it opened or its last answer (which also bounds headers trickled byte by byte); a body
  that has not arrived ``body_timeout`` seconds after its headers gets 408 and the connection
  closes. One timer per connection, moved only when it fires early.
* **Back-pressure**: a client that does not read its answers stops being read from.
* **Shutdown**: once the dispatcher says it is closing, every answer says ``Connection: close``
  and closes its connection; :class:`Listener` stops accepting on its own, and
  :meth:`Listener.close` closes what is left (``serve()`` first waits for requests in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Final, Protocol

import httptools

log = logging.getLogger("stszone.server")

#: The request line and headers of one request, at most (aiohttp allowed 8,190 per line).
MAX_HEAD: Final = 64 * 1024

_REASONS: Final = {status.value: status.phrase.encode("ascii") for status in HTTPStatus}


class _HttpDate:
    """The ``Date`` header's value (RFC 9110 IMF-fixdate), formatted once a second."""

    __slots__ = ("second", "value")

    def __init__(self) -> None:
        self.second, self.value = -1, b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second, self.value = now, formatdate(now, usegmt=True).encode("ascii")
        return self.value


http_date: Final = _HttpDate()


@dataclass(slots=True)
class Request:
    """One complete request, as a handler sees it."""

    method: str
    path: str
    #: The ``Content-Type`` header as sent (``None`` when absent).
    content_type_header: str | None = None
    body: bytes = b""
    #: ``Content-Length`` as announced (``None`` when chunked or absent).
    content_length: int | None = None
    #: The ``Expect`` header as sent (``None`` when absent).
    expect: str | None = None

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-cased ("" when there is none)."""
        raw = self.content_type_header
        return "" if raw is None else raw.partition(";")[0].strip().lower()


@dataclass(slots=True)
class Response:
    """What a handler answers: written by the connection with its framing headers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    #: Extra headers, written after ``Server``.
    headers: tuple[tuple[str, str], ...] = ()


def plain(status: int, text: str) -> Response:
    """A one-line ``text/plain`` answer."""
    return Response(status, (text + "\n").encode(), "text/plain; charset=utf-8")


class Dispatcher(Protocol):
    """What a connection serves."""

    def admit(self, request: Request) -> Response | None:
        """Called when the headers are in (no body yet): a refusal, or ``None`` to read on."""

    def too_large(self, request: Request) -> Response:
        """The answer to a body that went over the cap while it was being read."""

    def __call__(self, request: Request) -> Response:
        """The answer to a complete request."""

    @property
    def closing(self) -> bool:
        """True once answers should close their connections (shutdown)."""


@dataclass(slots=True)
class Limits:
    """A connection's timeouts and its largest body."""

    idle_timeout: float
    body_timeout: float
    max_body: int


_IDLE, _HEAD, _BODY, _LINGER, _DONE = range(5)
#: After refusing a body that is still coming, read and drop it this long before closing: a
#: socket closed with unread bytes sends a reset, which can destroy the answer unread.
LINGER: Final = 2.0


def encode(response: Response, *, version: bytes, keep_alive: bool, head: bool = False) -> bytes:
    """The response's bytes: status line, headers (aiohttp's order) and body."""
    status = response.status
    if keep_alive:
        connection = b"Connection: keep-alive\r\n" if version == b"1.0" else b""
    else:
        connection = b"Connection: close\r\n" if version == b"1.1" else b""
    extra = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in response.headers)
    body = response.body
    return (
        b"HTTP/%s %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nDate: %s\r\n"
        b"Server: stszone\r\n%s%s\r\n%s"
    ) % (
        version,
        status,
        _REASONS.get(status, b"Unknown"),
        response.content_type.encode(),
        len(body),
        http_date(),
        extra,
        connection,
        b"" if head else body,
    )


@dataclass(eq=False, slots=True)
class Connection(asyncio.Protocol):
    """One client connection: parse, admit, read the body, dispatch, answer."""

    dispatcher: Dispatcher
    limits: Limits
    listener: Listener
    transport: Any = None
    parser: Any = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    state: int = _IDLE
    #: Bytes of request line and headers received for the request being read.
    head_size: int = 0
    url: bytes = b""
    request: Request | None = None
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    #: The request was refused at its headers: its body is read and dropped, then this is sent.
    refusal: Response | None = None
    deadline: float = 0.0
    timer: asyncio.TimerHandle | None = None
    timer_at: float = 0.0
    in_request: bool = False

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.listener.opened(self)
        self.deadline = self.loop.time() + self.limits.idle_timeout
        self._arm(self.deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.closed(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.state = _DONE
        self._leave()

    def data_received(self, data: bytes) -> None:
        if self.state >= _LINGER:
            return
        if self.state != _BODY:
            self.head_size += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self.state < _LINGER:  # the request before the upgrade was answered
                self.close()
            return
        except httptools.HttpParserCallbackError as err:  # a bug of ours, not the client's
            log.error("internal error reading a request", exc_info=err.__context__)
            if self.state < _LINGER:
                self._answer_and_close(plain(500, "500: stszone hit an internal error"))
            return
        except httptools.HttpParserError as err:
            if self.state < _LINGER:
                self._answer_and_close(
                    plain(400, f"400: Bad Request ({_reason(err)})"), linger=True
                )
            return
        if self.state == _HEAD and self.head_size > MAX_HEAD:
            self._answer_and_close(
                plain(431, f"431: request line and headers over {MAX_HEAD} bytes"),
                version=b"1.1",
                linger=True,
            )
        elif self.state == _BODY and self.timer_at > self.deadline:
            self._arm(self.deadline)  # the body timer is due before the idle one

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself

    def pause_writing(self) -> None:
        self.transport.pause_reading()  # a client that does not read its answers is not read

    def resume_writing(self) -> None:
        if self.state != _DONE:
            self.transport.resume_reading()

    # --- llhttp callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.state >= _LINGER:
            return
        self.state, self.url, self.request = _HEAD, b"", Request("", "")

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.state != _HEAD:
            return
        request = self.request
        assert request is not None  # made at the message's beginning
        lower = name.lower()
        if lower == b"content-type":
            request.content_type_header = value.decode("latin-1")
        elif lower == b"content-length":
            request.content_length = int(value)  # llhttp has checked the digits
        elif lower == b"expect":
            request.expect = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self.state != _HEAD:
            return
        request = self.request
        assert request is not None
        request.method = self.parser.get_method().decode("ascii")
        request.path = _path(self.url)
        self.state, self.size, self.head_size = _BODY, 0, 0
        if request.method not in ("GET", "HEAD"):  # probes and scrapes are answered at once
            self.in_request = True
            self.listener.in_flight.enter()
        self.deadline = self.loop.time() + self.limits.body_timeout
        refusal = self.dispatcher.admit(request)
        if refusal is not None and (
            request.expect is not None or (request.content_length or 0) > self.limits.max_body
        ):
            # A body that will not be read, or that the client waits to be asked for: answer now.
            self._answer_and_close(refusal, linger=True)
            return
        self.refusal = refusal
        if (
            refusal is None
            and request.expect is not None
            and self.parser.get_http_version() == "1.1"
        ):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self.state != _BODY:
            return
        self.size += len(body)
        if self.size > self.limits.max_body:
            assert self.request is not None
            refusal = self.refusal or self.dispatcher.too_large(self.request)
            self._answer_and_close(refusal, linger=True)
        elif self.refusal is None:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.state != _BODY:
            return
        request = self.request
        assert request is not None
        chunks = self.chunks
        if chunks:
            request.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            self.chunks = []
        refusal, self.refusal, self.request = self.refusal, None, None
        try:
            response = refusal if refusal is not None else self.dispatcher(request)
        except Exception:  # the dispatcher answers its own errors; this is the last resort
            log.exception("internal error answering %s %s", request.method, request.path)
            response = plain(500, "500: stszone hit an internal error; see the webhook's logs")
        keep_alive = not self.dispatcher.closing and self.parser.should_keep_alive()
        version = self._version()
        self.transport.write(
            encode(response, version=version, keep_alive=keep_alive, head=request.method == "HEAD")
        )
        self._leave()
        if keep_alive:
            self.state = _IDLE
            self.deadline = self.loop.time() + self.limits.idle_timeout
        else:
            self.close()

    # --- the rest -------------------------------------------------------------------------

    def _leave(self) -> None:
        if self.in_request:
            self.in_request = False
            self.listener.in_flight.leave()

    def _arm(self, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = when
        self.timer = self.loop.call_at(when, self._expire)

    def _expire(self) -> None:
        self.timer = None
        if self.state == _DONE:
            return
        if self.loop.time() < self.deadline:
            self._arm(self.deadline)
        elif self.state == _BODY:
            seconds = self.limits.body_timeout
            self._answer_and_close(
                plain(408, f"the request body did not arrive within {seconds:g}s; send it at once")
            )
        else:  # idle, headers trickling (nothing is owed), or lingering over
            self.close()

    def _answer_and_close(
        self, response: Response, *, version: bytes | None = None, linger: bool = False
    ) -> None:
        """Send ``response`` with ``Connection: close`` and close; with ``linger``, first read
        and drop what the client still sends, for up to :data:`LINGER` seconds."""
        self.transport.write(encode(response, version=version or self._version(), keep_alive=False))
        self._leave()
        if not linger:
            self.close()
            return
        self.state, self.chunks, self.request, self.refusal = _LINGER, [], None, None
        self.deadline = self.loop.time() + LINGER
        if self.timer_at > self.deadline:
            self._arm(self.deadline)

    def _version(self) -> bytes:
        """The request's HTTP version for the answer ("1.1" before a request line was read)."""
        version = self.parser.get_http_version()
        return b"1.0" if version == "1.0" else b"1.1"

    def close(self) -> None:
        self.state = _DONE
        self.chunks, self.request, self.refusal = [], None, None
        self.transport.close()


def _path(url: bytes) -> str:
    if url[:1] != b"/":  # absolute-form ("http://host/mutate") or "*"
        try:
            url = httptools.parse_url(url).path or b""
        except httptools.HttpParserInvalidURLError:
            return ""
    return url.partition(b"?")[0].decode("latin-1")


def _reason(err: Exception) -> str:
    return str(err).strip() or type(err).__name__


class InFlightCounter(Protocol):
    """What the listener counts requests in (``runtime.InFlight``)."""

    def enter(self) -> None: ...

    def leave(self) -> None: ...


@dataclass(eq=False)
class Listener:
    """A listening socket serving :class:`Connection` s, and the connections it accepted."""

    dispatcher: Dispatcher
    limits: Limits
    in_flight: InFlightCounter
    connections: set[Connection] = field(default_factory=set)
    server: asyncio.Server | None = None
    #: Set whenever no connection is open.
    quiet: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, host: str, port: int, *, ssl: Any) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            self._connection, host, port, ssl=ssl, reuse_address=True
        )

    def __post_init__(self) -> None:
        self.quiet.set()

    def _connection(self) -> Connection:
        return Connection(self.dispatcher, self.limits, self)

    def opened(self, conn: Connection) -> None:
        self.connections.add(conn)
        self.quiet.clear()

    def closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if not self.connections:
            self.quiet.set()

    @property
    def port(self) -> int:
        assert self.server is not None
        sockets = self.server.sockets
        port: int = sockets[0].getsockname()[1]
        return port

    def stop_accepting(self) -> None:
        """Close the listening socket; accepted connections are served on."""
        if self.server is not None:
            self.server.close()

    async def close(self, *, grace: float = 1.0) -> None:
        """Stop accepting and close every connection (what is being written is flushed first;
        a connection still open after ``grace`` seconds is aborted)."""
        self.stop_accepting()
        for conn in list(self.connections):
            conn.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.quiet.wait()
        for conn in list(self.connections):
            conn.transport.abort()
            self.closed(conn)
        if self.server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.server.wait_closed()
