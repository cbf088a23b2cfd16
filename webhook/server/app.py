"""The HTTPS transport: ``make_app()``, the routes, and the one place errors become HTTP.

aiohttp appears in this package (and in the cluster layer's I/O), never in the pure engine.
The app is one handler on aiohttp's low-level server (``aiohttp.web.Server``): it dispatches on
the path itself, so a request skips the Application's router, middleware chain and signals,
which cost more per request than stszone's own dictionary lookup (``bench/run.py --profile``).
Unknown paths get 404 and wrong methods 405 with ``Allow``, as aiohttp's router answered.
Admission handlers read the body under a 7 MiB cap, parse it, ask the engine, and write the
review back; a :class:`~webhook.errors.BadRequest` becomes a 4xx with a one-line
message, anything unexpected becomes a logged ``allowed: false`` answer with code 500 in an
HTTP 200 (so the API server shows the reason instead of a connection error), never a traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Final

from aiohttp import hdrs, web, web_response
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion10, HttpVersion11
from prometheus_client import CollectorRegistry

from webhook.errors import BadRequest, PayloadTooLarge, RequestTimeout
from webhook.rules import admission, extender
from webhook.rules.risk import RiskScan
from webhook.server.looplag import LoopLag
from webhook.server.metrics import CacheLike, Metrics, serve_metrics, store_caches
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import Handler, Route, Runtime
from webhook.wire import extender as extender_wire
from webhook.wire import review

log = logging.getLogger("stszone.server")

# aiohttp announces "Python/3.x aiohttp/3.y" in every response, its own error pages included,
# and has no setting for it. It reads this module global when it writes headers; replacing it
# costs nothing per request (a response_prepare signal did, ~3% of throughput).
web_response.SERVER_SOFTWARE = "stszone"  # type: ignore[attr-defined]


_JSON: Final = "application/json"


def _plain(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


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


_http_date: Final = _HttpDate()


class JsonAnswer(web.StreamResponse):
    """A ``200 application/json`` answer written as one piece: status line, headers and body.

    aiohttp's own Response fills a header multidict, runs its preparation steps, then
    serialises the headers, on every request: a tenth of a request's time under load
    (``bench/run.py --profile``). Every JSON answer stszone sends has the same headers, in
    the order aiohttp wrote them (Content-Type, Content-Length, Date, Server, then
    ``Connection`` where HTTP/1.0 keep-alive or a closing HTTP/1.1 connection needs one), so
    they are formatted straight into the bytes written. Keep-alive follows the request and
    :meth:`force_close`, as for any aiohttp response.
    """

    def __init__(self, body: bytes) -> None:
        super().__init__(status=200)
        self.body = body

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._eof_sent:
            return None
        if self._payload_writer is not None:
            return self._payload_writer
        keep_alive = self._keep_alive
        if keep_alive is None:
            keep_alive = self._keep_alive = request.keep_alive
        version = request.version
        if keep_alive:
            connection = b"Connection: keep-alive\r\n" if version == HttpVersion10 else b""
        else:
            connection = b"Connection: close\r\n" if version == HttpVersion11 else b""
        writer = self._payload_writer = request.writer
        self._req = request
        await writer.write(
            b"HTTP/%d.%d 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Date: %s\r\nServer: stszone\r\n%s\r\n%s"
            % (version.major, version.minor, len(self.body), _http_date(), connection, self.body)
        )
        return writer


async def _read_body(
    request: web.BaseRequest, limit: int, *, seconds: float, what: str = "the AdmissionReview"
) -> bytes:
    # The exact header first: parsing it (for "application/json; charset=utf-8") is rarer work.
    if request.headers.get(hdrs.CONTENT_TYPE) != _JSON and request.content_type != _JSON:
        raise BadRequest(
            f"Content-Type must be {_JSON}, got {request.content_type or 'none'}; "
            f"send {what} as JSON"
        )
    length = request.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(f"request body of {length} bytes is over the {limit} byte cap")
    content = request.content
    if content.is_eof():  # the whole body came with the headers: take it as one piece
        return content.read_nowait()
    try:
        # A client that stalls mid-body must not hold the connection (and a shutdown) forever;
        # aiohttp's keep-alive timer only covers connections waiting for their next request.
        async with asyncio.timeout(seconds):
            await _continue(request)
            chunks, size = [], 0
            while chunk := await content.readany():
                size += len(chunk)
                if size > limit:  # chunked, or more than Content-Length said
                    raise PayloadTooLarge(f"request body is over the {limit} byte cap")
                chunks.append(chunk)
            return b"".join(chunks)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g}s; send it at once"
        ) from None


async def _continue(request: web.BaseRequest) -> None:
    """Answer ``Expect: 100-continue`` (curl sends it before large bodies), as aiohttp's router
    did; the body is only waited for after the size cap has been checked."""
    expect = request.headers.get(hdrs.EXPECT)
    if expect is None or request.version != HttpVersion11:
        return
    if expect.lower() != "100-continue":
        raise BadRequest(f"Expect: {expect} is not supported; send Expect: 100-continue or none")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the answer's own size is counted from here


@dataclass(slots=True)
class _Exchange:
    """What one request came to, for the observers: the review, the decision, the status."""

    parsed: review.Request | None = None
    outcome: review.Outcome | None = None
    status: int = 200


Work = Callable[[web.BaseRequest, _Exchange], Awaitable[web.StreamResponse]]


def _served(endpoint: str, work: Work, runtime: Runtime) -> Handler:
    """Wrap a POST handler: in-flight counting, observers, and BadRequest -> a one-line 4xx."""
    in_flight, observers = runtime.in_flight, runtime.observers

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        started = time.perf_counter()
        exchange = _Exchange()
        in_flight.enter()
        try:
            response = await work(request, exchange)
        except BadRequest as err:
            exchange.status = err.status
            response = _plain(err.status, err.message)
        finally:
            in_flight.leave()
            elapsed = time.perf_counter() - started
            for observe in observers:
                observe(endpoint, exchange.parsed, exchange.outcome, elapsed, exchange.status)
        if runtime.shutting_down:
            # Readiness is off and the listener closes soon: tell keep-alive clients (the API
            # server) to reconnect, to a ready replica, instead of sending their next request
            # on a connection that may be closed under it.
            response.force_close()
        return response

    return handle


def admission_handler(endpoint: admission.Endpoint, runtime: Runtime) -> Handler:
    """The handler answering AdmissionReviews on ``/mutate`` or ``/validate``."""
    answer = admission.ANSWER[endpoint]
    settings = runtime.settings
    limit, seconds = settings.max_body, settings.body_timeout

    async def work(request: web.BaseRequest, exchange: _Exchange) -> web.StreamResponse:
        body = await _read_body(request, limit, seconds=seconds)
        parsed = exchange.parsed = review.parse(body)
        try:
            outcome = answer(parsed, store=runtime.store, defaults=runtime.defaults)
        except Exception:
            log.exception("internal error answering %s %s/%s", endpoint, parsed.kind, parsed.name)
            outcome = review.denied(
                "stszone hit an internal error on this request; see the webhook's logs",
                code=500,
                reason="InternalError",
            )
        exchange.outcome = outcome
        return JsonAnswer(review.dumps(review.response(parsed, outcome)))

    return _served(endpoint, work, runtime)


def extender_handler(verb: extender_wire.Verb, runtime: Runtime) -> Handler:
    """The handler answering kube-scheduler's extender ``filter`` or ``prioritize`` verb.

    Bad input is a 4xx with a one-line reason. An internal error in ``filter`` is answered in
    ``ExtenderFilterResult.Error`` (kube-scheduler then reports it on the pod); in
    ``prioritize`` it is a 500, which kube-scheduler ignores, scoring with the other plugins.
    """
    settings = runtime.settings

    async def work(request: web.BaseRequest, exchange: _Exchange) -> web.StreamResponse:
        try:
            body = await _read_body(
                request, settings.max_body, seconds=settings.body_timeout, what="ExtenderArgs"
            )
        except PayloadTooLarge as err:  # full Node objects of a large cluster add up
            raise PayloadTooLarge(
                f"{err.message}; set nodeCacheCapable: true to send node names"
            ) from None
        args = extender_wire.parse_args(body, store=runtime.store)
        store, defaults = runtime.store, runtime.defaults
        try:
            if verb == "filter":
                answer = extender_wire.dumps(
                    extender.filter_nodes(args, store=store, defaults=defaults)
                )
            else:
                answer = extender_wire.dumps(
                    extender.prioritize(args, store=store, defaults=defaults)
                )
        except BadRequest:
            raise
        except Exception:
            log.exception("internal error answering extender/%s", verb)
            message = "stszone hit an internal error on this pod; see the webhook's logs"
            if verb != "filter":
                exchange.status = 500
                return _plain(500, message)
            answer = extender_wire.dumps(extender.filter_error(args, message=message))
        return JsonAnswer(answer)

    return _served(f"extender/{verb}", work, runtime)


async def healthz(request: web.BaseRequest) -> web.Response:
    """Liveness: the event loop answers. Deliberately cheap."""
    return _plain(200, "ok")


def not_ready(runtime: Runtime) -> list[str]:
    """Why ``runtime`` is not ready: failed checks and failed jobs (empty when ready)."""
    failures = [detail for ok, detail in (check() for check in runtime.checks) if not ok]
    return failures + runtime.failed_jobs


def readyz(runtime: Runtime) -> Handler:
    """Readiness: every check passes and the server is not shutting down."""

    async def handle(request: web.BaseRequest) -> web.Response:
        if runtime.shutting_down:
            return _plain(503, "shutting down")
        failures = not_ready(runtime)
        if failures:
            return _plain(503, "not ready: " + "; ".join(failures))
        return _plain(200, "ok")

    return handle


class App:
    """The webhook's one request handler for aiohttp's low-level server: path -> route."""

    def __init__(self, runtime: Runtime, routes: Mapping[str, Route]) -> None:
        self.runtime = runtime
        #: The endpoints by path; read-only once serving.
        self.routes = dict(routes)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        route = self.routes.get(request.path)
        if route is None:
            return _plain(404, "404: Not Found")
        method = request.method
        if method != route.method and not (method == hdrs.METH_HEAD and route.method == "GET"):
            response = _plain(405, "405: Method Not Allowed")
            response.headers[hdrs.ALLOW] = "GET,HEAD" if route.method == "GET" else route.method
            return response
        return await route.handler(request)


def make_app(runtime: Runtime) -> App:
    """The app serving ``runtime``; background jobs run with the runner (``make_runner``)."""
    routes = {
        "/mutate": Route("POST", admission_handler("mutate", runtime)),
        "/validate": Route("POST", admission_handler("validate", runtime)),
        "/extender/filter": Route("POST", extender_handler("filter", runtime)),
        "/extender/prioritize": Route("POST", extender_handler("prioritize", runtime)),
        "/healthz": Route("GET", healthz),
        "/readyz": Route("GET", readyz(runtime)),
    }
    return App(runtime, {**routes, **runtime.extra_routes})


def install_metrics(
    runtime: Runtime,
    *,
    caches: Callable[[], Iterable[CacheLike]] | None = None,
    certificate: Callable[[], dt.datetime] | None = None,
    registry: CollectorRegistry | None = None,
    zone_risk: ZoneRisk | None = None,
) -> Metrics:
    """Give ``runtime`` metrics: the observer, ``/metrics`` on the app or ``--metrics-port``,
    the zone-risk gauges and the event-loop lag probe, with their background jobs.

    Call before ``make_app``. ``caches`` defaults to the sizes of the runtime's store tables;
    ``zone_risk`` to a scan of the runtime's store, refreshed while the runtime is ready.
    """
    if zone_risk is None:
        scan = RiskScan(runtime.store, excluded=runtime.defaults.excluded_namespaces)
        zone_risk = ZoneRisk(
            scan,
            ready=lambda: not not_ready(runtime),
            interval=runtime.settings.zone_risk_interval,
        )
    runtime.jobs.append(zone_risk.run)
    lag = LoopLag()
    runtime.jobs.append(lag.run)
    metrics = Metrics(
        registry=registry,
        caches=caches if caches is not None else store_caches(runtime.store),
        certificate=certificate,
        in_flight=lambda: runtime.in_flight.count,
        ready=lambda: not runtime.shutting_down and not not_ready(runtime),
        collectors=[zone_risk.collector, lag],
    )
    runtime.observers.append(metrics.observe)
    port = runtime.settings.metrics_port
    if port is None:
        runtime.extra_routes["/metrics"] = Route("GET", metrics.handler)
    else:
        host = runtime.settings.host

        async def job() -> None:
            await serve_metrics(metrics, host=host, port=port)

        runtime.jobs.append(job)
    return metrics
