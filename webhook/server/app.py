"""The webhook's endpoints: ``make_app()``, the routes, and the one place errors become HTTP.

The app is the dispatcher of :mod:`webhook.server.http`'s connections: it admits a request at
its headers (the route's method, a JSON Content-Type, the 7 MiB cap, ``Expect``), then answers
the complete request from memory. Unknown paths get 404 and wrong methods 405 with ``Allow``.
Admission handlers parse the body, ask the engine, and write the review back; a
:class:`~webhook.errors.BadRequest` becomes a 4xx with a one-line message, anything unexpected
becomes a logged ``allowed: false`` answer with code 500 in an HTTP 200 (so the API server
shows the reason instead of a connection error), never a traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry

from webhook.errors import BadRequest, PayloadTooLarge
from webhook.rules import admission, extender
from webhook.rules.risk import RiskScan
from webhook.server.http import Request, Response, plain
from webhook.server.looplag import LoopLag
from webhook.server.metrics import CacheLike, Metrics, serve_metrics, store_caches
from webhook.server.riskmetrics import ZoneRisk
from webhook.server.runtime import Body, Handler, Observer, Route, Runtime
from webhook.wire import extender as extender_wire
from webhook.wire import review

log = logging.getLogger("stszone.server")

_JSON: Final = "application/json"


@dataclass(slots=True)
class _Exchange:
    """What one request came to, for the observers: the review, the decision, the status."""

    parsed: review.Request | None = None
    outcome: review.Outcome | None = None
    status: int = 200


Work = Callable[[Request, _Exchange], Response]


def _served(endpoint: str, work: Work, runtime: Runtime) -> Handler:
    """Wrap a POST handler: observers, and BadRequest -> a one-line 4xx.

    The observers (metrics, the decision log) run once the answer is written: the connection
    writes it when the handler returns, and the loop calls them soon after (``call_soon``),
    before the callbacks of whatever it reads next. Their cost is then off the API server's
    wait; the duration they record is the handler's, as before.
    """
    observers = runtime.observers

    def handle(request: Request) -> Response:
        started = time.perf_counter()
        exchange = _Exchange()
        try:
            response = work(request, exchange)
        except BadRequest as err:
            exchange.status = err.status
            response = plain(err.status, err.message)
        finally:
            asyncio.get_running_loop().call_soon(
                _observe,
                observers,
                endpoint,
                exchange.parsed,
                exchange.outcome,
                time.perf_counter() - started,
                exchange.status,
            )
        return response

    return handle


def _observe(
    observers: Iterable[Observer],
    endpoint: str,
    parsed: review.Request | None,
    outcome: review.Outcome | None,
    seconds: float,
    status: int,
) -> None:
    """Tell every observer about one request; one that fails is logged and the others still
    run (after an answer is written, nothing else would report it: the loop's own handler logs
    through asyncio's logger, which ``serve`` silences)."""
    for observer in observers:
        try:
            observer(endpoint, parsed, outcome, seconds, status)
        except Exception:
            log.exception("internal error observing a request to /%s", endpoint)


def admission_handler(endpoint: admission.Endpoint, runtime: Runtime) -> Handler:
    """The handler answering AdmissionReviews on ``/mutate`` or ``/validate``."""
    answer = admission.ANSWER[endpoint]

    def work(request: Request, exchange: _Exchange) -> Response:
        parsed = exchange.parsed = review.parse(request.body)
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
        return Response(200, review.dumps(review.response(parsed, outcome)))

    return _served(endpoint, work, runtime)


def extender_handler(verb: extender_wire.Verb, runtime: Runtime) -> Handler:
    """The handler answering kube-scheduler's extender ``filter`` or ``prioritize`` verb.

    Bad input is a 4xx with a one-line reason. An internal error in ``filter`` is answered in
    ``ExtenderFilterResult.Error`` (kube-scheduler then reports it on the pod); in
    ``prioritize`` it is a 500, which kube-scheduler ignores, scoring with the other plugins.
    """

    def work(request: Request, exchange: _Exchange) -> Response:
        args = extender_wire.parse_args(request.body, store=runtime.store)
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
                return plain(500, message)
            answer = extender_wire.dumps(extender.filter_error(args, message=message))
        return Response(200, answer)

    return _served(f"extender/{verb}", work, runtime)


def healthz(request: Request) -> Response:
    """Liveness: the event loop answers. Deliberately cheap."""
    return plain(200, "ok")


def not_ready(runtime: Runtime) -> list[str]:
    """Why ``runtime`` is not ready: failed checks and failed jobs (empty when ready)."""
    failures = [detail for ok, detail in (check() for check in runtime.checks) if not ok]
    return failures + runtime.failed_jobs


def readyz(runtime: Runtime) -> Handler:
    """Readiness: every check passes and the server is not shutting down."""

    def handle(request: Request) -> Response:
        if runtime.shutting_down:
            return plain(503, "shutting down")
        failures = not_ready(runtime)
        if failures:
            return plain(503, "not ready: " + "; ".join(failures))
        return plain(200, "ok")

    return handle


_NOT_FOUND: Final = plain(404, "404: Not Found")


class App:
    """The webhook's dispatcher for :mod:`webhook.server.http`: path -> route."""

    def __init__(self, runtime: Runtime, routes: Mapping[str, Route]) -> None:
        self.runtime = runtime
        #: The endpoints by path; read-only once serving.
        self.routes = dict(routes)
        self._max_body = runtime.settings.max_body

    @property
    def closing(self) -> bool:
        """Answers close their connections once SIGTERM came: keep-alive clients (the API
        server) reconnect, to a ready replica, instead of sending their next request on a
        connection that may be closed under them."""
        return self.runtime.shutting_down

    def _route(self, request: Request) -> Route | Response:
        route = self.routes.get(request.path)
        if route is None:
            return _NOT_FOUND
        method = request.method
        if method != route.method and not (method == "HEAD" and route.method == "GET"):
            allow = "GET,HEAD" if route.method == "GET" else route.method
            return Response(
                405, b"405: Method Not Allowed\n", "text/plain; charset=utf-8", (("Allow", allow),)
            )
        return route

    def admit(self, request: Request) -> Response | None:
        """At the headers: refuse a body the route does not take, before it is uploaded."""
        route = self._route(request)
        if isinstance(route, Response) or route.body is None:
            return None  # answered when complete (a body, if any, is read and dropped)
        body = route.body
        try:
            # The exact header first: parsing it ("application/json; charset=utf-8") is rarer.
            if request.content_type_header != _JSON and request.content_type != _JSON:
                raise BadRequest(
                    f"Content-Type must be {_JSON}, got {request.content_type or 'none'}; "
                    f"send {body.what} as JSON"
                )
            length = request.content_length
            if length is not None and length > self._max_body:
                raise PayloadTooLarge(
                    f"request body of {length} bytes is over the {self._max_body} byte cap"
                    + body.too_large_hint
                )
            expect = request.expect
            if expect is not None and expect.lower() != "100-continue":
                raise BadRequest(
                    f"Expect: {expect} is not supported; send Expect: 100-continue or none"
                )
        except BadRequest as err:
            return self._refused(body, err)
        return None

    def too_large(self, request: Request) -> Response:
        """A body (chunked, or longer than announced) that went over the cap while read."""
        route = self._route(request)
        body = route.body if isinstance(route, Route) else None
        err = PayloadTooLarge(f"request body is over the {self._max_body} byte cap")
        if body is None:
            return plain(err.status, err.message)
        err.message += body.too_large_hint
        return self._refused(body, err)

    def _refused(self, body: Body, err: BadRequest) -> Response:
        _observe(self.runtime.observers, body.endpoint, None, None, 0.0, err.status)
        return plain(err.status, err.message)

    def __call__(self, request: Request) -> Response:
        route = self._route(request)
        if isinstance(route, Response):
            return route
        return route.handler(request)


def make_app(runtime: Runtime) -> App:
    """The app serving ``runtime``; background jobs run with the server (``serve``)."""
    nodes_hint = "; set nodeCacheCapable: true to send node names"
    routes = {
        "/mutate": Route(
            "POST", admission_handler("mutate", runtime), Body("the AdmissionReview", "mutate")
        ),
        "/validate": Route(
            "POST", admission_handler("validate", runtime), Body("the AdmissionReview", "validate")
        ),
        "/extender/filter": Route(
            "POST",
            extender_handler("filter", runtime),
            Body("ExtenderArgs", "extender/filter", nodes_hint),
        ),
        "/extender/prioritize": Route(
            "POST",
            extender_handler("prioritize", runtime),
            Body("ExtenderArgs", "extender/prioritize", nodes_hint),
        ),
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
    settle: Callable[[], None] | None = None,
) -> Metrics:
    """Give ``runtime`` metrics: the observer, ``/metrics`` on the app or ``--metrics-port``,
    the zone-risk gauges and the event-loop lag probe, with their background jobs.

    Call before ``make_app``. ``caches`` defaults to the sizes of the runtime's store tables;
    ``zone_risk`` to a scan of the runtime's store, refreshed while the runtime is ready, which
    calls ``settle`` once its first pass is done.
    """
    if zone_risk is None:
        scan = RiskScan(runtime.store, excluded=runtime.defaults.excluded_namespaces)
        zone_risk = ZoneRisk(
            scan,
            ready=lambda: not not_ready(runtime),
            interval=runtime.settings.zone_risk_interval,
            settle=settle,
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
